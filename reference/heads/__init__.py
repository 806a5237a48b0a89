"""The split/merge heads exercise (§0.1, Exercise 0.1c), trusted side: the reference, its misconception variants and trivial implementations (solution.py)."""
