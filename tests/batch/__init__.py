"""Tests of grader.batch.run."""
