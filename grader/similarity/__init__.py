"""`grade similar OUTDIR`: evidence of shared work across a class (shared code, shared wrong outputs).

Modules: reading (the class's files, read as grading reads them), fingerprints (normalized tokens,
winnowing), calibration (how independent work scores), analysis (the evidence and findings over a
batch's reports), page (similarity.html), run (the command's files). The public API is here; nothing
outside reaches the modules.
"""

from grader.similarity.analysis import analyse, calibrate, clusters, containment, wrong_outputs
from grader.similarity.calibration import Calibration
from grader.similarity.fingerprints import Fingerprint, fingerprint, normalize, starter_functions, starter_hashes
from grader.similarity.page import render_html
from grader.similarity.reading import Work, calibration_sources, load_works, read_code
from grader.similarity.run import SimilarityError, run_similarity, terminal_lines

__all__ = ["Calibration", "Fingerprint", "SimilarityError", "Work", "analyse", "calibrate", "calibration_sources",
           "clusters", "containment", "fingerprint", "load_works", "normalize", "read_code", "render_html",
           "run_similarity", "starter_functions", "starter_hashes", "terminal_lines", "wrong_outputs"]
