"""PrairieLearn: its external grader reads the results.json that ``grade FILE --format prairielearn`` writes.

No download layout and no gradebook export: PrairieLearn grades each
submission itself. Its results format is built by ``grader.report.prairielearn``.
"""

from __future__ import annotations

from grader.lms.base import LMS


class PrairieLearn(LMS):
    name = "prairielearn"
    title = "PrairieLearn"
    results_format = "prairielearn"
