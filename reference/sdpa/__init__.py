"""The scaled dot-product attention exercise (§4.3), trusted side: the reference, its misconception variants and trivial implementations (solution.py)."""
