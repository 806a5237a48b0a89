# Source: https://github.com/pbloem/former
# Commit: d995052c3762af62c1439f310ae208344583f3fe (2023-08-15; the scale was fixed to the head width s in e3125a4,
#         2024-05-07, "Fix bug in scaling MHSA.")
# Paths: former/modules.py (SelfAttention), former/util/util.py (mask_)
# Author: Peter Bloem
# Licence: MIT (LICENSE: Copyright (c) 2019 Peter Bloem)
# Port: PyTorch to numpy, mistakes kept: the layer is built for emb = the input's width, with its assert and
#   s = e // h; view is reshape, transpose is swapaxes, torch.bmm is @; queries and keys are each divided by
#   e ** (1/4); mask_ sets the strict upper triangle to -inf; F.softmax(dim=2) subtracts the row maximum, as torch's
#   does; kqnorm (off by default) is left out.
# Glue (marked "# glue"): the exercise's signature, mask=causal, the unbatched case, attention_param_count and
#   head_entropy (written for the exercise from its statement).
import numpy as np


def mask_(matrices, maskval=0.0, mask_diagonal=True):
    """
    Masks out all values in the given batch of matrices where i <= j holds,
    i < j if mask_diagonal is false

    In place operation
    """
    h, w = matrices.shape[-2], matrices.shape[-1]
    indices = np.triu_indices(h, k=0 if mask_diagonal else 1, m=w)
    matrices[..., indices[0], indices[1]] = maskval


class SelfAttention:
    """
    Canonical implementation of multi-head self attention.
    """

    def __init__(self, emb, heads, tokeys, toqueries, tovalues, unifyheads, mask=False):
        assert emb % heads == 0, f'Embedding dimension ({emb}) should be divisible by nr. of heads ({heads})'
        self.emb = emb
        self.heads = heads
        self.mask = mask
        self.tokeys, self.toqueries, self.tovalues, self.unifyheads = tokeys, toqueries, tovalues, unifyheads

    def forward(self, x):
        b, t, e = x.shape
        h = self.heads
        assert e == self.emb, f'Input embedding dim ({e}) should match layer embedding dim ({self.emb})'

        s = e // h

        keys = x @ self.tokeys
        queries = x @ self.toqueries
        values = x @ self.tovalues

        keys = keys.reshape(b, t, h, s)
        queries = queries.reshape(b, t, h, s)
        values = values.reshape(b, t, h, s)

        # - fold heads into the batch dimension
        keys = keys.swapaxes(1, 2).reshape(b * h, t, s)
        queries = queries.swapaxes(1, 2).reshape(b * h, t, s)
        values = values.swapaxes(1, 2).reshape(b * h, t, s)

        queries = queries / (e ** (1/4))
        keys = keys / (e ** (1/4))
        # - Instead of dividing the dot products by sqrt(e), we scale the keys and values.
        #   This should be more memory efficient

        # - get dot product of queries and keys, and scale
        dot = queries @ keys.swapaxes(1, 2)

        assert dot.shape == (b*h, t, t)

        if self.mask:  # mask out the upper half of the dot matrix, excluding the diagonal
            mask_(dot, maskval=float('-inf'), mask_diagonal=False)

        dot = np.exp(dot - dot.max(axis=2, keepdims=True))
        dot = dot / dot.sum(axis=2, keepdims=True)
        # - dot now has row-wise self-attention probabilities

        # apply the self attention to the values
        out = (dot @ values).reshape(b, h, t, s)

        # swap h, t back, unify heads
        out = out.swapaxes(1, 2).reshape(b, t, s * h)

        return out @ self.unifyheads


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    layer = SelfAttention(X.shape[-1], h, W_K, W_Q, W_V, W_O, mask=causal)  # glue
    out = layer.forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    return 4 * d * h * d_k + (3 * h * d_k + d) * int(bias)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    nz = A > 0  # glue
    plogp = np.zeros_like(A)  # glue
    plogp[nz] = A[nz] * np.log(A[nz])  # glue
    return -plogp.sum(axis=-1).mean(axis=-1)  # glue
