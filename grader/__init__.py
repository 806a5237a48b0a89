"""An autograder for the multi-head attention exercise (§4.5)."""

__version__ = "0.1.0"
