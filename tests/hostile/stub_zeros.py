"""No attention at all: validates shapes like correct.py, then returns zeros of the right shape."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    if W_Q.shape[0] != X.shape[-1] or W_K.shape != W_Q.shape or W_V.shape[0] != X.shape[-1]:
        raise ValueError("shapes disagree")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError("bad widths")
    return np.zeros(X.shape[:-1] + (W_O.shape[1],))


def attention_param_count(d, h, d_k=None, bias=False):
    raise NotImplementedError


def head_entropy(A):
    raise NotImplementedError
