"""Trusted reference solutions; never shipped to students, never imported by student code."""
