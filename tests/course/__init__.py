"""Tests of grader.course."""
