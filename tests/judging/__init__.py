"""Tests of grader.judging."""
