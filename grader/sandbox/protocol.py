"""The framing and value codec of the sandbox, one module for both sides (parent and child).

A worker's first bytes on its socket, written before any student code runs,
are ``GREETING``: the parent takes their sender for the worker, and reads no
other process's bytes (``client._from_worker``). After that, every message on
the protocol socket (never stdout or stderr) is an 8-byte
big-endian length, a UTF-8 JSON header of that length, then the raw bytes of
each blob listed in ``header["blobs"]``. Numbers travel in the JSON header.
Arrays from the parent travel as raw bytes with dtype and shape in the header,
large ones in a memfd passed with SCM_RIGHTS and mapped copy-on-write by the
worker; arrays from the worker travel as ``.npy`` blobs read by the parent with
``allow_pickle=False``. Nothing is ever pickled. A returned tuple travels as a
list of items, each a number or an ``.npy`` blob (``child.describe_result``).

The child imports this module from a private copy (``zygote.start``), so it
imports nothing but the standard library and numpy. The parent reads replies
with ``MessageReader``, fed as bytes arrive; the child with ``recv_message``;
both check a header with ``parse_header``. A raised exception's classes are read alike on both sides
(``classify_exception``): the worker's, for its reply; the grading process's, for its own trusted runs.
"""

from __future__ import annotations

import builtins
import io
import json
import math
import mmap
import os
import re
import socket
import struct
from typing import Literal

import numpy as np

# What a call of a student function ended as: "ok", or what went wrong. The child's replies use
# the same strings ("ok", "raised", "missing", "bad-type", "import-error"); the parent adds the rest.
Status = Literal["ok", "import-error", "missing", "raised", "timeout", "memory", "crashed", "bad-type", "too-large"]
OK: Status = "ok"
IMPORT_ERROR: Status = "import-error"  # the submission could not be imported
MISSING: Status = "missing"  # the function is not defined
RAISED: Status = "raised"  # the function raised an exception
TIMEOUT: Status = "timeout"  # the call or the submission ran out of time
MEMORY: Status = "memory"  # MemoryError under the memory limit
CRASHED: Status = "crashed"  # the child died (signal, exit) or broke the protocol
BAD_TYPE: Status = "bad-type"  # the return value is not plain numeric data
TOO_LARGE: Status = "too-large"  # the result is larger than its test can accept: refused unread

MAX_HEADER = 1 << 20  # bytes of JSON header a message may carry
NUMERIC_KINDS = "biuf"  # numpy dtype kinds that may cross the boundary
MAX_TUPLE = 8  # elements of a returned tuple, each a number or an array
MAX_INT_BITS = 256  # largest plain int a result may hold (any count of parameters fits many times over)
MEMFD_MIN_BYTES = 1 << 20  # arrays at least this big travel in a memfd instead of the socket
SOCKET_BUFFER = 4 << 20  # SO_SNDBUF / SO_RCVBUF of the protocol socket
COALESCE_BYTES = 256 << 10  # a message up to this size is copied into one write
LOST_SOCKET_EXIT = 71  # exit status of a worker whose grading socket was closed or misused
GREETING = b"\x00worker\n"  # a worker's first bytes, before the submission's code runs: who wrote them is the worker

_LEN = struct.Struct(">Q")


class ProtocolError(Exception):
    """The peer broke the framing: short read, oversized or malformed header."""


class TooLarge(ProtocolError):
    """A reply announced more bytes than the call may return (``MessageReader``'s ``bound``): refused unread.

    ``size``: the bytes of blobs its header announced; ``bound``: what the call accepts;
    ``header``: its (untrusted) JSON header; ``head``: the first bytes of its first blob
    (at most ``PEEK_BYTES``: an .npy header, for the message), never the rest.
    """

    def __init__(self, size: int, bound: int, header: dict, head: bytes) -> None:
        super().__init__(f"a result of {size:,} bytes, more than the {bound:,} bytes this call accepts")
        self.size, self.bound, self.header, self.head = size, bound, header, head


class SandboxError(Exception):
    """The sandbox itself could not run (a grader error, never the student's fault)."""


# ---------------------------------------------------------------- framing (both sides)


def header_size(prefix: bytes | bytearray) -> int:
    """The header length an 8-byte prefix announces; raises ProtocolError beyond MAX_HEADER."""
    (size,) = _LEN.unpack(prefix)
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes exceeds {MAX_HEADER}")
    return size


def parse_header(data: bytes, max_blob: int, total: bool) -> tuple[dict, list[int]]:
    """A header and its blob sizes; raises ProtocolError.

    ``total``: the blobs together may have ``max_blob`` bytes (a reply, read by
    the parent); else each of them may (a request, read by the child).
    """
    try:
        header = json.loads(data.decode("utf-8"))
    except Exception:  # noqa: BLE001 - bad UTF-8, bad JSON, too deep, digits over int's limit...
        raise ProtocolError("malformed header") from None
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
        raise ProtocolError("malformed blob list")
    if total and sum(sizes) > max_blob:
        raise ProtocolError(f"its result of {sum(sizes):,} bytes is larger than the "
                            f"{max_blob:,} bytes a result may have")
    if not total and any(s > max_blob for s in sizes):
        raise ProtocolError("malformed blob list")
    return header, sizes


def _recv_exact(sock: socket.socket, n: int) -> bytes | bytearray:
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        chunk = sock.recv_into(view[got:], min(n - got, 1 << 22))
        if not chunk:
            raise EOFError("connection closed")
        got += chunk
    return bytes(buffer) if n < 4096 else buffer


def send_message(sock: socket.socket, header: dict, blobs=(), fds=()) -> None:
    """Send one framed message: JSON header plus raw blobs, and file descriptors (SCM_RIGHTS)."""
    header = dict(header, blobs=[len(b) for b in blobs])
    data = json.dumps(header).encode("utf-8", "backslashreplace")
    prefix = _LEN.pack(len(data))
    parts = [prefix, data, *blobs]
    if fds:
        socket.send_fds(sock, [parts.pop(0)], list(fds))  # the descriptors ride on the prefix
    if sum(len(part) for part in parts) <= COALESCE_BYTES:
        sock.sendall(b"".join(parts))  # one write: the reader wakes once per message, not once per blob
        return
    for part in parts:
        sock.sendall(part)




def recv_message(sock: socket.socket, max_blob: int, with_fds: bool = False):
    """Receive one framed message (the child's side, blocking); raises ProtocolError or EOFError.

    Returns ``(header, blobs)``, or ``(header, blobs, fds)`` with ``with_fds``.
    """
    fds: list[int] = []
    prefix: bytes | bytearray
    if with_fds:
        first, fds, _, _ = socket.recv_fds(sock, _LEN.size, 64)
        if not first:
            raise EOFError("connection closed")
        prefix = first + (_recv_exact(sock, _LEN.size - len(first)) if len(first) < _LEN.size else b"")
    else:
        prefix = _recv_exact(sock, _LEN.size)
    header, sizes = parse_header(bytes(_recv_exact(sock, header_size(prefix))), max_blob, total=False)
    blobs = [_recv_exact(sock, s) for s in sizes]
    return (header, blobs, fds) if with_fds else (header, blobs)


class MessageReader:
    """Parses one framed message (the parent's side), fed as bytes arrive; raises ProtocolError.

    ``bound``: the bytes of blobs this reply may have (what its call can accept, at most
    ``max_blob``). A header that announces more raises ``TooLarge`` as soon as it and the first
    ``PEEK_BYTES`` of the first blob have arrived: the rest is never buffered.
    """

    def __init__(self, max_blob: int, bound: int | None = None) -> None:
        self.max_blob = max_blob
        self.bound = max_blob if bound is None else min(bound, max_blob)
        self.buffer = bytearray()
        self.header: dict | None = None
        self.sizes: list[int] = []
        self.start = 0

    def feed(self, data: bytes) -> tuple[dict, list[bytes]] | None:
        """The message once all of it has arrived, else None."""
        self.buffer += data
        if self.header is None:
            if len(self.buffer) < _LEN.size:
                return None
            size = header_size(self.buffer[:_LEN.size])
            if len(self.buffer) < _LEN.size + size:
                return None
            self.header, self.sizes = parse_header(bytes(self.buffer[_LEN.size:_LEN.size + size]), self.max_blob,
                                                   total=True)
            self.start = _LEN.size + size
        total = sum(self.sizes)
        if total > self.bound:
            peek = min(self.sizes[0] if self.sizes else 0, PEEK_BYTES)
            if len(self.buffer) < self.start + peek:
                return None
            raise TooLarge(total, self.bound, self.header, bytes(self.buffer[self.start:self.start + peek]))
        end = self.start + total
        if len(self.buffer) < end:
            return None
        if len(self.buffer) > end:
            raise ProtocolError("unexpected data after a reply")
        blobs, offset = [], self.start
        for size in self.sizes:
            blobs.append(bytes(self.buffer[offset:offset + size]))
            offset += size
        return self.header, blobs


PEEK_BYTES = 4096  # bytes of a refused reply's first blob read, for its .npy header (shape and dtype)


def announced_array(head: bytes) -> tuple[tuple[int, ...], str] | None:
    """(shape, dtype) that the start of an .npy blob announces, when it is numpy's plain header; else None.

    Untrusted and unchecked against the bytes that follow: for a message only.
    """
    if head[:8] != b"\x93NUMPY\x01\x00" or len(head) < 10:
        return None
    plain = _PLAIN_HEADER.fullmatch(head, 10, min(len(head), 10 + int.from_bytes(head[8:10], "little")))
    if plain is None:
        return None
    return tuple(int(n) for n in plain[3].split(b",") if n.strip()), str(np.dtype(plain[1].decode()))


def report(ctl: socket.socket, message: dict) -> None:
    """Send one event (JSON, one datagram) on a keeper's control socket; a closed socket is ignored."""
    try:
        ctl.send(json.dumps(message).encode())
    except OSError:
        pass


# ---------------------------------------------------------------- values


def array_to_blob(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array, order="C"), allow_pickle=False)  # keeps shape ()
    return buffer.getvalue()


# The header numpy's writer gives a plain numeric array (format 1.0), read without numpy's
# parser (which evaluates it with ast.literal_eval: a compile per reply). Anything else goes to it.
_PLAIN_HEADER = re.compile(rb"\{'descr': '([<>|][biuf][0-9]{1,2})', 'fortran_order': (False|True), "
                           rb"'shape': \(((?:[0-9]{1,20}, ){0,63}[0-9]{0,20},?)\), \} *\n")


def blob_to_array(blob: bytes) -> np.ndarray:
    """Read an .npy blob without pickle; raises ValueError on anything else.

    The header's shape and dtype must account for exactly the bytes that follow,
    so a forged header cannot make the reader allocate more than the blob holds.
    """
    if blob[:8] == b"\x93NUMPY\x01\x00" and len(blob) >= 10:
        start = 10 + int.from_bytes(blob[8:10], "little")
        plain = _PLAIN_HEADER.fullmatch(blob, 10, start)
        if plain is not None:
            dtype = np.dtype(plain[1].decode())
            shape = tuple(int(n) for n in plain[3].split(b",") if n.strip())
            _check_size(shape, dtype, len(blob) - start)
            flat = np.frombuffer(blob, dtype, count=math.prod(shape), offset=start)
            return flat.reshape(shape, order="F" if plain[2] == b"True" else "C").copy(order="K")
    stream = io.BytesIO(blob)
    major, _ = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    if dtype.hasobject:
        raise ValueError("an object array cannot cross the boundary")
    _check_size(shape, dtype, len(blob) - stream.tell())
    stream.seek(0)
    return np.lib.format.read_array(stream, allow_pickle=False)


def _check_size(shape: tuple, dtype: np.dtype, follow: int) -> None:
    size = dtype.itemsize * math.prod(shape)  # Python ints: exact, however large a forged shape
    if size != follow:
        raise ValueError(f"the .npy header claims shape {shape} of {dtype}, {size} bytes, "
                         f"but {follow} bytes follow")


def encode_values(values: list, memfd: bool = True) -> tuple[list, list, list[int]]:
    """Encode the parent's plain numbers and numeric ndarrays as JSON specs, raw blobs and memfds.

    Arrays of ``MEMFD_MIN_BYTES`` or more travel in a sealed memfd (``sealed_memfd``), written
    once per array; the caller sends and then closes the returned descriptors (each its own copy).
    ``memfd`` False (the portable backend, over pipes): every array is a blob.
    """
    specs: list[dict] = []
    blobs: list[np.ndarray] = []
    fds: list[int] = []
    for value in values:
        if isinstance(value, np.ndarray):
            array = np.asarray(value, order="C")  # C order, shape () kept
            spec = {"dtype": array.dtype.str, "shape": list(array.shape)}
            if memfd and array.nbytes >= MEMFD_MIN_BYTES:
                specs.append(dict(spec, memfd=len(fds)))
                fds.append(os.dup(sealed_memfd(value)))
            else:
                specs.append(dict(spec, array=len(blobs)))
                blobs.append(array.reshape(-1).view(np.uint8))  # raw bytes, no copy (shapes with 0 too)
        else:
            specs.append({"value": value})
    return specs, blobs, fds


SEALED_CACHE_BYTES = 256 << 20  # bytes of large arguments kept in sealed memfds for later calls
_sealed: dict[int, tuple[np.ndarray, int]] = {}  # id(array) -> (the array, its sealed memfd)


def sealed_memfd(array: np.ndarray) -> int:
    """A memfd holding ``array``'s bytes, sealed against every write, resize and further seal.

    The grader's large inputs (the model-size cases) are the same arrays for every submission a
    process grades: each is written once, and every child maps the same pages copy-on-write, so
    a call costs no copy. Sealed, no child can change what the next one reads. The array is made
    read-only here, so the grader cannot change it either while its memfd is kept.
    """
    hit = _sealed.get(id(array))
    if hit is not None and hit[0] is array:
        return hit[1]
    while _sealed and sum(a.nbytes for a, _ in _sealed.values()) + array.nbytes > SEALED_CACHE_BYTES:
        os.close(_sealed.pop(next(iter(_sealed)))[1])  # the oldest first
    import fcntl  # Linux only, as memfd_create: the portable backend sends every array on its pipe

    fd = os.memfd_create("grader-argument", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = np.asarray(array, order="C").reshape(-1).view(np.uint8).data  # memoryview of its bytes, no copy
    while view:
        view = view[os.write(fd, view):]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    array.flags.writeable = False
    _sealed[id(array)] = (array, fd)
    return fd


def decode_argument(spec: dict, blobs: list, fds: list[int]):
    if "value" in spec:
        return spec["value"]
    dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
    if "memfd" in spec:
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if size == 0:
            return np.zeros(shape, dtype)
        # Copy-on-write: the worker may modify its inputs without touching the parent's copy.
        mapping = mmap.mmap(fds[spec["memfd"]], size, flags=mmap.MAP_PRIVATE,
                            prot=mmap.PROT_READ | mmap.PROT_WRITE)
        return np.frombuffer(mapping, dtype).reshape(shape)
    return np.frombuffer(bytearray(blobs[spec["array"]]), dtype).reshape(shape)


# ---------------------------------------------------------------- what a raised exception is (both sides)

# Python's own exception classes, taken from the builtins module when this module is first imported: in a worker,
# before any student code runs, so a submission that rebinds builtins.ValueError changes nothing here. Keyed by
# id, so that no class's hash or equality (its metaclass's to define) is ever called. Aliases (IOError) are left out.
_STANDARD: dict[int, str] = {id(cls): name for name, cls in vars(builtins).items()
                             if isinstance(cls, type) and issubclass(cls, BaseException) and cls.__name__ == name}
EXCEPTION_NAMES = frozenset(_STANDARD.values())  # the names a reply's "classes" may hold (replies._classes checks)
_MRO = type.__dict__["__mro__"]  # type's own slots, read through its descriptors: a metaclass's
_NAME = type.__dict__["__name__"]  # __mro__ or __name__ property is never called
_id, _type = id, type  # bound now: a submission may rebind the builtins' names, never these


def classify_exception(exc: BaseException) -> tuple[str, tuple[str, ...], bool]:
    """What ``exc`` is, read without calling anything its class or metaclass can override: (its class's own name,
    Python's exception classes it is an instance of, whether its class is the first of those itself).

    The classes are the builtin exception classes in its type's method resolution order, most specific first:
    the order ``except`` and ``isinstance`` walk (a class that ``except ValueError`` catches has ValueError among
    them; a class merely named ValueError has not). ``class ShapeError(ValueError)`` gives ("ShapeError",
    ("ValueError", "Exception", "BaseException"), False); numpy's AxisError ("AxisError", ("ValueError",
    "IndexError", "LookupError", "Exception", "BaseException"), False); a plain ValueError ("ValueError",
    ("ValueError", "Exception", "BaseException"), True). Compared by identity with the classes the builtins
    module held when this module was imported.
    """
    kind = _type(exc)
    classes = tuple(_STANDARD[_id(cls)] for cls in _MRO.__get__(kind) if _id(cls) in _STANDARD)
    return _NAME.__get__(kind), classes, _id(kind) in _STANDARD
