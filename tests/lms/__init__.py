"""Tests of grader.lms."""
