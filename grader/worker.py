"""The child side of the sandbox: imports one submission and calls its functions.

This file runs inside the sandboxed child process, started by ``grader.sandbox``
as ``python -I -c <this file's source>``, so it must import nothing but the
standard library and numpy. The parent imports it too, for the message framing
(``send_message`` / ``recv_message``) that both sides share.

Protocol, on a dedicated socket (never stdout or stderr): every message is an
8-byte big-endian length, a UTF-8 JSON header of that length, then the raw
bytes of each blob listed in ``header["blobs"]`` (their lengths). Arrays travel
as ``.npy`` blobs written and read with ``allow_pickle=False``; numbers travel
in the JSON header. Nothing is ever pickled.
"""

from __future__ import annotations

import io
import json
import os
import socket
import struct
import sys
import traceback

import numpy as np

MAX_HEADER = 1 << 20  # bytes of JSON header a message may carry
MAX_MESSAGE = 2000  # characters of an exception message kept by the child
NUMERIC_KINDS = "biuf"  # numpy dtype kinds that may cross the boundary

_LEN = struct.Struct(">Q")


class ProtocolError(Exception):
    """The peer broke the framing: short read, oversized or malformed header."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def send_message(sock: socket.socket, header: dict, blobs: list[bytes] = ()) -> None:
    """Send one framed message: JSON header plus raw blobs."""
    header = dict(header, blobs=[len(b) for b in blobs])
    data = json.dumps(header).encode("utf-8", "backslashreplace")
    sock.sendall(_LEN.pack(len(data)) + data)
    for blob in blobs:
        sock.sendall(blob)


def recv_message(sock: socket.socket, max_blob: int) -> tuple[dict, list[bytes]]:
    """Receive one framed message; raises ProtocolError or EOFError."""
    (size,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes exceeds {MAX_HEADER}")
    try:
        header = json.loads(_recv_exact(sock, size).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"malformed header: {exc}") from None
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(type(s) is int and 0 <= s <= max_blob for s in sizes):
        raise ProtocolError("malformed blob list")
    return header, [_recv_exact(sock, s) for s in sizes]


def array_to_blob(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def blob_to_array(blob: bytes) -> np.ndarray:
    """Read an .npy blob without pickle; raises ValueError on anything else."""
    return np.lib.format.read_array(io.BytesIO(blob), allow_pickle=False)


def encode_values(values: list) -> tuple[list, list[bytes]]:
    """Encode plain numbers and numeric ndarrays as JSON specs plus .npy blobs."""
    specs, blobs = [], []
    for value in values:
        if isinstance(value, np.ndarray):
            specs.append({"array": len(blobs)})
            blobs.append(array_to_blob(value))
        else:
            specs.append({"value": value})
    return specs, blobs


# ---------------------------------------------------------------- child side


def _describe_result(result) -> tuple[dict, list[bytes]]:
    """Turn a student's return value into a reply, rejecting anything but plain data.

    Only exact ints, floats, numpy scalars, exact ndarrays of a numeric dtype,
    and lists or tuples that convert to one are accepted.
    """
    kind = type(result)
    name = f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__
    if kind in (int, float, bool):
        return {"status": "ok", "type": name, "value": result}, []
    if isinstance(result, np.generic) and kind is getattr(np, kind.__name__, None):
        if result.dtype.kind in NUMERIC_KINDS:
            return {"status": "ok", "type": name, "value": result.item()}, []
    if kind is np.ndarray and result.dtype.kind in NUMERIC_KINDS:
        return {"status": "ok", "type": name, "array": 0}, [array_to_blob(result)]
    if kind in (list, tuple):
        try:
            array = np.array(result)
        except Exception:  # a ragged or hostile list
            array = None
        if array is not None and type(array) is np.ndarray and array.dtype.kind in NUMERIC_KINDS:
            return {"status": "ok", "type": name, "array": 0}, [array_to_blob(array)]
        return {"status": "bad-type", "type": name, "message": f"returned a {name} that is not all numbers"}, []
    if kind is np.ndarray:
        return {"status": "bad-type", "type": name, "message": f"returned an array of dtype {result.dtype}, not numbers"}, []
    return {"status": "bad-type", "type": name, "message": f"returned {name}"}, []


def _describe_exception(exc: BaseException) -> dict:
    kind = type(exc)
    try:
        text = str(exc)
    except BaseException:  # an exception whose __str__ itself raises
        text = "<its message could not be read>"
    if not isinstance(text, str):
        text = "<its message is not text>"
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + f"... [{len(text) - MAX_MESSAGE} more characters]"
    where = ""
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _SUBMISSION_FILE]
        if frames:
            where = f"line {frames[-1].lineno}"
    except BaseException:
        pass
    return {"exception": kind.__name__, "message": text, "where": where}


_SUBMISSION_FILE = ""


def _import_submission(path: str, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def serve(sock_fd: int, path: str, name: str, max_blob: int) -> None:
    """Import the submission at ``path`` and answer call requests until told to stop."""
    global _SUBMISSION_FILE
    _SUBMISSION_FILE = path
    sock = socket.socket(fileno=sock_fd)
    try:
        module = _import_submission(path, name)
    except SyntaxError as exc:
        where = f"{os.path.basename(exc.filename or path)}, line {exc.lineno}"
        send_message(sock, {"status": "import-error", "exception": "SyntaxError", "message": f"{exc.msg} ({where})", "where": ""})
        return
    except BaseException as exc:  # SystemExit and KeyboardInterrupt at import included
        send_message(sock, dict(_describe_exception(exc), status="import-error"))
        return
    send_message(sock, {"status": "ready"})
    while True:
        try:
            request, blobs = recv_message(sock, max_blob)
        except EOFError:
            return
        if request.get("op") != "call":
            return
        function = getattr(module, request["function"], None)
        if not callable(function):
            send_message(sock, {"status": "missing", "message": f"{request['function']} is not defined"})
            continue
        args = [blob_to_array(blobs[s["array"]]) if "array" in s else s["value"] for s in request["args"]]
        kwargs = {k: (blob_to_array(blobs[s["array"]]) if "array" in s else s["value"]) for k, s in request["kwargs"].items()}
        try:
            result = function(*args, **kwargs)
            reply, out = _describe_result(result)
        except BaseException as exc:
            reply, out = dict(_describe_exception(exc), status="raised"), []
        send_message(sock, reply, out)


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]))
