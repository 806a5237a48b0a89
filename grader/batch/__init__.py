"""Grading a class: discovery, workers, the gradebook and the summary page.

Modules: discover, gradebook, run, summary_html, workers. `grade similar` is grader.similarity, `grade diff` grader.regrade.
"""
