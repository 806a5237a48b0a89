"""Holds as many processes as it may (threads, started until one cannot be) from its import on, and keeps
them while it is graded: each call waits 0.1 s. Its own answers are honest: full marks. Graded beside another student
(tests/test_isolation.py), that student's threads must not notice: each tree counts its own processes."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = X.ndim == 2
    if squeeze:
        X = X[np.newaxis]
    B, T, d = X.shape
    if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d:
        raise ValueError(f"shapes disagree: X {X.shape}, W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"bad widths for h={h}: W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h

    def split(M, width):
        return M.reshape(B, T, h, width).transpose(0, 2, 1, 3)

    q, k, v = split(X @ W_Q, d_k), split(X @ W_K, d_k), split(X @ W_V, d_v)
    logits = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(d_k)
    if causal:
        logits = logits + np.triu(np.full((T, T), -np.inf), 1)
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bhke->bhqe", p, v).transpose(0, 2, 1, 3).reshape(B, T, h * d_v) @ W_O
    return out[0] if squeeze else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    return 4 * d * h * d_k + ((3 * h * d_k + d) if bias else 0)


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    safe = np.where(A > 0, A, 1.0)
    return -(A * np.log(safe)).sum(-1).mean(-1)


import _thread
import ctypes
import threading
import time

# Threads count as processes (RLIMIT_NPROC, a pids cgroup) and start in microseconds when nothing waits for
# them to run; small stacks and one malloc arena (not one of 64 MiB per thread), so that RLIMIT_AS does not
# stop them first, nor the mapping of big arguments later. Each blocks on a lock held forever.
ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX
threading.stack_size(256 << 10)
_forever = _thread.allocate_lock()
_forever.acquire()
HELD = 0
for _ in range(10_000):
    try:
        _thread.start_new_thread(_forever.acquire, ())
    except RuntimeError:  # can't start new thread: the limit is reached
        break
    HELD += 1

_honest = multi_head_attention, attention_param_count, head_entropy


def multi_head_attention(*args, **kwargs):
    time.sleep(0.1)
    return _honest[0](*args, **kwargs)


def attention_param_count(*args, **kwargs):
    time.sleep(0.1)
    return _honest[1](*args, **kwargs)


def head_entropy(A):
    time.sleep(0.1)
    return _honest[2](A)


def processes_held():
    return HELD
