# Source: https://github.com/pbloem/former
# Commit: 6a3295c94a151291de6838b98826da13e5f57bf3 (2019-10-02; replaced by the canonical narrow-head SelfAttention in
#         ba8a22f, 2021-04-30, "Fix bug in self-attention.")
# Paths: former/modules.py (SelfAttentionWide), former/util/util.py (mask_)
# Author: Peter Bloem
# Licence: MIT (LICENSE: Copyright (c) 2019 Peter Bloem)
# Port: PyTorch to numpy, behaviour kept: every head is as wide as the embedding (view(b, t, h, e)); queries and keys
#   are each divided by e ** (1/4); view is reshape, transpose is swapaxes, torch.bmm is @; mask_ sets the strict upper
#   triangle to -inf; F.softmax(dim=2) subtracts the row maximum, as torch's does.
# Glue (marked "# glue"): the exercise's signature (emb is the input's width), mask=causal, the unbatched case,
#   attention_param_count and head_entropy (written for the exercise from its statement).
import numpy as np


def mask_(matrices, maskval=0.0, mask_diagonal=True):
    h, w = matrices.shape[-2], matrices.shape[-1]
    indices = np.triu_indices(h, k=0 if mask_diagonal else 1, m=w)
    matrices[..., indices[0], indices[1]] = maskval


class SelfAttentionWide:
    def __init__(self, emb, heads, tokeys, toqueries, tovalues, unifyheads, mask=False):
        self.emb = emb
        self.heads = heads
        self.mask = mask
        self.tokeys, self.toqueries, self.tovalues, self.unifyheads = tokeys, toqueries, tovalues, unifyheads

    def forward(self, x):
        b, t, e = x.shape
        h = self.heads
        assert e == self.emb, f'Input embedding dim ({e}) should match layer embedding dim ({self.emb})'

        keys = (x @ self.tokeys).reshape(b, t, h, e)
        queries = (x @ self.toqueries).reshape(b, t, h, e)
        values = (x @ self.tovalues).reshape(b, t, h, e)

        # compute scaled dot-product self-attention

        # - fold heads into the batch dimension
        keys = keys.swapaxes(1, 2).reshape(b * h, t, e)
        queries = queries.swapaxes(1, 2).reshape(b * h, t, e)
        values = values.swapaxes(1, 2).reshape(b * h, t, e)

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
        out = (dot @ values).reshape(b, h, t, e)

        # swap h, t back, unify heads
        out = out.swapaxes(1, 2).reshape(b, t, h * e)

        return out @ self.unifyheads


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    out = SelfAttentionWide(X.shape[-1], h, W_K, W_Q, W_V, W_O, mask=causal).forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    return 4 * d * h * d_k + (3 * h * d_k + d if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    with np.errstate(divide="ignore", invalid="ignore"):  # glue
        plogp = A * np.log(A)  # glue
    plogp[A == 0] = 0.0  # glue
    return -plogp.sum(axis=-1).mean(axis=-1)  # glue
