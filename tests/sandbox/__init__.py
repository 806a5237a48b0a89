"""Tests of grader.sandbox."""
