"""How independent work scores: the distributions a code score is judged against, and the flag thresholds.

A short exercise makes independent solutions alike, so a score means something only beside the
scores of pairs known to be independent. Each distribution (the whole-file score, the containment
score, and the score of each of the exercise's functions) is modelled as logit-normal: the logit
of the scores of the independent pairs is fitted with a normal distribution (mean and standard
deviation), and a score is flagged where the model puts the chance that an independent pair
scores as high below FALSE_FLAG_RATE. Two rules keep the model honest where it has few points: the
threshold is never below the highest independent score plus FLOOR_MARGIN (no calibration pair is
ever flagged), and with fewer than MIN_PAIRS independent pairs the threshold is FALLBACK.

The class itself is a second sample of independent work while most of its pairs are (``class_fit``):
its pair scores (the raw scores, not their logits: most of a class's pairs score near 0, where logits
spread without bound) are fitted robustly, with their median and median absolute deviation, which a
minority of copies does not move, and where that fit asks for a higher threshold, it is used. It is
not used when more than CLASS_ALIKE of the class's pairs score above the model's threshold: then the
class is not mostly independent (a shared template or tutorial), and its median and deviation
describe that. It never raises the threshold above CLASS_CAP, so that near-identical code is always
flagged; a pair whose files hold each other's fingerprints whole (identical code) is flagged whatever
the threshold (grader.similarity.analysis).

Wrong outputs have a calibration of their own (``KnownOutputs``): the wrong outputs that independent
people produce on the exercise's cases (public implementations, solutions written fresh, natural
mistakes), graded once by the real pipeline and shipped with the exercise as signatures
(``assignments/<name>/wrong_outputs.json``, written by benchmarks/wrong_outputs_calibration.py). A wrong
output in that set is evidence of nothing. The file carries a key of what its outputs depend on
(``outputs_key``); a file whose key is not the configuration's is stale and is not used.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

FALSE_FLAG_RATE = 1e-4  # the modelled chance that one independent pair is flagged
FLOOR_MARGIN = 0.02  # a flagged score lies at least this far above the highest independent one
MIN_PAIRS = 3  # fewer independent pairs fit no model: FALLBACK is the threshold
FALLBACK = 0.90
CLASS_PAIRS = 50  # the class's own scores are fitted when it has at least this many pairs
CLASS_ALIKE = 0.25  # the class's fit is used only while at most this share of its pairs score above the model's threshold
CLASS_CAP = FALLBACK  # the class's fit never raises the threshold above this
MODEL, CLASS = "independent solutions", "class"  # which fit set the code threshold
_EDGE = 1e-3  # scores are clipped to [_EDGE, 1 - _EDGE] before their logit is taken
_Z = NormalDist().inv_cdf(1 - FALSE_FLAG_RATE)


def _logit(score: float) -> float:
    score = min(1 - _EDGE, max(_EDGE, score))
    return math.log(score / (1 - score))


def _expit(value: float) -> float:
    return 1 / (1 + math.exp(-value))


def _percentile(ordered: Sequence[float], score: float) -> float:
    """The share of the sorted ``ordered`` scores below ``score``, in percent (100 with none: above every one)."""
    if not ordered:
        return 100.0
    return round(100.0 * bisect.bisect_left(ordered, score) / len(ordered), 1)


@dataclass
class Scale:
    """One distribution of independent scores (sorted), its logit-normal fit and the threshold it gives."""

    scores: list[float]
    mean: float = 0.0  # of the logits
    sd: float = 0.0
    threshold: float = FALLBACK

    def percentile(self, score: float) -> float:
        """The share of independent pairs scoring below ``score``, in percent (100: above every one)."""
        return _percentile(self.scores, score)

    def chance(self, score: float) -> float:
        """The modelled chance that an independent pair scores ``score`` or more (1.0 without a model)."""
        if len(self.scores) < MIN_PAIRS or self.sd <= 0:
            return 1.0 if score <= self.threshold else 0.0
        return 1 - NormalDist(self.mean, self.sd).cdf(_logit(score))

    def summary(self) -> dict:
        """The scale as similarity.json states it."""
        return {"pairs": len(self.scores), "median": self.scores[len(self.scores) // 2] if self.scores else None,
                "max": self.scores[-1] if self.scores else None, "logit_mean": round(self.mean, 4),
                "logit_sd": round(self.sd, 4), "threshold": self.threshold}


def fit(scores: Sequence[float]) -> Scale:
    """The Scale of the independent pairs' ``scores``: a logit-normal fit, thresholded at FALSE_FLAG_RATE."""
    ordered = sorted(round(s, 4) for s in scores)
    if len(ordered) < MIN_PAIRS:
        return Scale(ordered)
    logits = [_logit(s) for s in ordered]
    mean = sum(logits) / len(logits)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logits) / (len(logits) - 1))
    threshold = max(_expit(mean + _Z * sd), ordered[-1] + FLOOR_MARGIN)
    return Scale(ordered, mean, sd, round(min(1.0, threshold), 4))


@dataclass(frozen=True)
class ClassFit:
    """The robust fit of the class's own pair scores, and whether it may raise the code threshold.

    median, spread: of the raw scores (spread: 1.4826 times the median absolute deviation, a normal
    distribution's standard deviation); threshold: the score such a distribution exceeds with
    FALSE_FLAG_RATE, capped at CLASS_CAP (0.0 with fewer than CLASS_PAIRS pairs). alike: the pairs scoring
    above the model's threshold. usable: the fit describes independent work (enough pairs, and at most
    CLASS_ALIKE of them alike).
    """

    scores: list[float]  # sorted
    model_threshold: float
    median: float = 0.0
    spread: float = 0.0
    fitted: float = 0.0  # the fit's threshold before the cap
    alike: int = 0

    @property
    def pairs(self) -> int:
        return len(self.scores)

    @property
    def threshold(self) -> float:
        return round(min(CLASS_CAP, self.fitted), 4)

    @property
    def usable(self) -> bool:
        return self.pairs >= CLASS_PAIRS and self.alike <= CLASS_ALIKE * self.pairs

    @property
    def sets_threshold(self) -> bool:
        """Whether this fit, not the model of independent solutions, sets the code threshold."""
        return self.usable and self.threshold > self.model_threshold

    def percentile(self, score: float) -> float:
        """The share of the class's pairs that share code (score above 0) scoring below ``score``, in percent."""
        return _percentile(self.scores, score)

    def chance(self, score: float) -> float:
        """The fit's chance that one of the class's pairs scores ``score`` or more (1.0 or 0.0 without a spread)."""
        if self.spread <= 0:
            return 1.0 if score <= self.median else 0.0
        return 1 - NormalDist(self.median, self.spread).cdf(score)

    def summary(self) -> dict:
        """similarity.json's ``calibration.class_fit``."""
        asks = f"it asks for {self.fitted:.2f}" + (f", capped at {CLASS_CAP:.2f}" if self.fitted > CLASS_CAP else "")
        if self.pairs < CLASS_PAIRS:
            why = f"not fitted: {self.pairs} pair(s) of the class score above 0, fewer than {CLASS_PAIRS}"
        elif not self.usable:
            why = (f"not used: {self.alike} of its {self.pairs} pairs score above the model's threshold "
                   f"{self.model_threshold:.2f}, more than {CLASS_ALIKE:.0%}, so the class is not mostly independent "
                   "(a shared template or tutorial?) and its fit would describe what they share")
        elif self.sets_threshold:
            why = f"used: {asks}, above the model's {self.model_threshold:.2f}"
        else:
            why = f"not needed: {asks}, not above the model's {self.model_threshold:.2f}"
        return {"pairs": self.pairs, "median": round(self.median, 4), "spread": round(self.spread, 4),
                "threshold": self.threshold, "fitted": self.fitted, "alike_pairs": self.alike, "alike_share_limit": CLASS_ALIKE,
                "cap": CLASS_CAP, "used": self.sets_threshold, "note": why}


def class_fit(scores: Sequence[float], model_threshold: float) -> ClassFit:
    """The ClassFit of the class's pair ``scores`` (those above 0), beside the model's threshold.

    Median and median absolute deviation of the raw scores (a minority of copies moves neither): the score
    a normal distribution of that centre and spread exceeds with FALSE_FLAG_RATE.
    """
    ordered = sorted(float(s) for s in scores)
    alike = len(ordered) - bisect.bisect_right(ordered, model_threshold)
    if len(ordered) < CLASS_PAIRS:
        return ClassFit(ordered, model_threshold, alike=alike)
    median = ordered[len(ordered) // 2]
    mad = sorted(abs(x - median) for x in ordered)[len(ordered) // 2]
    return ClassFit(ordered, model_threshold, median, 1.4826 * mad, round(min(1.0, median + _Z * 1.4826 * mad), 4),
                    alike)


@dataclass
class Calibration:
    """The independent solutions' scales: whole files (``code``), containment, and each function by name."""

    files: list[str]
    code: Scale
    contain: Scale
    functions: dict[str, Scale] = field(default_factory=dict)

    @property
    def threshold(self) -> float:
        return self.code.threshold

    @property
    def scores(self) -> list[float]:
        return self.code.scores

    def percentile(self, score: float) -> float:
        return self.code.percentile(score)

    def summary(self) -> dict:
        """similarity.json's ``calibration``."""
        return {"independent_files": len(self.files), "independent_pairs": len(self.code.scores),
                "false_flag_rate": FALSE_FLAG_RATE, "max": self.code.summary()["max"],
                "median": self.code.summary()["median"], "threshold": self.code.threshold,
                "code": self.code.summary(), "containment": self.contain.summary(),
                "functions": {name: scale.summary() for name, scale in sorted(self.functions.items())},
                "files": self.files}


# ---- the calibration of wrong outputs ----------------------------------------------------------

OUTPUTS_FORMAT = 1  # of wrong_outputs.json and of its signatures; a file of another format is stale
MAX_SIGNATURES = 100_000  # a calibration file holds at most this many signatures (16 hex digits each)
MAX_OUTPUTS_BYTES = 4 << 20  # a larger calibration file is not read
CURRENT, STALE, ABSENT, UNREADABLE = "current", "stale", "absent", "unreadable"


def output_signature(test: str, output: str) -> str:
    """The signature of one wrong output: the first 16 hex digits of the sha256 of the test's name and what it
    returned (grader.similarity.analysis.wrong_outputs's value: the message, with 6 significant digits)."""
    return hashlib.sha256(f"{test}\0{output}".encode()).hexdigest()[:16]


def outputs_key(assignment: str, grading: dict, files: Sequence[Path]) -> str:
    """sha256 of what the wrong outputs on the exercise's cases depend on: the assignment's name, ``grading``
    (the configuration's seed, number of random cases, params, rtol, atol and visibility, as plain JSON) and
    the bytes of ``files`` (its case builders and its reference). The grader's own wording of a message is not
    in it: the slow test that grades the sources again holds that."""
    digest = hashlib.sha256(json.dumps({"format": OUTPUTS_FORMAT, "assignment": assignment, "grading": grading},
                                       sort_keys=True, default=str).encode())
    for path in files:
        digest.update(f"{Path(path).name}\0".encode())
        digest.update(hashlib.sha256(Path(path).read_bytes()).digest() if Path(path).is_file() else b"-")
    return digest.hexdigest()


@dataclass(frozen=True)
class KnownOutputs:
    """The wrong outputs independent work produces (signatures), and whether the exercise's file was usable.

    status: CURRENT (used), STALE (made for other cases or configuration: not used), ABSENT (no file),
    UNREADABLE (not a calibration file: not used). Only a CURRENT file's signatures are held.
    """

    status: str = ABSENT
    signatures: frozenset[str] = frozenset()
    sources: int = 0  # independent files graded to make it
    path: str = ""

    def holds(self, test: str, output: str) -> bool:
        return output_signature(test, output) in self.signatures

    def summary(self) -> dict:
        """similarity.json's ``calibration.wrong_outputs``."""
        again = "write it again: python benchmarks/wrong_outputs_calibration.py"
        said = {CURRENT: f"{len(self.signatures)} wrong outputs of {self.sources} independent solutions, none of "
                         "them evidence",
                STALE: f"made for other cases or another configuration, so not used: shared wrong outputs are "
                       f"weighed by the class alone ({again})",
                ABSENT: "shared wrong outputs are weighed by the class alone (write one: python "
                        "benchmarks/wrong_outputs_calibration.py --assignment NAME)",
                UNREADABLE: f"not a calibration file of wrong outputs, so not used: shared wrong outputs are weighed "
                            f"by the class alone ({again})"}
        return {"status": self.status, "file": self.path, "signatures": len(self.signatures),
                "sources": self.sources, "note": said[self.status]}


def load_known_outputs(path: Path, key: str) -> KnownOutputs:
    """The calibration of wrong outputs at ``path`` (wrong_outputs.json), used only if its key is ``key``."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_OUTPUTS_BYTES:
            return KnownOutputs(UNREADABLE, path=str(path))
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return KnownOutputs(ABSENT, path=str(path))
    except (OSError, ValueError):
        return KnownOutputs(UNREADABLE, path=str(path))
    signatures = data.get("signatures") if isinstance(data, dict) else None
    if (not isinstance(signatures, list) or len(signatures) > MAX_SIGNATURES
            or not all(isinstance(s, str) and len(s) == 16 for s in signatures)):
        return KnownOutputs(UNREADABLE, path=str(path))
    sources = data.get("sources") if isinstance(data.get("sources"), int) else 0
    if data.get("format") != OUTPUTS_FORMAT or data.get("key") != key:
        return KnownOutputs(STALE, sources=sources, path=str(path))
    return KnownOutputs(CURRENT, frozenset(signatures), sources, str(path))


def known_outputs_document(assignment: str, key: str, signatures: Sequence[str], sources: Sequence[str]) -> dict:
    """wrong_outputs.json's content: the signatures (sorted, each once) of the wrong outputs the ``sources`` (their
    names) returned, under ``key`` (outputs_key). Raises ValueError past MAX_SIGNATURES."""
    unique = sorted(set(signatures))
    if len(unique) > MAX_SIGNATURES:
        raise ValueError(f"{len(unique)} signatures: over {MAX_SIGNATURES}")
    return {"about": ("Wrong outputs that independent solutions return on this exercise's cases (grade similar: a "
                      "shared wrong output among them is no evidence). Signatures: grader.similarity.calibration."
                      "output_signature. Written by benchmarks/wrong_outputs_calibration.py; do not edit."),
            "format": OUTPUTS_FORMAT, "assignment": assignment, "key": key, "sources": len(sources),
            "source_files": sorted(sources), "signatures": unique}
