"""Tests of grader.submission.load."""
