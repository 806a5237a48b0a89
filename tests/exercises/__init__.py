"""Tests of the course's exercises (assignments/, reference/)."""
