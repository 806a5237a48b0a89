"""`grade similar OUTDIR`: evidence of shared work across a class (shared code, shared wrong outputs).

Modules: fingerprints (normalized tokens, winnowing), analysis (the evidence, calibration and
clusters over a batch's reports), page (similarity.html), run (the command's files). The public API
is here; nothing outside reaches the modules.
"""

from grader.similarity.analysis import (
           Work,
           analyse,
           calibrate,
           calibration_sources,
           clusters,
           load_works,
           wrong_outputs,
)
from grader.similarity.fingerprints import Fingerprint, fingerprint, normalize, starter_hashes
from grader.similarity.page import render_html
from grader.similarity.run import SimilarityError, run_similarity, terminal_lines

__all__ = ["Fingerprint", "SimilarityError", "Work", "analyse", "calibrate", "calibration_sources", "clusters",
           "fingerprint", "load_works", "normalize", "render_html", "run_similarity", "starter_hashes",
           "terminal_lines", "wrong_outputs"]
