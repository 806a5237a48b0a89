# Source: https://github.com/openai/gpt-2
# Commit: 122c55a53a50ef625f9f4fc577ed0d59e53bf417
# Path: src/model.py (softmax, split_states, merge_states, conv1d, attention_mask, attn)
# Author: OpenAI
# Licence: Modified MIT (LICENSE: MIT terms, "Software Copyright (c) 2019 OpenAI")
# Port: TensorFlow to numpy, behaviour kept: the layer is built as block() builds it (n_state = nx, the input's
#   width), with its assert; tf.split(c, 3, axis=2) cuts the fused projection into three equal parts (np.split raises
#   ValueError where TensorFlow raises InvalidArgumentError); split_states reshapes the last axis to [n, m // n];
#   the scores are multiplied by rsqrt(v.shape[-1]); the mask is w * b - 1e10 * (1 - b); softmax subtracts the
#   maximum; conv1d is x @ w + b; past is None.
# Glue (marked "# glue"): the exercise's signature: c_attn's weight is the three projections side by side (GPT-2's
#   fused layout, np.hstack([W_Q, W_K, W_V])) with zero bias, c_proj's is W_O with zero bias; causal=False sets b to
#   ones (the model always masks); the unbatched case; attention_param_count and head_entropy (written for the
#   exercise from its statement).
import numpy as np


def shape_list(x):
    return list(x.shape)


def softmax(x, axis=-1):
    x = x - np.max(x, axis=axis, keepdims=True)
    ex = np.exp(x)
    return ex / np.sum(ex, axis=axis, keepdims=True)


def split_states(x, n):
    """Reshape the last dimension of x into [n, x.shape[-1]/n]."""
    *start, m = shape_list(x)
    return np.reshape(x, start + [n, m//n])


def merge_states(x):
    """Smash the last two dimensions of x into a single dimension."""
    *start, a, b = shape_list(x)
    return np.reshape(x, start + [a*b])


def conv1d(x, w, b):
    *start, nx = shape_list(x)
    nf = w.shape[-1]
    c = np.reshape(np.reshape(x, [-1, nx]) @ np.reshape(w, [-1, nf]) + b, start + [nf])
    return c


def attention_mask(nd, ns, *, dtype):
    """1's in the lower triangle, counting from the lower right corner."""
    i = np.arange(nd)[:, None]
    j = np.arange(ns)
    m = i >= j - ns + nd
    return m.astype(dtype)


def attn(x, n_state, n_head, c_attn, c_proj, causal=True):
    assert x.ndim == 3  # Should be [batch, sequence, features]
    assert n_state % n_head == 0

    def split_heads(x):
        # From [batch, sequence, features] to [batch, heads, sequence, features]
        return np.transpose(split_states(x, n_head), [0, 2, 1, 3])

    def merge_heads(x):
        # Reverse of split_heads
        return merge_states(np.transpose(x, [0, 2, 1, 3]))

    def mask_attn_weights(w):
        # w has shape [batch, heads, dst_sequence, src_sequence], where information flows from src to dst.
        _, _, nd, ns = shape_list(w)
        b = attention_mask(nd, ns, dtype=w.dtype) if causal else np.ones((nd, ns))  # glue: "if ... else ones"
        b = np.reshape(b, [1, 1, nd, ns])
        w = w*b - 1e10*(1-b)
        return w

    def multihead_attn(q, k, v):
        # q, k, v have shape [batch, heads, sequence, features]
        w = q @ np.swapaxes(k, -1, -2)
        w = w * (1 / np.sqrt(v.shape[-1]))

        w = mask_attn_weights(w)
        w = softmax(w)
        a = w @ v
        return a

    c = conv1d(x, *c_attn)
    q, k, v = map(split_heads, np.split(c, 3, axis=2))
    a = multihead_attn(q, k, v)
    a = merge_heads(a)
    a = conv1d(a, *c_proj)
    return a


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    W = np.hstack([W_Q, W_K, W_V])  # glue
    out = attn(X, X.shape[-1], h, (W, np.zeros(W.shape[1])), (W_O, np.zeros(W_O.shape[1])), causal)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    return 4 * d * h * d_k + int(bias) * (3 * h * d_k + d)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    rows = -np.sum(A * np.log(np.where(A == 0, 1.0, A)), axis=-1)  # glue
    return np.mean(rows, axis=-1)  # glue
