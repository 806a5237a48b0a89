"""Judging a submission: the graded session, one case's verdict, comparison, causality, diagnosis, fairness, scoring.

Modules: causality, compare, diagnose, evidence, fairness, judge, probes, pytest_suite, score, suite, vectorization.
"""
