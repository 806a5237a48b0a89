# Source: https://github.com/rasbt/LLMs-from-scratch
# Commit: 3f1dfc9bb6fc85931a68acfdda01f22b82bed743
# Path: ch03/02_bonus_efficient-multihead-attention/ch03.py (CausalAttention, MultiHeadAttentionWrapper)
# Author: Sebastian Raschka
# Licence: MIT (LICENSE.txt at 1bba9c24e948978814d6829a6c1a525e521d508c: Copyright (c) 2023-2024 Sebastian Raschka)
# Port: PyTorch to numpy, behaviour kept: one CausalAttention per head, their outputs concatenated and projected;
#   nn.Linear is "x @ W" with the head's columns of the exercise's matrices (qkv_bias=False; out_proj's bias is
#   zero); masked_fill_(mask, -inf) on the strict upper triangle is np.where; torch.softmax subtracts the row maximum,
#   as torch's does; the scores are divided by keys.shape[-1] ** 0.5; dropout is left out (the identity at
#   evaluation).
# Glue (marked "# glue"): the exercise's signature; each head gets its own columns of W_Q, W_K (d_k wide) and W_V
#   (d_v wide), read off the matrices as a weight loader would; causal=False leaves out the mask (the heads always
#   mask); the unbatched case; attention_param_count and head_entropy (written for the exercise from its statement).
import numpy as np


class CausalAttention:

    def __init__(self, W_query, W_key, W_value, causal=True):
        self.W_query, self.W_key, self.W_value = W_query, W_key, W_value
        self.causal = causal  # glue

    def forward(self, x):
        b, num_tokens, d_in = x.shape  # New batch dimension b
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value

        attn_scores = queries @ keys.swapaxes(1, 2)  # Changed transpose
        if self.causal:  # glue
            mask = np.triu(np.ones((num_tokens, num_tokens)), k=1)
            attn_scores = np.where(mask.astype(bool)[:num_tokens, :num_tokens], -np.inf, attn_scores)
        z = attn_scores / keys.shape[-1]**0.5
        attn_weights = np.exp(z - z.max(axis=-1, keepdims=True))
        attn_weights = attn_weights / attn_weights.sum(axis=-1, keepdims=True)

        context_vec = attn_weights @ values
        return context_vec


class MultiHeadAttentionWrapper:

    def __init__(self, heads, out_proj):
        self.heads = heads
        self.out_proj = out_proj

    def forward(self, x):
        context_vec = np.concatenate([head.forward(x) for head in self.heads], axis=-1)
        return context_vec @ self.out_proj


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h  # glue
    heads = [CausalAttention(W_Q[:, i * d_k:(i + 1) * d_k], W_K[:, i * d_k:(i + 1) * d_k],  # glue
                             W_V[:, i * d_v:(i + 1) * d_v], causal) for i in range(h)]  # glue
    out = MultiHeadAttentionWrapper(heads, W_O).forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    per_head = 3 * d * d_k + (3 * d_k if bias else 0)  # glue
    return h * per_head + h * d_k * d + (d if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    masked = np.ma.masked_equal(A, 0.0)  # glue
    rows = -(masked * np.ma.log(masked)).sum(axis=-1).filled(0.0)  # glue
    return np.asarray(rows.mean(axis=-1))  # glue
