"""Course tools: the grader's self-test and the student kit.

Modules: selftest, student_kit.
"""
