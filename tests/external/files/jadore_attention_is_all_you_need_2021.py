# Source: https://github.com/jadore801120/attention-is-all-you-need-pytorch
# Commit: 132907dd272e2cc92e3c10e6c4e783a87ff8893d (2021-02-17, master)
# Paths: transformer/SubLayers.py (MultiHeadAttention), transformer/Modules.py (ScaledDotProductAttention),
#        transformer/Models.py (get_subsequent_mask)
# Author: Yu-Hsiang Huang
# Licence: MIT (LICENSE: Copyright (c) 2017 Victor Huang)
# Port: PyTorch to numpy, behaviour kept: the layer adds its input back (q += residual) and applies its LayerNorm
#   (nn.LayerNorm(d_model, eps=1e-6) at its initial weight 1 and bias 0) inside the attention layer; nn.Linear(...,
#   bias=False) is "x @ W" with the exercise's matrices; masked_fill(mask == 0, -1e9) is np.where; F.softmax subtracts
#   the row maximum, as torch's does; dropout is left out (the identity at evaluation).
# Glue (marked "# glue"): the exercise's signature (d_k and d_v read off W_Q and W_V), the causal mask built as
#   get_subsequent_mask builds it, the unbatched case, attention_param_count and head_entropy (written for the
#   exercise from its statement).
import numpy as np


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm(x, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


class ScaledDotProductAttention:
    ''' Scaled Dot-Product Attention '''

    def __init__(self, temperature):
        self.temperature = temperature

    def forward(self, q, k, v, mask=None):
        attn = (q / self.temperature) @ k.swapaxes(2, 3)
        if mask is not None:
            attn = np.where(mask == 0, -1e9, attn)
        attn = _softmax(attn)
        output = attn @ v
        return output, attn


class MultiHeadAttention:
    ''' Multi-Head Attention module '''

    def __init__(self, n_head, d_k, d_v, w_qs, w_ks, w_vs, fc):
        self.n_head = n_head
        self.d_k = d_k
        self.d_v = d_v
        self.w_qs, self.w_ks, self.w_vs, self.fc = w_qs, w_ks, w_vs, fc
        self.attention = ScaledDotProductAttention(temperature=d_k ** 0.5)

    def forward(self, q, k, v, mask=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, len_k, len_v = q.shape[0], q.shape[1], k.shape[1], v.shape[1]

        residual = q

        # Pass through the pre-attention projection: b x lq x (n*dv)
        # Separate different heads: b x lq x n x dv
        q = (q @ self.w_qs).reshape(sz_b, len_q, n_head, d_k)
        k = (k @ self.w_ks).reshape(sz_b, len_k, n_head, d_k)
        v = (v @ self.w_vs).reshape(sz_b, len_v, n_head, d_v)

        # Transpose for attention dot product: b x n x lq x dv
        q, k, v = q.swapaxes(1, 2), k.swapaxes(1, 2), v.swapaxes(1, 2)

        if mask is not None:
            mask = mask[:, None]   # For head axis broadcasting.

        q, attn = self.attention.forward(q, k, v, mask=mask)

        # Transpose to move the head dimension back: b x lq x n x dv
        # Combine the last two dimensions to concatenate all the heads together: b x lq x (n*dv)
        q = q.swapaxes(1, 2).reshape(sz_b, len_q, -1)
        q = q @ self.fc
        q += residual

        q = _layer_norm(q, 1e-6)

        return q, attn


def get_subsequent_mask(sz_b, len_s):
    ''' For masking out the subsequent info. '''
    subsequent_mask = (1 - np.triu(np.ones((1, len_s, len_s)), k=1)).astype(bool)
    return subsequent_mask


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    mask = get_subsequent_mask(X.shape[0], X.shape[1]) if causal else None  # glue
    layer = MultiHeadAttention(h, W_Q.shape[1] // h, W_V.shape[1] // h, W_Q, W_K, W_V, W_O)  # glue
    out, _ = layer.forward(X, X, X, mask=mask)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    count = 4 * d * h * d_k  # glue
    if bias:  # glue
        count += 3 * h * d_k + d  # glue
    return count  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    with np.errstate(divide="ignore", invalid="ignore"):  # glue
        terms = np.where(A > 0, A * np.log(A), 0.0)  # glue
    return -terms.sum(axis=-1).mean(axis=-1)  # glue
