"""Exporters from the native JSON report to LMS formats, one module per format.

Each exporter is a pure function from the native report dict (see the README's
key table) to the format's own structure: ``gradescope.results``,
``prairielearn.results``, ``canvas``/``moodle`` gradebook rows. What a student
may see of a hidden test is decided once, in ``visibility``, and the exporters
only format what it lets through.
"""
