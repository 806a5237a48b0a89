# Source: https://github.com/karpathy/ng-video-lecture
# Commit: 4c8e9028cc4fe417100e1e27db077fca0e0477f2 (2023-02-07, master; scaled by the head size since 988848a)
# Path: gpt.py (classes Head and MultiHeadAttention)
# Author: Andrej Karpathy
# Licence: MIT (README, "License")
# Port: PyTorch to numpy, behaviour kept: nn.Linear(n_embd, head_size, bias=False) is "x @ W" with the head's columns of
#   the exercise's matrices; masked_fill(tril == 0, -inf) is np.where; F.softmax subtracts the row maximum, as torch's
#   does; dropout is left out (it is the identity at evaluation).
# Glue (marked "# glue"): the exercise's signature; each head gets its own columns of W_Q, W_K (d_k wide) and W_V
#   (d_v wide), read off the matrices as a weight loader would; causal=False leaves out the mask (the lecture's
#   head is always causal); the unbatched case; attention_param_count and head_entropy (written for the exercise
#   from its statement).
import numpy as np


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class Head:
    """ one head of self-attention """

    def __init__(self, key, query, value, causal):
        self.key, self.query, self.value = key, query, value
        self.causal = causal  # glue

    def forward(self, x):
        B, T, C = x.shape
        k = x @ self.key   # (B,T,C)
        q = x @ self.query  # (B,T,C)
        # compute attention scores ("affinities")
        wei = q @ k.swapaxes(-2, -1) * k.shape[-1]**-0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        if self.causal:  # glue
            tril = np.tril(np.ones((T, T)))
            wei = np.where(tril[:T, :T] == 0, float('-inf'), wei)  # (B, T, T)
        wei = _softmax(wei)  # (B, T, T)
        # perform the weighted aggregation of the values
        v = x @ self.value  # (B,T,C)
        out = wei @ v  # (B, T, T) @ (B, T, C) -> (B, T, C)
        return out


class MultiHeadAttention:
    """ multiple heads of self-attention in parallel """

    def __init__(self, heads, proj):
        self.heads = heads
        self.proj = proj

    def forward(self, x):
        out = np.concatenate([h.forward(x) for h in self.heads], axis=-1)
        out = out @ self.proj
        return out


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h  # glue
    heads = [Head(W_K[:, i * d_k:(i + 1) * d_k], W_Q[:, i * d_k:(i + 1) * d_k], W_V[:, i * d_v:(i + 1) * d_v],  # glue
                  causal) for i in range(h)]  # glue
    out = MultiHeadAttention(heads, W_O).forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    weights = 4 * d * h * d_k  # glue
    return weights + (3 * h * d_k + d if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    safe = np.where(A > 0, A, 1.0)  # glue
    return -(A * np.log(safe)).sum(axis=-1).mean(axis=-1)  # glue
