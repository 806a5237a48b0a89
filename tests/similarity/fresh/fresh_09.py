"""Written fresh by a code model to the exercise's own statement (assignments/mha/README.md), for the similarity
tests' independent set: one head at a time over the whole batch, the heads joined with np.concatenate."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    added_batch = False
    if X.ndim == 2:
        X = X[None, :, :]
        added_batch = True
    elif X.ndim != 3:
        raise ValueError("X has shape %r; expected (B, T, d) or (T, d)" % (X.shape,))
    d = X.shape[2]
    if W_Q.shape[0] != d or W_K.shape[0] != d or W_V.shape[0] != d or W_Q.shape[1] != W_K.shape[1]:
        raise ValueError("W_Q %r, W_K %r, W_V %r against X %r" % (W_Q.shape, W_K.shape, W_V.shape, X.shape))
    if W_Q.shape[1] % h != 0 or W_V.shape[1] % h != 0 or W_O.shape[0] != W_V.shape[1]:
        raise ValueError("h=%d, W_Q %r, W_V %r, W_O %r" % (h, W_Q.shape, W_V.shape, W_O.shape))
    width_k = W_Q.shape[1] // h
    width_v = W_V.shape[1] // h
    T = X.shape[1]
    blocked = np.triu(np.ones((T, T)), 1).astype(bool)
    outputs = []
    for i in range(h):
        cols_k = slice(i * width_k, (i + 1) * width_k)
        cols_v = slice(i * width_v, (i + 1) * width_v)
        scores = np.matmul(X @ W_Q[:, cols_k], np.swapaxes(X @ W_K[:, cols_k], 1, 2)) / np.sqrt(width_k)
        if causal:
            scores[:, blocked] = -np.inf
        scores = scores - scores.max(axis=2, keepdims=True)
        probs = np.exp(scores)
        probs = probs / probs.sum(axis=2, keepdims=True)
        outputs.append(np.matmul(probs, X @ W_V[:, cols_v]))
    Y = np.concatenate(outputs, axis=2) @ W_O
    if added_batch:
        Y = Y[0]
    return Y


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError("d=%d cannot be split into h=%d heads" % (d, h))
        d_k = d // h
    n_weights = 0
    n_biases = 0
    for fan_in, fan_out in ((d, h * d_k), (d, h * d_k), (d, h * d_k), (h * d_k, d)):
        n_weights += fan_in * fan_out
        n_biases += fan_out
    return n_weights + (n_biases if bias else 0)


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    ent = np.zeros(A.shape[:-1])
    nz = A > 0
    ent -= np.sum(np.where(nz, A * np.log(np.where(nz, A, 1)), 0), axis=-1)
    return np.mean(ent, axis=-1)
