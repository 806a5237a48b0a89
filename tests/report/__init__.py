"""Tests of grader.report.native."""
