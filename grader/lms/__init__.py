"""Learning management systems: one module per LMS behind ``base.LMS``, listed once in ``registry``.

Modules: base (the interface), registry (the list discovery and the export group ask), reports (a folder
of reports), gradescope, canvas, moodle, prairielearn (one per LMS), gradescope_zip and autograder
(Gradescope's zip and its entry point).
"""
