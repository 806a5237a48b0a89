"""The native JSON report and every format rendered from it (text, Gradescope, PrairieLearn, HTML, pictures).

Modules: csvcells, formats, gradescope, html, native, pictures, points, prairielearn, visibility.
"""
