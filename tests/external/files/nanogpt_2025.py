# Source: https://github.com/karpathy/nanoGPT
# Commit: 3adf61e154c3fe3fca428ad6bc3818b27a3b8291 (2025-11-12, master)
# Path: model.py (CausalSelfAttention, its "manual implementation of attention" branch)
# Author: Andrej Karpathy
# Licence: MIT (LICENSE: Copyright (c) 2022 Andrej Karpathy)
# Port: PyTorch to numpy, behaviour kept: the layer is built for n_embd = the input's width C, with its assert;
#   c_attn(x).split(n_embd, dim=2) cuts the fused projection into pieces of n_embd columns, as torch's split does,
#   and unpacks three; k.view(B, T, n_head, C // n_head).transpose(1, 2) is reshape then swapaxes;
#   y.transpose(1, 2).contiguous().view(B, T, C) is swapaxes then reshape; masked_fill(bias == 0, -inf) is np.where;
#   F.softmax subtracts the row maximum, as torch's does; dropout is left out (the identity at evaluation). The flash
#   branch computes the same attention and is not ported.
# Glue (marked "# glue"): the exercise's signature (c_attn is the three projections side by side, GPT-2's fused
#   layout np.hstack([W_Q, W_K, W_V]); c_proj is W_O; no bias, as GPTConfig's default bias=False); causal=False
#   leaves out the mask (the layer is always causal); the unbatched case; attention_param_count (the parameters of
#   this layer: c_attn = nn.Linear(n_embd, 3 * n_embd) and c_proj = nn.Linear(n_embd, n_embd), biases with
#   bias=True, with the layer's assert) and head_entropy (written for the exercise from its statement).
import math

import numpy as np


def _torch_split(x, split_size, dim):
    n = x.shape[dim]
    return [np.take(x, range(i, min(i + split_size, n)), axis=dim) for i in range(0, n, split_size)]


class CausalSelfAttention:

    def __init__(self, n_embd, n_head, c_attn, c_proj, causal=True):
        assert n_embd % n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = c_attn
        # output projection
        self.c_proj = c_proj
        self.n_head = n_head
        self.n_embd = n_embd
        self.causal = causal  # glue

    def forward(self, x):
        B, T, C = x.shape  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = _torch_split(x @ self.c_attn, self.n_embd, dim=2)
        k = k.reshape(B, T, self.n_head, C // self.n_head).swapaxes(1, 2)  # (B, nh, T, hs)
        q = q.reshape(B, T, self.n_head, C // self.n_head).swapaxes(1, 2)  # (B, nh, T, hs)
        v = v.reshape(B, T, self.n_head, C // self.n_head).swapaxes(1, 2)  # (B, nh, T, hs)

        # manual implementation of attention
        att = (q @ k.swapaxes(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        if self.causal:  # glue
            bias = np.tril(np.ones((T, T))).reshape(1, 1, T, T)
            att = np.where(bias[:, :, :T, :T] == 0, float('-inf'), att)
        att = np.exp(att - att.max(axis=-1, keepdims=True))
        att = att / att.sum(axis=-1, keepdims=True)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.swapaxes(1, 2).reshape(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = y @ self.c_proj
        return y


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    out = CausalSelfAttention(X.shape[-1], h, np.hstack([W_Q, W_K, W_V]), W_O, causal).forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue: c_attn and c_proj
    assert d % h == 0  # glue: CausalSelfAttention.__init__'s assert
    c_attn = d * 3 * d + (3 * d if bias else 0)  # glue
    c_proj = d * d + (d if bias else 0)  # glue
    return c_attn + c_proj  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    terms = np.zeros_like(A)  # glue
    np.multiply(A, np.log(A, where=A > 0, out=np.zeros_like(A)), out=terms)  # glue
    return -terms.sum(-1).mean(-1)  # glue
