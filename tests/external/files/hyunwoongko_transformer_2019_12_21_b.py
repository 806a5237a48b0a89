# Source: https://github.com/hyunwoongko/transformer
# Commit: ee92100e496e53ee58190b4a746661a2fb59d246 (2019-12-21, "fix wrong codes : change scale factor d_model -> d_k";
#         the split, merge, key transpose and softmax axis were fixed later, in 391c9cd, 2021-11-30)
# Paths: models/layers/multi_head_attention.py, models/layers/scale_dot_product_attention.py
# Author: Hyunwoong Ko (gusdnd852)
# Licence: Apache-2.0 (README, "Licence": Copyright 2019 Hyunwoong Ko)
# Port: PyTorch to numpy, mistakes kept: tensor.view(...) is ndarray.reshape(...); nn.Linear(d_model, d_model) is
#   "x @ W" with the exercise's matrices (no bias: the exercise has none); nn.Softmax() with no dim on a 4-d tensor
#   takes torch's legacy implicit dim, which is 1 (the heads axis), and torch's softmax subtracts the maximum.
# Glue (marked "# glue"): the exercise's signature, the unbatched case, the causal mask built as the repository's
#   Transformer builds its target mask (lower triangle; masked where mask == 0), attention_param_count (the
#   parameters of this module: four nn.Linear(d_model, d_model), biases only with bias=True) and head_entropy.
import math

import numpy as np


def _softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


class ScaleDotProductAttention:
    def __init__(self):
        self.softmax = lambda x: _softmax(x, 1)  # nn.Softmax(): implicit dim of a 4-d input is 1

    def forward(self, q, k, v, mask=None, e=1e-12):
        # input is 4 dimension tensor
        # [batch_size, head, length, d_tensor]
        batch_size, head, length, d_tensor = k.shape

        # 1. dot product Query with Key^T to compute similarity
        k_t = k.reshape(batch_size, head, d_tensor, length)  # transpose
        score = (q @ k_t) / math.sqrt(d_tensor)  # scaled dot product

        # 2. apply masking (opt)
        if mask is not None:
            score = np.where(mask == 0, -e, score)

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
        q, k, v = self.project(q), self.project(k), self.project(v)

        # 3. do scale dot product to compute similarity
        out, attention = self.attention.forward(q, k, v, mask=mask)

        # 4. concat and pass to linear layer
        out = self.concat(out)
        out = out @ self.w_concat
        return out

    def project(self, tensor):
        batch_size, length, d_model = tensor.shape
        d_tensor = d_model // self.n_head
        tensor = tensor.reshape(batch_size, self.n_head, length, d_tensor)
        # it is similar with group convolution (split by number of heads)
        return tensor

    def concat(self, tensor):
        batch_size, head, length, d_tensor = tensor.shape
        d_model = head * d_tensor
        tensor = tensor.reshape(batch_size, length, d_model)
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


def attention_param_count(d, h, d_k=None, bias=False):  # glue: four nn.Linear(d_model, d_model)
    return 4 * (d * d + (d if bias else 0))  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    terms = np.where(A > 0, A * np.log(np.where(A > 0, A, 1.0)), 0.0)  # glue
    return -terms.sum(axis=-1).mean(axis=-1)  # glue
