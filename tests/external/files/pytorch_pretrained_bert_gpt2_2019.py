# Source: https://github.com/huggingface/transformers (then pytorch-pretrained-BERT)
# Commit: 007ab6f5b2d472c848094d87ffe47ed5aa624301
# Path: pytorch_pretrained_bert/modeling_gpt2.py (Conv1D, Attention)
# Author: The OpenAI Team Authors and HuggingFace Inc. team; NVIDIA CORPORATION (file header)
# Licence: Apache-2.0 (file header)
# Port: PyTorch to numpy, behaviour kept: the layer is built as GPT2Model builds it (nx = n_state = the input's
#   width, scale=True), with its assert; c_attn(x).split(split_size, dim=2) cuts the fused projection into pieces of
#   split_size = n_state columns, as torch's split does, and unpacks three; split_heads views the last axis as
#   (n_head, width // n_head) and permutes, the keys to (batch, head, head_features, seq_length); the scores are
#   divided by sqrt(v.size(-1)); the causal mask is w * b - 1e4 * (1 - b); nn.Softmax(dim=-1) subtracts the row
#   maximum, as torch's does; dropout, head_mask and layer_past are left out.
# Glue (marked "# glue"): the exercise's signature: c_attn is the three projections side by side (GPT-2's fused
#   layout, np.hstack([W_Q, W_K, W_V])) with zero bias, c_proj is W_O with zero bias; causal=False sets b to ones (the
#   layer always masks); the unbatched case; attention_param_count and head_entropy (written for the exercise from
#   its statement).
import math

import numpy as np


def _torch_split(x, split_size, dim):
    n = x.shape[dim]
    return [np.take(x, range(i, min(i + split_size, n)), axis=dim) for i in range(0, n, split_size)]


class Conv1D:
    def __init__(self, w, b):
        self.weight, self.bias = w, b

    def __call__(self, x):
        size_out = x.shape[:-1] + (self.weight.shape[1],)
        x = x.reshape(-1, x.shape[-1]) @ self.weight + self.bias
        return x.reshape(*size_out)


class Attention:
    def __init__(self, nx, n_head, c_attn, c_proj, scale=False, causal=True):
        n_state = nx  # in Attention: n_state=768 (nx=n_embd)
        # [switch nx => n_state from Block to Attention to keep identical to TF implem]
        assert n_state % n_head == 0
        self.n_head = n_head
        self.split_size = n_state
        self.scale = scale
        self.c_attn = c_attn
        self.c_proj = c_proj
        self.causal = causal  # glue

    def _attn(self, q, k, v):
        w = q @ k
        if self.scale:
            w = w / math.sqrt(v.shape[-1])
        nd, ns = w.shape[-2], w.shape[-1]
        n_ctx = ns  # glue: the registered buffer is tril(ones(n_ctx, n_ctx)), n_ctx >= the sequence
        bias = np.tril(np.ones((n_ctx, n_ctx))).reshape(1, 1, n_ctx, n_ctx) if self.causal else np.ones((1, 1, n_ctx, n_ctx))  # glue: "if ... else ones"
        b = bias[:, :, ns-nd:ns, :ns]
        w = w * b - 1e4 * (1 - b)

        w = np.exp(w - w.max(axis=-1, keepdims=True))
        w = w / w.sum(axis=-1, keepdims=True)
        return w @ v

    def merge_heads(self, x):
        x = x.transpose(0, 2, 1, 3)
        new_x_shape = x.shape[:-2] + (x.shape[-2] * x.shape[-1],)
        return x.reshape(*new_x_shape)  # in Tensorflow implem: fct merge_states

    def split_heads(self, x, k=False):
        new_x_shape = x.shape[:-1] + (self.n_head, x.shape[-1] // self.n_head)
        x = x.reshape(*new_x_shape)  # in Tensorflow implem: fct split_states
        if k:
            return x.transpose(0, 2, 3, 1)  # (batch, head, head_features, seq_length)
        else:
            return x.transpose(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def forward(self, x):
        x = self.c_attn(x)
        query, key, value = _torch_split(x, self.split_size, dim=2)
        query = self.split_heads(query)
        key = self.split_heads(key, k=True)
        value = self.split_heads(value)
        a = self._attn(query, key, value)
        a = self.merge_heads(a)
        a = self.c_proj(a)
        return a


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    W = np.hstack([W_Q, W_K, W_V])  # glue
    layer = Attention(X.shape[-1], h, Conv1D(W, np.zeros(W.shape[1])), Conv1D(W_O, np.zeros(W_O.shape[1])),  # glue
                      scale=True, causal=causal)  # glue
    out = layer.forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    return 4 * d * h * d_k + (3 * h * d_k + d if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    return -np.sum(A * np.log(A, out=np.zeros_like(A), where=A > 0), axis=-1).mean(axis=-1)  # glue
