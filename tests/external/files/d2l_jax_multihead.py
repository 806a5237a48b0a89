# Source: https://github.com/d2l-ai/d2l-en
# Commit: 1ebe1b8f405b11163fc15b771315cbff6c160467
# Path: d2l/jax.py (masked_softmax, DotProductAttention, MultiHeadAttention)
# Author: the Dive into Deep Learning authors (Aston Zhang, Zachary C. Lipton, Mu Li, Alexander J. Smola and
#         contributors)
# Licence: MIT-0 for the sample code (LICENSE-SAMPLECODE, Copyright 2019 Amazon.com, Inc. or its affiliates)
# Port: JAX/Flax to numpy, behaviour kept: jnp is np; nn.Dense(num_hiddens, use_bias=False) is "x @ W" with the
#   exercise's matrices; masked_softmax replaces the masked scores by -1e6 (_sequence_mask) and nn.softmax subtracts
#   the row maximum, as jax.nn.softmax does; heads are folded into the batch (transpose_qkv, transpose_output);
#   dropout is left out (the identity at evaluation).
# Glue (marked "# glue"): the exercise's signature; with causal=True, valid_lens is the book's decoder
#   self-attention lengths (query i sees keys 0..i: dec_valid_lens = arange(1, T + 1) for every sequence), with
#   causal=False it is None; the unbatched case; attention_param_count and head_entropy (written for the exercise
#   from its statement).
import math

import numpy as np
import numpy as jnp


def _softmax(X, axis=-1):
    e = np.exp(X - X.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def masked_softmax(X, valid_lens):
    """Perform softmax operation by masking elements on the last axis."""
    # X: 3D tensor, valid_lens: 1D or 2D tensor
    def _sequence_mask(X, valid_len, value=0):
        maxlen = X.shape[1]
        mask = jnp.arange((maxlen),
                          dtype=jnp.float32)[None, :] < valid_len[:, None]
        return jnp.where(mask, X, value)

    if valid_lens is None:
        return _softmax(X, axis=-1)
    else:
        shape = X.shape
        if valid_lens.ndim == 1:
            valid_lens = jnp.repeat(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        # On the last axis, replace masked elements with a very large negative
        # value, whose exponentiation outputs 0
        X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return _softmax(X.reshape(shape), axis=-1)


class DotProductAttention:
    """Scaled dot product attention."""

    def __call__(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        # Swap the last two dimensions of keys with keys.swapaxes(1, 2)
        scores = queries@(keys.swapaxes(1, 2)) / math.sqrt(d)
        attention_weights = masked_softmax(scores, valid_lens)
        return attention_weights@values, attention_weights


class MultiHeadAttention:
    def __init__(self, num_heads, W_q, W_k, W_v, W_o):
        self.num_heads = num_heads
        self.attention = DotProductAttention()
        self.W_q, self.W_k, self.W_v, self.W_o = W_q, W_k, W_v, W_o

    def __call__(self, queries, keys, values, valid_lens):
        queries = self.transpose_qkv(queries @ self.W_q)
        keys = self.transpose_qkv(keys @ self.W_k)
        values = self.transpose_qkv(values @ self.W_v)

        if valid_lens is not None:
            # On axis 0, copy the first item (scalar or vector) for num_heads
            # times, then copy the next item, and so on
            valid_lens = jnp.repeat(valid_lens, self.num_heads, axis=0)

        output, attention_weights = self.attention(queries, keys, values, valid_lens)
        output_concat = self.transpose_output(output)
        return output_concat @ self.W_o, attention_weights

    def transpose_qkv(self, X):
        """Transposition for parallel computation of multiple attention heads."""
        X = X.reshape((X.shape[0], X.shape[1], self.num_heads, -1))
        X = jnp.transpose(X, (0, 2, 1, 3))
        return X.reshape((-1, X.shape[2], X.shape[3]))

    def transpose_output(self, X):
        """Reverse the operation of transpose_qkv."""
        X = X.reshape((-1, self.num_heads, X.shape[1], X.shape[2]))
        X = jnp.transpose(X, (0, 2, 1, 3))
        return X.reshape((X.shape[0], X.shape[1], -1))


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    B, T = X.shape[:2]  # glue
    valid_lens = np.tile(np.arange(1, T + 1), (B, 1)) if causal else None  # glue
    out, _ = MultiHeadAttention(h, W_Q, W_K, W_V, W_O)(X, X, X, valid_lens)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    num_hiddens = h * d_k  # glue
    return 4 * d * num_hiddens + (3 * num_hiddens + d if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    p_log_p = np.where(A > 0, A * np.log(np.maximum(A, np.finfo(float).tiny)), 0.0)  # glue
    return -p_log_p.sum(axis=-1).mean(axis=-1)  # glue
