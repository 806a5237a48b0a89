# Source: https://github.com/rasbt/LLMs-from-scratch
# Commit: 3f1dfc9bb6fc85931a68acfdda01f22b82bed743
# Path: ch03/02_bonus_efficient-multihead-attention/ch03.py (MultiHeadAttention)
# Author: Sebastian Raschka
# Licence: MIT (LICENSE.txt at 1bba9c24e948978814d6829a6c1a525e521d508c: Copyright (c) 2023-2024 Sebastian Raschka)
# Port: PyTorch to numpy, behaviour kept: the layer is built for d_in = the input's width and d_out = the queries'
#   width, with its assert and head_dim = d_out // num_heads for queries, keys and values; view is reshape,
#   transpose is swapaxes; masked_fill_(mask, -inf) is np.where; torch.softmax subtracts the row maximum, as torch's
#   does; dropout is left out (the identity at evaluation); nn.Linear is "x @ W" with the exercise's matrices (the
#   default qkv_bias=False; out_proj's bias is zero).
# Glue (marked "# glue"): the exercise's signature (d_out = W_Q.shape[1]), causal=False leaves out the mask (the
#   layer is always causal), the unbatched case, attention_param_count and head_entropy (written for the exercise
#   from its statement).
import numpy as np


class MultiHeadAttention:
    def __init__(self, d_in, d_out, num_heads, W_query, W_key, W_value, out_proj, causal=True):
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # Reduce the projection dim to match desired output dim

        self.W_query, self.W_key, self.W_value = W_query, W_key, W_value
        self.out_proj = out_proj  # Linear layer to combine head outputs
        self.causal = causal  # glue

    def forward(self, x):
        b, num_tokens, d_in = x.shape

        keys = x @ self.W_key  # Shape: (b, num_tokens, d_out)
        queries = x @ self.W_query
        values = x @ self.W_value

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim)
        keys = keys.reshape(b, num_tokens, self.num_heads, self.head_dim)
        values = values.reshape(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.reshape(b, num_tokens, self.num_heads, self.head_dim)

        # Transpose: (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.swapaxes(1, 2)
        queries = queries.swapaxes(1, 2)
        values = values.swapaxes(1, 2)

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        attn_scores = queries @ keys.swapaxes(2, 3)  # Dot product for each head

        if self.causal:  # glue
            # Original mask truncated to the number of tokens and converted to boolean
            mask_bool = np.triu(np.ones((num_tokens, num_tokens)), k=1).astype(bool)[:num_tokens, :num_tokens]

            # Use the mask to fill attention scores
            attn_scores = np.where(mask_bool, -np.inf, attn_scores)

        z = attn_scores / keys.shape[-1]**0.5
        attn_weights = np.exp(z - z.max(axis=-1, keepdims=True))
        attn_weights = attn_weights / attn_weights.sum(axis=-1, keepdims=True)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).swapaxes(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)
        context_vec = context_vec @ self.out_proj  # optional projection

        return context_vec


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    unbatched = X.ndim == 2  # glue
    if unbatched:  # glue
        X = X[None]  # glue
    layer = MultiHeadAttention(X.shape[-1], W_Q.shape[1], h, W_Q, W_K, W_V, W_O, causal)  # glue
    out = layer.forward(X)  # glue
    return out[0] if unbatched else out  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h:  # glue
            raise ValueError(f"h = {h} does not divide d = {d}")  # glue
        d_k = d // h  # glue
    d_out = h * d_k  # glue
    return 3 * d * d_out + d_out * d + ((3 * d_out + d) if bias else 0)  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    logs = np.zeros_like(A)  # glue
    np.log(A, out=logs, where=A > 0)  # glue
    return (-(A * logs).sum(axis=-1)).mean(axis=-1)  # glue
