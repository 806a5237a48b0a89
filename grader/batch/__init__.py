"""Grading a class: discovery, workers, the gradebook and the summary page.

Modules: discover, fingerprints, gradebook, regrade, regrade_html, run, similarity, similarity_html, similarity_run, summary_html.
"""
