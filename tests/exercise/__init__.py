"""Tests of grader.exercise."""
