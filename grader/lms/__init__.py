"""Learning management systems: Canvas and Moodle gradebooks, Gradescope's zip and its entry point.

Modules: autograder, canvas, gradescope_zip, moodle, reports.
"""
