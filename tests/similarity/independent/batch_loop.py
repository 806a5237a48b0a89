"""Independent, correct: loops over the batch and over heads, with a small softmax helper."""

import numpy as np


def _softmax(z):
    z = z - np.max(z, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=np.float64)
    was_2d = X.ndim == 2
    if was_2d:
        X = X.reshape(1, *X.shape)
    n_batch, n_tok, width = X.shape
    if W_Q.shape[0] != width or W_K.shape != W_Q.shape or W_V.shape[0] != width:
        raise ValueError(f"X {X.shape} does not fit W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h != 0 or W_V.shape[1] % h != 0:
        raise ValueError(f"h={h} must divide {W_Q.shape[1]} and {W_V.shape[1]}")
    if W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"W_O {W_O.shape} does not fit W_V {W_V.shape}")
    dk = W_Q.shape[1] // h
    dv = W_V.shape[1] // h
    result = np.empty((n_batch, n_tok, W_O.shape[1]))
    hidden = np.triu(np.ones((n_tok, n_tok), dtype=bool), k=1)
    for b in range(n_batch):
        pieces = []
        for head in range(h):
            qh = X[b] @ W_Q[:, head * dk:(head + 1) * dk]
            kh = X[b] @ W_K[:, head * dk:(head + 1) * dk]
            vh = X[b] @ W_V[:, head * dv:(head + 1) * dv]
            scores = qh @ kh.T / np.sqrt(dk)
            if causal:
                scores[hidden] = -np.inf
            pieces.append(_softmax(scores) @ vh)
        result[b] = np.hstack(pieces) @ W_O
    return result[0] if was_2d else result


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError(f"cannot split d={d} into h={h} heads")
        d_k = d // h
    inner = h * d_k
    total = 3 * d * inner + inner * d
    if bias:
        total += 3 * inner + d
    return total


def head_entropy(A):
    A = np.asarray(A, dtype=np.float64)
    terms = np.zeros(A.shape)
    positive = A > 0
    terms[positive] = A[positive] * np.log(A[positive])
    return -terms.sum(axis=-1).mean(axis=-1)
