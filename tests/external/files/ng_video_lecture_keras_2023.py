# Source: https://github.com/karpathy/ng-video-lecture/pull/8 (a Keras port of gpt.py)
# Commit: cf1d06c7c631b85f86020fa9b68469ed8ef75685 (refs/pull/8/head; the file last changed in 0e3e61b, 2023-02-03)
# Path: keras/gpt.py (classes Head and MultiHeadAttention)
# Author: Jenny Jin (j-planet)
# Licence: MIT (the repository's licence, README "License"; a pull request's contents are offered under it)
# Port: Keras/TensorFlow to numpy, mistakes kept: Dense(..., use_bias=False) is "x @ W" with the head's columns of the
#   exercise's matrices; the scores are divided by sqrt(x.shape[-1]), the input's width; layers.Softmax(axis=-1)
#   called with the lower-triangular mask adds (1 - mask) * -1e9 to the scores (Keras's masking) and subtracts the
#   row maximum; both asserts are kept; dropout is left out (the identity at evaluation).
# Glue (marked "# glue"): the exercise's signature; each head gets its own columns of W_Q, W_K (d_k wide, the
#   head_size) and W_V (d_v wide), read off the matrices as a weight loader would; proj is W_O with zero bias and
#   n_embd is the input's width (Block builds the layer with the model's width); causal=False leaves out the mask
#   (the head always masks); the unbatched case; attention_param_count and head_entropy (written for the exercise
#   from its statement).
import math

import numpy as np


def _keras_softmax(inputs, mask=None):
    if mask is not None:
        inputs = inputs + (1.0 - mask) * -1e9
    e = np.exp(inputs - inputs.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class Head:
    def __init__(self, head_size, key, query, value, causal):
        self.head_size = head_size
        self.key, self.query, self.value = key, query, value
        self.causal = causal  # glue

    def call(self, x):
        mask = np.tril(np.ones((x.shape[1], x.shape[1]))) if self.causal else None  # glue: "if ... else None"
        k = x @ self.key     # (B,T,C)
        q = x @ self.query   # (B,T,C)

        # compute attention scores ("affinities")
        k_transposed = np.transpose(k, (0, 2, 1))   # B, C, T
        wei = q @ k_transposed    # B, T, T
        wei /= math.sqrt(x.shape[-1])     # scale
        wei = _keras_softmax(wei, mask)   # softmax while making the upper-triangle all 0

        # perform the weighted aggregation of the values
        v = x @ self.value   # B, T, C
        out = wei @ v      # (B, T, T) @ (B, T, C) -> (B, T, C)

        assert out.shape[1] == x.shape[1] and out.shape[2] == self.head_size

        return out


class MultiHeadAttention:
    def __init__(self, heads, proj, n_embd):
        self.heads = heads
        self.proj = proj
        self.n_embd = n_embd

    def call(self, x):
        out = np.concatenate([h.call(x) for h in self.heads], axis=-1)
        out = out @ self.proj["w"] + self.proj["b"]

        assert out.shape[1] == x.shape[1] and out.shape[2] == self.n_embd

        return out


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h  # glue
    heads = [Head(d_k, W_K[:, i * d_k:(i + 1) * d_k], W_Q[:, i * d_k:(i + 1) * d_k],  # glue
                  W_V[:, i * d_v:(i + 1) * d_v], causal) for i in range(h)]  # glue
    layer = MultiHeadAttention(heads, {"w": W_O, "b": np.zeros(W_O.shape[1])}, X.shape[-1])  # glue
    out = layer.call(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    return 4 * d * h * d_k + (3 * h * d_k + d if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    H = np.zeros(A.shape[:-1])  # glue
    nonzero = A > 0  # glue
    np.add.at(H, np.nonzero(nonzero)[:-1], -(A[nonzero] * np.log(A[nonzero])))  # glue
    return H.mean(axis=-1)  # glue
