# Source: https://github.com/karpathy/minGPT
# Commit: 0d9d098cd208a0de1e7a456d62462c8ce352136b (2020-08-17, "first commit"; the -1e10 fill became float('-inf')
#         in 38d7327, 2020-08-23)
# Path: mingpt/model.py (CausalSelfAttention)
# Author: Andrej Karpathy
# Licence: MIT (LICENSE: Copyright (c) 2020 Andrej Karpathy)
# Port: PyTorch to numpy, behaviour kept: the layer is built for n_embd = the input's width C, with its assert;
#   view(B, T, n_head, C // n_head).transpose(1, 2) is reshape then swapaxes; masked_fill(mask == 0, -1e10) is
#   np.where; F.softmax subtracts the row maximum, as torch's does; nn.Linear is "x @ W" with the exercise's matrices
#   (no bias: the exercise has none); dropout is left out (the identity at evaluation); layer_past is unused there.
# Glue (marked "# glue"): the exercise's signature, causal=False leaves out the mask (the layer is always causal),
#   the unbatched case, attention_param_count and head_entropy (written for the exercise from its statement).
import math

import numpy as np


class CausalSelfAttention:
    """
    A vanilla multi-head masked self-attention layer with a projection at the end.
    """

    def __init__(self, n_embd, n_head, key, query, value, proj, causal=True):
        assert n_embd % n_head == 0
        # key, query, value projections for all heads
        self.key, self.query, self.value = key, query, value
        # output projection
        self.proj = proj
        self.n_head = n_head
        self.causal = causal  # glue

    def forward(self, x, layer_past=None):
        B, T, C = x.shape

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        k = (x @ self.key).reshape(B, T, self.n_head, C // self.n_head).swapaxes(1, 2)  # (B, nh, T, hs)
        q = (x @ self.query).reshape(B, T, self.n_head, C // self.n_head).swapaxes(1, 2)  # (B, nh, T, hs)
        v = (x @ self.value).reshape(B, T, self.n_head, C // self.n_head).swapaxes(1, 2)  # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.swapaxes(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        if self.causal:  # glue
            mask = np.tril(np.ones((T, T))).reshape(1, 1, T, T)
            att = np.where(mask[:, :, :T, :T] == 0, -1e10, att)  # todo: just use float('-inf') instead?
        att = np.exp(att - att.max(axis=-1, keepdims=True))
        att = att / att.sum(axis=-1, keepdims=True)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.swapaxes(1, 2).reshape(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = y @ self.proj
        return y


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    out = CausalSelfAttention(X.shape[-1], h, W_K, W_Q, W_V, W_O, causal).forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    return 4 * d * h * d_k + (3 * h * d_k + d if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    out = np.zeros(A.shape[:-2])  # glue
    for idx in np.ndindex(*A.shape[:-2]):  # glue
        rows = A[idx]  # glue
        ent = [-sum(p * math.log(p) for p in row if p > 0) for row in rows]  # glue
        out[idx] = sum(ent) / len(ent)  # glue
    return out  # glue
