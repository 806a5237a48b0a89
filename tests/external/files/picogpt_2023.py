# Source: https://github.com/jaymody/picoGPT
# Commit: 817292baea75f194fb0bb8ba2aa5f947af4e45ee (2023-04-24, main)
# Path: gpt2.py (softmax, linear, attention, mha)
# Author: Jay Mody
# Licence: MIT (LICENSE: Copyright (c) 2023 Jay Mody)
# Port: none needed, the source is numpy; the functions below are copied as they are, with one glue line in mha.
# Glue (marked "# glue"): the exercise's signature: c_attn is the three projections side by side (GPT-2's c_attn
#   layout, np.hstack([W_Q, W_K, W_V])) with zero bias, c_proj is W_O with zero bias, the batch is looped over (mha
#   takes one sequence), and causal=False replaces the causal mask by 0 (picoGPT only builds GPT-2, which is
#   always causal); attention_param_count and head_entropy (written for the exercise from its statement).
import numpy as np


def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def linear(x, w, b):  # [m, in], [in, out], [out] -> [m, out]
    return x @ w + b


def attention(q, k, v, mask):  # [n_q, d_k], [n_k, d_k], [n_k, d_v], [n_q, n_k] -> [n_q, d_v]
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head, causal=True):  # [n_seq, n_embd] -> [n_seq, n_embd]
    # qkv projection
    x = linear(x, **c_attn)  # [n_seq, n_embd] -> [n_seq, 3*n_embd]

    # split into qkv
    qkv = np.split(x, 3, axis=-1)  # [n_seq, 3*n_embd] -> [3, n_seq, n_embd]

    # split into heads
    qkv_heads = list(map(lambda x: np.split(x, n_head, axis=-1), qkv))  # [3, n_seq, n_embd] -> [3, n_head, n_seq, n_embd/n_head]

    # causal mask to hide future inputs from being attended to
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10 if causal else 0  # glue: "if causal else 0"

    # perform attention over each head
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]  # [3, n_head, n_seq, n_embd/n_head] -> [n_head, n_seq, n_embd/n_head]

    # merge heads
    x = np.hstack(out_heads)  # [n_head, n_seq, n_embd/n_head] -> [n_seq, n_embd]

    # out projection
    x = linear(x, **c_proj)  # [n_seq, n_embd] -> [n_seq, n_embd]

    return x


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):  # glue
    X = np.asarray(X, dtype=float)  # glue
    c_attn = {"w": np.hstack([W_Q, W_K, W_V]), "b": np.zeros(W_Q.shape[1] + W_K.shape[1] + W_V.shape[1])}  # glue
    c_proj = {"w": W_O, "b": np.zeros(W_O.shape[1])}  # glue
    if X.ndim == 2:  # glue
        return mha(X, c_attn, c_proj, h, causal)  # glue
    return np.stack([mha(x, c_attn, c_proj, h, causal) for x in X])  # glue


def attention_param_count(d, h, d_k=None, bias=False):  # glue
    if d_k is None:  # glue
        if d % h != 0:  # glue
            raise ValueError(f"d = {d} is not divisible by h = {h}")  # glue
        d_k = d // h  # glue
    n = 4 * d * (h * d_k)  # glue
    if bias:  # glue
        n += 3 * (h * d_k) + d  # glue
    return n  # glue


def head_entropy(A):  # glue
    A = np.asarray(A, dtype=float)  # glue
    logA = np.log(A, where=A > 0, out=np.zeros(A.shape))  # glue
    return np.mean(-np.sum(A * logA, axis=-1), axis=-1)  # glue
