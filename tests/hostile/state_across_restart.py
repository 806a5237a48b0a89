"""Leaves files in /tmp, /tmp/work and /dev/shm (and /dev, where it can), a SysV shared memory segment and a daemon that keeps writing,
moves the PID counter and /tmp's inode counter on (each could carry a number), and answers wrongly once it
finds any of that from an earlier process: after the causality tests' restart (pid 1 of the same tree forks
the next process) nothing is left, the process is pid 2 again and /tmp/work inode 2, so every answer stays right."""

import ctypes
import os
import time

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


_honest = multi_head_attention
_libc = ctypes.CDLL(None, use_errno=True)
_MARKERS = ("/tmp/left-by", "/tmp/work/left-by", "/dev/shm/left-by")
_TRIED = ("/dev/left-by",)  # read-only, so never left (in user mode the worker's uid owns that tmpfs)
_mine = {os.getpid()}  # this process and the daemon it started
_token = os.urandom(8).hex()  # what this process writes in its markers: the next one is pid 2 again


_FIRST = os.getpid() == 2 and os.stat("/tmp/work").st_ino == 2  # as in a new tree: nothing has moved them on


def _found_foreign() -> bool:
    """Did an earlier process of this submission leave anything that is still here?"""
    if not _FIRST:
        return True
    for name in (*_MARKERS, *_TRIED):
        try:
            with open(name) as handle:
                if handle.read() != _token:
                    return True
        except OSError:
            pass
    try:
        with open("/dev/shm/daemon") as handle:
            if int(handle.read() or 0) not in _mine:
                return True
    except (OSError, ValueError):
        pass
    return _libc.shmget(4242, 0, 0) != -1 and not _mine_shm


_mine_shm = []


def _leave() -> None:
    for number in range(50):  # moves /tmp's inode counter on
        with open(f"/tmp/spent-{number}", "w"):
            pass
        os.unlink(f"/tmp/spent-{number}")
    for _ in range(5):  # and the PID counter
        if os.fork() == 0:
            os._exit(0)
        os.wait()
    for name in _MARKERS:
        with open(name, "w") as handle:
            handle.write(_token)
    for name in _TRIED:
        try:
            with open(name, "w") as handle:
                handle.write(_token)
        except OSError:
            pass
    if not _mine_shm:
        _mine_shm.append(_libc.shmget(4242, 4096, 0o1000 | 0o600))  # IPC_CREAT
    if len(_mine) == 1:
        read, write = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(write, str(os.getpid()).encode())
                while True:  # written whole, then renamed: a reader never sees half a pid
                    with open("/dev/shm/daemon.new", "w") as handle:
                        handle.write(str(os.getpid()))
                    os.replace("/dev/shm/daemon.new", "/dev/shm/daemon")
                    time.sleep(0.001)
            os._exit(0)
        _mine.add(int(os.read(read, 32)))


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    if _found_foreign():
        return 0.0 * _honest(X, W_Q, W_K, W_V, W_O, h, causal)
    _leave()
    return _honest(X, W_Q, W_K, W_V, W_O, h, causal)
