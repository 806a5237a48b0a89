# Source: https://github.com/hyunwoongko/transformer
# Commit: 63286547b9cd174a6cfc204832271814d685181f (master; the attention as fixed on 2021-11-30, 391c9cd)
# Paths: models/layers/multi_head_attention.py, models/layers/scale_dot_product_attention.py
# Author: Hyunwoong Ko (gusdnd852), with the 2021 fix by serotoninpm
# Licence: Apache-2.0 (README, "Licence": Copyright 2019 Hyunwoong Ko)
# Port: PyTorch to numpy, behaviour kept: view is reshape, transpose(1, 2) is swapaxes(1, 2), nn.Linear is
#   "x @ W" with the exercise's matrices, nn.Softmax(dim=-1) is a softmax that subtracts the row maximum (as torch's
#   does), masked_fill(mask == 0, -10000) is np.where(mask == 0, -10000, score).
# Glue (marked "# glue"): the exercise's signature, the unbatched case, the causal mask built as the repository's
#   Transformer builds its target mask (torch.tril of ones), attention_param_count and head_entropy (written for
#   the exercise from its statement).
import math

import numpy as np


class ScaleDotProductAttention:
    def softmax(self, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def forward(self, q, k, v, mask=None, e=1e-12):
        # input is 4 dimension tensor
        # [batch_size, head, length, d_tensor]
        batch_size, head, length, d_tensor = k.shape

        # 1. dot product Query with Key^T to compute similarity
        k_t = k.swapaxes(2, 3)  # transpose
        score = (q @ k_t) / math.sqrt(d_tensor)  # scaled dot product

        # 2. apply masking (opt)
        if mask is not None:
            score = np.where(mask == 0, -10000, score)

        # 3. pass them softmax to make [0, 1] range
        score = self.softmax(score)

        # 4. multiply with Value
        v = score @ v

        return v, score


class MultiHeadAttention:
    def __init__(self, n_head, w_q, w_k, w_v, w_concat):
        self.n_head = n_head
        self.attention = ScaleDotProductAttention()
        self.w_q, self.w_k, self.w_v, self.w_concat = w_q, w_k, w_v, w_concat

    def forward(self, q, k, v, mask=None):
        # 1. dot product with weight matrices
        q, k, v = q @ self.w_q, k @ self.w_k, v @ self.w_v

        # 2. split tensor by number of heads
        q, k, v = self.split(q), self.split(k), self.split(v)

        # 3. do scale dot product to compute similarity
        out, attention = self.attention.forward(q, k, v, mask=mask)

        # 4. concat and pass to linear layer
        out = self.concat(out)
        out = out @ self.w_concat
        return out

    def split(self, tensor):
        batch_size, length, d_model = tensor.shape
        d_tensor = d_model // self.n_head
        tensor = tensor.reshape(batch_size, length, self.n_head, d_tensor).swapaxes(1, 2)
        # it is similar with group convolution (split by number of heads)
        return tensor

    def concat(self, tensor):
        batch_size, head, length, d_tensor = tensor.shape
        d_model = head * d_tensor
        tensor = tensor.swapaxes(1, 2).reshape(batch_size, length, d_model)
        return tensor


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    T = X.shape[1]  # glue
    mask = np.tril(np.ones((T, T)))[None, None] if causal else None  # glue
    out = MultiHeadAttention(h, W_Q, W_K, W_V, W_O).forward(X, X, X, mask=mask)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    return 4 * d * h * d_k + ((3 * h * d_k + d) if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    logs = np.log(A, out=np.zeros_like(A), where=A > 0)  # glue
    return -(A * logs).sum(axis=-1).mean(axis=-1)  # glue
