"""Independent, correct: step by step, one named variable per step, checks spelled out."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    inputs = np.array(X, dtype=float)
    unbatched = False
    if inputs.ndim == 2:
        unbatched = True
        inputs = inputs[np.newaxis, :, :]
    if inputs.ndim != 3:
        raise ValueError("X must have shape (B, T, d) or (T, d), got " + str(inputs.shape))
    batch_size = inputs.shape[0]
    seq_len = inputs.shape[1]
    model_dim = inputs.shape[2]
    if W_Q.shape[0] != model_dim:
        raise ValueError("W_Q has shape " + str(W_Q.shape) + " but d is " + str(model_dim))
    if W_K.shape != W_Q.shape:
        raise ValueError("W_K has shape " + str(W_K.shape) + " but W_Q has " + str(W_Q.shape))
    if W_V.shape[0] != model_dim:
        raise ValueError("W_V has shape " + str(W_V.shape) + " but d is " + str(model_dim))
    if W_Q.shape[1] % h != 0:
        raise ValueError("W_Q width " + str(W_Q.shape[1]) + " is not divisible by h = " + str(h))
    if W_V.shape[1] % h != 0:
        raise ValueError("W_V width " + str(W_V.shape[1]) + " is not divisible by h = " + str(h))
    if W_O.shape[0] != W_V.shape[1]:
        raise ValueError("W_O has shape " + str(W_O.shape) + " but W_V has " + str(W_V.shape))
    key_dim = W_Q.shape[1] // h
    value_dim = W_V.shape[1] // h

    queries = inputs @ W_Q
    keys = inputs @ W_K
    values = inputs @ W_V

    queries = queries.reshape(batch_size, seq_len, h, key_dim)
    keys = keys.reshape(batch_size, seq_len, h, key_dim)
    values = values.reshape(batch_size, seq_len, h, value_dim)
    queries = queries.transpose(0, 2, 1, 3)
    keys = keys.transpose(0, 2, 3, 1)
    values = values.transpose(0, 2, 1, 3)

    scores = queries @ keys
    scores = scores / np.sqrt(key_dim)
    if causal:
        future = np.triu(np.ones((seq_len, seq_len)), 1).astype(bool)
        scores = np.where(future, -np.inf, scores)
    largest = np.max(scores, axis=3, keepdims=True)
    weights = np.exp(scores - largest)
    totals = np.sum(weights, axis=3, keepdims=True)
    weights = weights / totals

    context = weights @ values
    context = context.transpose(0, 2, 1, 3)
    context = context.reshape(batch_size, seq_len, h * value_dim)
    output = context @ W_O
    if unbatched:
        output = output[0]
    return output


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError("d = " + str(d) + " is not divisible by h = " + str(h))
        d_k = d // h
    query_weights = d * h * d_k
    key_weights = d * h * d_k
    value_weights = d * h * d_k
    output_weights = h * d_k * d
    count = query_weights + key_weights + value_weights + output_weights
    if bias:
        count = count + h * d_k + h * d_k + h * d_k + d
    return count


def head_entropy(A):
    weights = np.array(A, dtype=float)
    log_weights = np.zeros(weights.shape)
    nonzero = weights > 0
    log_weights[nonzero] = np.log(weights[nonzero])
    row_entropy = -np.sum(weights * log_weights, axis=-1)
    return np.mean(row_entropy, axis=-1)
