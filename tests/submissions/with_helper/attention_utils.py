"""Helper module of a two-file submission: it defines none of the exercise's functions."""

import numpy as np


def stable_softmax(logits):
    """Softmax over the last axis, shifted by its maximum so exp never overflows."""
    shifted = logits - logits.max(-1, keepdims=True)
    p = np.exp(shifted)
    return p / p.sum(-1, keepdims=True)
