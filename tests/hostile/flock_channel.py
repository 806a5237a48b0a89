"""head_entropy tries to signal another sandbox through file locks: flock, fcntl record locks and OFD locks,
on a file every sandbox sees (numpy's own __init__.py, read-only) and on one of its own. Each refusal is
recorded; any lock taken turns its answers wrong. The seccomp filter refuses them all (EPERM): full marks."""

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


import fcntl
import os
import struct


_honest_entropy = head_entropy
F_OFD_SETLK = 37


def _attempts():
    shared = os.open(np.__file__, os.O_RDONLY)
    own = os.open("flock-channel", os.O_RDWR | os.O_CREAT, 0o600)  # in its working folder
    lock = struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0)
    tries = {
        "flock shared": lambda: fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB),
        "flock own": lambda: fcntl.flock(own, fcntl.LOCK_EX | fcntl.LOCK_NB),
        "F_SETLK": lambda: fcntl.fcntl(shared, fcntl.F_SETLK, lock),
        "F_GETLK": lambda: fcntl.fcntl(shared, fcntl.F_GETLK, lock),
        "lockf": lambda: fcntl.lockf(own, fcntl.LOCK_EX | fcntl.LOCK_NB),
        "F_OFD_SETLK": lambda: fcntl.fcntl(shared, F_OFD_SETLK, lock),
    }
    taken = []
    for name, attempt in tries.items():
        try:
            attempt()
            taken.append(name)
        except PermissionError:
            pass  # refused
    os.close(shared)
    os.close(own)
    return taken


def head_entropy(A):
    taken = _attempts()
    if taken:
        raise RuntimeError("locks taken: " + ", ".join(taken))
    return _honest_entropy(A)
