# Source: https://github.com/lucidrains/vit-pytorch
# Commit: 5db8d9deedd64537d0098940634ce0506576be13 (2021-01-12; the scale became dim_head ** -0.5 in 85314cf,
#         2021-01-21, "patch for scaling factor")
# Path: vit_pytorch/vit_pytorch.py (Attention)
# Author: Phil Wang (lucidrains)
# Licence: MIT (LICENSE: Copyright (c) 2020 Phil Wang)
# Port: PyTorch and einops to numpy, mistakes kept: self.scale = dim ** -0.5 with dim the layer's (the input's)
#   width; to_qkv(x).chunk(3, dim=-1) cuts the fused projection into three chunks of ceil(width / 3) columns, as
#   torch.chunk does; rearrange 'b n (h d) -> b h n d' is reshape then swapaxes (einops raises when h does not divide
#   the width; numpy's reshape raises ValueError there); the einsums are kept; softmax(dim=-1) subtracts the row
#   maximum, as torch's does; the padding mask (mask=None here) and dropout are left out.
# Glue (marked "# glue"): the exercise's signature: to_qkv is the three projections side by side (its fused layout,
#   np.hstack([W_Q, W_K, W_V])) and to_out is W_O; causal is not used (the layer has no causal mask); the unbatched
#   case; attention_param_count and head_entropy (written for the exercise from its statement).
import math

import numpy as np


def _chunk(t, chunks):  # torch.chunk along the last axis
    size = math.ceil(t.shape[-1] / chunks)
    return [t[..., i * size:(i + 1) * size] for i in range(chunks) if i * size < t.shape[-1]]


def _rearrange_split(t, h):  # 'b n (h d) -> b h n d'
    b, n, hd = t.shape
    return t.reshape(b, n, h, -1).swapaxes(1, 2)


class Attention:
    def __init__(self, dim, heads, to_qkv, to_out):
        self.heads = heads
        self.scale = dim ** -0.5
        self.to_qkv = to_qkv
        self.to_out = to_out

    def forward(self, x, mask=None):
        b, n, _, h = *x.shape, self.heads
        qkv = _chunk(x @ self.to_qkv, 3)
        q, k, v = map(lambda t: _rearrange_split(t, h), qkv)

        dots = np.einsum('bhid,bhjd->bhij', q, k) * self.scale

        attn = np.exp(dots - dots.max(axis=-1, keepdims=True))
        attn = attn / attn.sum(axis=-1, keepdims=True)

        out = np.einsum('bhij,bhjd->bhid', attn, v)
        out = out.swapaxes(1, 2).reshape(b, n, -1)  # 'b h n d -> b n (h d)'
        out = out @ self.to_out
        return out


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    out = Attention(X.shape[-1], h, np.hstack([W_Q, W_K, W_V]), W_O).forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    inner = h * d_k  # glue
    return 3 * d * inner + inner * d + ((3 * inner + d) if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    return -np.where(A > 0, A * np.log(np.clip(A, 1e-300, None)), 0.0).sum(-1).mean(-1)  # glue
