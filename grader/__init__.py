"""An exercise autograder: the engine (grader/) grades the course's assignments (assignments/, reference/)."""

__version__ = "0.1.0"
