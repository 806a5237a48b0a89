# Source: https://github.com/harvardnlp/annotated-transformer
# Commit: debc9fd747bb2123160a98046ad1c2d4da44a567 (2022-05-02, master)
# Path: the_annotated_transformer.py (attention, MultiHeadedAttention, subsequent_mask)
# Author: Alexander Rush (harvardnlp), with Austin Huang, Suraj Subramanian, Jonathan Sum, Khalid Almubarak,
#         Stella Biderman
# Licence: MIT (LICENSE: Copyright (c) 2018 Alexander Rush)
# Port: PyTorch to numpy, behaviour kept: the layer is built for d_model = the input's width, with
#   "assert d_model % h == 0" and d_k = d_model // h ("We assume d_v always equals d_k"); view(nbatches, -1, h, d_k)
#   is reshape(nbatches, -1, h, d_k); nn.Linear is "x @ W" with the exercise's matrices (no bias: the exercise has
#   none); masked_fill(mask == 0, -1e9) is np.where; softmax(dim=-1) subtracts the row maximum, as torch's does;
#   dropout is left out (the identity at evaluation).
# Glue (marked "# glue"): the exercise's signature, the causal mask from subsequent_mask, the unbatched case,
#   attention_param_count (the parameters of this module: four nn.Linear(d_model, d_model), with its assert; biases
#   only with bias=True) and head_entropy (written for the exercise from its statement).
import math

import numpy as np


def subsequent_mask(size):
    "Mask out subsequent positions."
    attn_shape = (1, size, size)
    subsequent_mask = np.triu(np.ones(attn_shape), k=1).astype(np.uint8)
    return subsequent_mask == 0


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.shape[-1]
    scores = (query @ key.swapaxes(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask == 0, -1e9, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p_attn = e / e.sum(axis=-1, keepdims=True)
    return p_attn @ value, p_attn


class MultiHeadedAttention:
    def __init__(self, h, d_model, linears):
        "Take in model size and number of heads."
        assert d_model % h == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // h
        self.h = h
        self.linears = linears
        self.attn = None

    def forward(self, query, key, value, mask=None):
        "Implements Figure 2"
        if mask is not None:
            # Same mask applied to all h heads.
            mask = mask[:, None]
        nbatches = query.shape[0]

        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            (x @ lin).reshape(nbatches, -1, self.h, self.d_k).swapaxes(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]

        # 2) Apply attention on all the projected vectors in batch.
        x, self.attn = attention(query, key, value, mask=mask)

        # 3) "Concat" using a view and apply a final linear.
        x = x.swapaxes(1, 2).reshape(nbatches, -1, self.h * self.d_k)
        return x @ self.linears[-1]


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    mask = subsequent_mask(X.shape[1]) if causal else None  # glue
    out = MultiHeadedAttention(h, X.shape[-1], [W_Q, W_K, W_V, W_O]).forward(X, X, X, mask)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue: four nn.Linear(d_model, d_model)
    assert d % h == 0  # glue: MultiHeadedAttention.__init__'s assert
    return 4 * (d * d + (d if bias else 0))  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    plogp = A * np.log(np.where(A > 0, A, 1.0))  # glue
    return -np.sum(plogp, axis=-1).mean(axis=-1)  # glue
