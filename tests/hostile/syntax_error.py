"""A syntax error: every test fails as import-error naming file and line."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True:
    return X
