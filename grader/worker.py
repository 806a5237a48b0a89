"""The child side of the sandbox: the pre-started "zygote", the per-submission process tree, the call loop.

This file runs in a separate interpreter, started once per grading process by
``grader.sandbox`` as ``python -I -c <this file's source>``, so it imports
nothing but the standard library and numpy, and never anything of the grader
(no reference, no graded suite, no grader.toml): a submission forked from it
finds nothing secret in memory. The parent imports this module too, for the
message framing that both sides share.

Processes, for one submission (``zygote`` forks one tree per child start):

    zygote (imported numpy and libseccomp; forks on request, never runs student code)
     └─ keeper: own session; makes the tree's cgroup, watches the tree, kills it on
        request or when the parent's control socket closes, reports how the worker
        ended (and whether the OOM killer struck), removes the cgroup
         ├─ isolated: pid 1 of new PID, mount, network, IPC and UTS namespaces
         │  (as an ordinary user, inside a user namespace of the keeper's own);
         │  joins the cgroup, builds a minimal root file system, then forks
         │   └─ worker: root mode: uid/gid 65534, no groups; user mode: the user's uid
         │      without capabilities; both: no_new_privs, the seccomp filter
         └─ unisolated (the kernel refuses namespaces): the keeper is a child subreaper
             └─ worker: joins the cgroup; the user's own uid, rlimits, the seccomp filter

Protocol, on a dedicated socket (never stdout or stderr): every message is an
8-byte big-endian length, a UTF-8 JSON header of that length, then the raw
bytes of each blob listed in ``header["blobs"]``. Numbers travel in the JSON
header. Arrays from the parent travel as raw bytes with dtype and shape in the
header, large ones in a memfd passed with SCM_RIGHTS and mapped copy-on-write
by the worker; arrays from the worker travel as ``.npy`` blobs read by the
parent with ``allow_pickle=False``. Nothing is ever pickled.
"""

from __future__ import annotations

import ctypes
import importlib.util
import io
import json
import mmap
import os
import resource
import select
import signal
import socket
import struct
import sys
import traceback

if __name__ == "__main__" and len(sys.argv) > 2:  # the zygote: the grader's numpy, when its site lacks it
    sys.path[:0] = [entry for entry in json.loads(sys.argv[2]) if entry not in sys.path]

import numpy as np

MAX_HEADER = 1 << 20  # bytes of JSON header a message may carry
MAX_MESSAGE = 2000  # characters of an exception message kept by the worker
NUMERIC_KINDS = "biuf"  # numpy dtype kinds that may cross the boundary
MEMFD_MIN_BYTES = 1 << 20  # arrays at least this big travel in a memfd instead of the socket
SOCKET_BUFFER = 4 << 20  # SO_SNDBUF / SO_RCVBUF of the protocol socket
NOBODY = 65534  # uid and gid of student code when the grader runs as root
LOST_SOCKET_EXIT = 71  # exit status of a worker whose grading socket was closed or misused

_LEN = struct.Struct(">Q")


class ProtocolError(Exception):
    """The peer broke the framing: short read, oversized or malformed header."""


# ---------------------------------------------------------------- framing (both sides)


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
    if fds:
        socket.send_fds(sock, [prefix], list(fds))
        sock.sendall(data)
    else:
        sock.sendall(prefix + data)
    for blob in blobs:
        sock.sendall(blob)


def recv_message(sock: socket.socket, max_blob: int, with_fds: bool = False):
    """Receive one framed message; raises ProtocolError or EOFError.

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
    (size,) = _LEN.unpack(prefix)
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes exceeds {MAX_HEADER}")
    try:
        header = json.loads(bytes(_recv_exact(sock, size)).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"malformed header: {str(exc)[:200]}") from None
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(type(s) is int and 0 <= s <= max_blob for s in sizes):
        raise ProtocolError("malformed blob list")
    blobs = [_recv_exact(sock, s) for s in sizes]
    return (header, blobs, fds) if with_fds else (header, blobs)


def array_to_blob(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array, order="C"), allow_pickle=False)  # keeps shape ()
    return buffer.getvalue()


def blob_to_array(blob: bytes) -> np.ndarray:
    """Read an .npy blob without pickle; raises ValueError on anything else.

    The header's shape and dtype must account for exactly the bytes that follow,
    so a forged header cannot make the reader allocate more than the blob holds.
    """
    stream = io.BytesIO(blob)
    major, _ = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    if dtype.hasobject:
        raise ValueError("an object array cannot cross the boundary")
    size = dtype.itemsize * int(np.prod(shape, dtype=object))
    if size != len(blob) - stream.tell():
        raise ValueError(f"the .npy header claims shape {shape} of {dtype}, {size} bytes, "
                         f"but {len(blob) - stream.tell()} bytes follow")
    stream.seek(0)
    return np.lib.format.read_array(stream, allow_pickle=False)


def encode_values(values: list) -> tuple[list, list, list[int]]:
    """Encode the parent's plain numbers and numeric ndarrays as JSON specs, raw blobs and memfds.

    Arrays of ``MEMFD_MIN_BYTES`` or more are written once into a sealed-size
    memfd (the caller sends and then closes the returned descriptors).
    """
    specs: list[dict] = []
    blobs: list[np.ndarray] = []
    fds: list[int] = []
    for value in values:
        if isinstance(value, np.ndarray):
            array = np.asarray(value, order="C")  # C order, shape () kept
            spec = {"dtype": array.dtype.str, "shape": list(array.shape)}
            if array.nbytes >= MEMFD_MIN_BYTES:
                fd = os.memfd_create("grader-argument", os.MFD_CLOEXEC)
                view = array.reshape(-1).view(np.uint8).data  # memoryview of its bytes, no copy
                while view:
                    view = view[os.write(fd, view):]
                specs.append(dict(spec, memfd=len(fds)))
                fds.append(fd)
            else:
                specs.append(dict(spec, array=len(blobs)))
                blobs.append(array.reshape(-1).view(np.uint8))  # raw bytes, no copy (shapes with 0 too)
        else:
            specs.append({"value": value})
    return specs, blobs, fds


def _decode_argument(spec: dict, blobs: list, fds: list[int]):
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


# ---------------------------------------------------------------- the worker's call loop


def _type_name(value) -> str:
    kind = type(value)
    module = getattr(kind, "__module__", "")
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _describe_result(result) -> tuple[dict, list[bytes]]:
    """Turn a student's return value into a reply, rejecting anything but plain data.

    Only exact ints, floats, numpy scalars, exact ndarrays of a numeric dtype,
    and lists or tuples that convert to one are accepted. The parent checks
    again: whatever this function says is untrusted there.
    """
    kind = type(result)
    name = _type_name(result)
    if kind in (int, float, bool):
        return {"status": "ok", "type": name, "value": result}, []
    plain_scalar = isinstance(result, np.generic) and kind is getattr(np, kind.__name__, None)
    if plain_scalar and result.dtype.kind in NUMERIC_KINDS and type(result.item()) in (int, float, bool):
        return {"status": "ok", "type": name, "value": result.item()}, []  # not longdouble: item() keeps it
    if kind is np.ndarray and result.dtype.kind in NUMERIC_KINDS:
        return {"status": "ok", "type": name, "array": 0}, [array_to_blob(result)]
    if kind in (list, tuple):
        try:
            array = np.array(result)
        except Exception:  # noqa: BLE001 - a ragged or hostile list
            array = None
        if array is not None and type(array) is np.ndarray and array.dtype.kind in NUMERIC_KINDS:
            return {"status": "ok", "type": name, "array": 0}, [array_to_blob(array)]
        return {"status": "bad-type", "type": name, "message": f"returned a {name} that is not all numbers"}, []
    if kind is np.ndarray:
        return {"status": "bad-type", "type": name, "message": f"returned an array of dtype {result.dtype}, not numbers"}, []
    if isinstance(result, np.ndarray):
        return {"status": "bad-type", "type": name, "message": f"returned {name}, a subclass of numpy.ndarray; return a plain numpy.ndarray"}, []
    return {"status": "bad-type", "type": name, "message": f"returned {name}"}, []


def _describe_exception(exc: BaseException) -> dict:
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - an exception whose __str__ itself raises
        text = "<its message could not be read: its __str__ raised>"
    if not isinstance(text, str):
        text = "<its message is not text>"
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + f"... [{len(text) - MAX_MESSAGE} more characters]"
    where = ""
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _SUBMISSION_FILE]
        if frames:
            where = f"line {frames[-1].lineno}"
    except BaseException:  # noqa: BLE001, S110 - student code may raise anything
        pass
    return {"exception": type(exc).__name__, "message": text, "where": where}


_SUBMISSION_FILE = ""


def _flush_output() -> None:
    """Push what the student printed into the output pipe before the reply, so it lands in this call."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:  # noqa: BLE001, S110 - student code may raise anything
            pass


def _send(sock: socket.socket, header: dict, blobs=()) -> None:
    _flush_output()
    send_message(sock, header, blobs)


def serve(sock: socket.socket, max_blob: int) -> None:
    """Receive the submission, import it, and answer call requests until told to stop."""
    global _SUBMISSION_FILE
    load, blobs = recv_message(sock, max_blob)
    path = os.path.abspath(load["filename"])
    with open(path, "wb") as handle:
        handle.write(blobs[0])
    for name, data in zip(load.get("extra", []), blobs[1:]):  # the submission's other modules, beside it
        if name == os.path.basename(name) and name not in (".", "..", load["filename"]):
            with open(name, "wb") as handle:
                handle.write(data)
    if load.get("extra"):
        sys.path.insert(0, os.path.dirname(path))
    del blobs, load["blobs"]
    _SUBMISSION_FILE = path
    try:
        spec = importlib.util.spec_from_file_location(load["module"], path)
        # spec is None for a file name without .py: module_from_spec's AttributeError is then the import error
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[load["module"]] = module
        assert spec is not None and spec.loader is not None  # module_from_spec took it; a file's spec has a loader
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        where = f"{os.path.basename(exc.filename or path)}, line {exc.lineno}"
        _send(sock, {"status": "import-error", "exception": "SyntaxError", "message": f"{exc.msg} ({where})", "where": ""})
        return
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, EOFError (input()) too
        _send(sock, dict(_describe_exception(exc), status="import-error"))
        return
    _send(sock, {"status": "ready"})
    while True:
        try:
            request, blobs, fds = recv_message(sock, max_blob, with_fds=True)
        except EOFError:
            return
        if request.get("op") != "call":
            return
        function = getattr(module, request["function"], None)
        if not callable(function):
            _send(sock, {"status": "missing", "message": f"{request['function']} is not defined"})
            continue
        args = [_decode_argument(s, blobs, fds) for s in request["args"]]
        kwargs = {k: _decode_argument(s, blobs, fds) for k, s in request["kwargs"].items()}
        for fd in fds:
            os.close(fd)
        del blobs, fds
        try:
            result = function(*args, **kwargs)
            reply, out = _describe_result(result)
        except BaseException as exc:  # noqa: BLE001 - student code may raise anything
            reply, out = dict(_describe_exception(exc), status="raised"), []
        del args, kwargs
        _send(sock, reply, out)


# ---------------------------------------------------------------- system calls (Linux, via libc)

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUSER = 0x20000000, 0x40000000, 0x10000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 38, 36
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def _mount(source, target, fstype, flags: int, data=None) -> None:
    def enc(text):
        return None if text is None else os.fsencode(text)

    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


# ---------------------------------------------------------------- seccomp (libseccomp, through ctypes)
#
# One filter for every worker, both modes, deny-by-default: a system call that is not on _ALLOWED
# fails with ENOSYS, as on a kernel that lacks it, so glibc and CPython take the fallbacks they have
# for older kernels (clone3 -> clone, faccessat2 -> faccessat, close_range -> a loop...). The list
# holds what CPython 3.11, numpy with OpenBLAS (threads included), subprocess (fork, vfork, execve:
# no_new_privs makes setuid binaries inert and children inherit the filter) and the worker's own
# loop on its already-open sockets call: files inside the sandbox, memory, threads and futexes,
# signals, time, waiting, and a few ioctls (no new socket, connect, SysV IPC, mincore, xattr
# writes...). It was measured by grading the hostile corpus and the examples with a logging default.
# On top of that, _DENIED fails with EPERM, as before the allowlist: what numpy homework never needs
# and a hostile submission would want: the kernel keyrings (one per uid, outside every namespace: a
# channel between submissions), new namespaces (unshare, setns, clone with a CLONE_NEW* flag),
# mounts, ptrace and process_vm_*, bpf, perf_event_open, userfaultfd, io_uring, memfd_create (the
# worker only maps memfds the parent made), kernel modules and the like; clone3 says ENOSYS (its
# flags are in memory the filter cannot read). Any ABI but the native one (x86's 32-bit int 0x80,
# x32) kills the process: their syscall numbers differ and would go around the rules. libseccomp
# knows every architecture's numbers and emits the ABI checks (x32 included); it is loaded once, in
# the zygote.

_ALLOWED = (
    # files (the sandbox's mounts and the uid decide which)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "lseek", "open", "openat", "creat", "close", "close_range", "stat", "fstat", "lstat", "newfstatat",
    "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
    "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod",
    "fchmod", "fchmodat", "truncate", "ftruncate", "fsync", "fdatasync", "fallocate", "fadvise64",
    "utimensat", "utime", "utimes", "umask", "flock", "sendfile", "copy_file_range",
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "pipe", "pipe2", "dup", "dup2", "dup3", "fcntl",
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
    # the sockets the worker already holds (no socket, connect, bind: nothing new)
    "recvfrom", "recvmsg", "sendto", "sendmsg", "shutdown", "getsockopt", "setsockopt", "getsockname",
    "getpeername",
    # memory
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mbind",
    "shmget", "shmat", "shmdt", "shmctl",  # System V shared memory: the sandbox's IPC namespace, its cgroup
    # threads, processes, signals
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "set_tid_address", "rseq",
    "arch_prctl", "prctl", "fork", "vfork", "execve", "wait4", "waitid", "exit", "exit_group",
    "kill", "tkill", "tgkill", "getpid", "gettid", "getppid", "getpgrp", "getpgid", "setpgid", "getsid",
    "setsid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid", "capget",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
    "rt_sigtimedwait", "sigaltstack", "pause", "restart_syscall",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "getpriority", "setpriority", "getcpu",
    "prlimit64", "getrlimit", "setrlimit", "getrusage", "times", "uname", "sysinfo", "getrandom",
    # time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "alarm",
    "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
    "timer_delete",
)
# ioctl only with these requests: isatty and the terminal size (TCGETS, TIOCGWINSZ), FIONREAD,
# FIONBIO, FIOCLEX/FIONCLEX. No TIOCSTI or any other device's requests.
_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)

_DENIED = (
    "keyctl", "add_key", "request_key",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsmount", "fsconfig", "fspick", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd", "memfd_create", "memfd_secret",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "open_by_handle_at", "name_to_handle_at",
    "fanotify_init", "lookup_dcookie", "iopl", "ioperm", "modify_ldt", "uselib", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "move_pages", "migrate_pages",
)
_CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
SCMP_ACT_KILL_PROCESS, SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_LOG = 0x80000000, 0x7FFF0000, 0x00050000, 0x7FFC0000
SCMP_FLTATR_ACT_BADARCH, SCMP_CMP_MASKED_EQ = 2, 7
EPERM, ENOSYS = 1, 38
_CLONE_NEW_MASK = sum(_CLONE_NEW_FLAGS)
_DEFAULT_ACTION = SCMP_ACT_ERRNO | ENOSYS  # SCMP_ACT_LOG instead logs what would fail (dmesg, type=1326)


class _ArgCmp(ctypes.Structure):  # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _load_libseccomp():
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


_seccomp = _load_libseccomp()
_seccomp_filter: int | None = None  # built once in the zygote, loaded in every worker


def _build_seccomp_filter():
    """The libseccomp context of the filter above, or None without libseccomp (the hello says so)."""
    if _seccomp is None:
        return None
    ctx = _seccomp.seccomp_init(_DEFAULT_ACTION)
    if not ctx:
        return None

    def rule(action: int, name: str, *conditions: _ArgCmp) -> None:
        number = _seccomp.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return  # not a system call of this architecture
        array = (_ArgCmp * max(1, len(conditions)))(*conditions)
        result = _seccomp.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
        if result < 0:
            raise OSError(-result, f"seccomp rule for {name}: {os.strerror(-result)}")

    if _seccomp.seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0:
        return None
    for name in _DENIED:
        rule(SCMP_ACT_ERRNO | EPERM, name)
    for flag in _CLONE_NEW_FLAGS:  # clone(flags, ...) with any CLONE_NEW* bit; threads and fork pass
        rule(SCMP_ACT_ERRNO | EPERM, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag))
    rule(SCMP_ACT_ALLOW, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, _CLONE_NEW_MASK, 0))  # threads, fork
    # clone3 is off the list (ENOSYS, the default, which libseccomp refuses as a rule): its flags are
    # in memory the filter cannot read, and glibc then falls back to clone.
    for name in _ALLOWED:
        rule(SCMP_ACT_ALLOW, name)
    for request in _IOCTLS:  # the request is an unsigned int: compare its low 32 bits only
        rule(SCMP_ACT_ALLOW, "ioctl", _ArgCmp(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, request))
    return ctx


def _install_seccomp() -> None:
    """Load the filter in this process (after PR_SET_NO_NEW_PRIVS); a no-op without libseccomp."""
    if _seccomp_filter is not None:
        result = _seccomp.seccomp_load(_seccomp_filter)
        if result < 0:
            raise OSError(-result, f"seccomp_load: {os.strerror(-result)}")


def _bind(source: str, target: str, readonly: bool = True) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        # Keep the source's noexec and atime flags: in a user namespace they are locked, and a
        # remount that would clear them fails.
        kept = os.statvfs(source).f_flag & (MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
        kept |= MS_RELATIME if os.statvfs(source).f_flag & os.ST_RELATIME else 0
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


# ---------------------------------------------------------------- cgroups (one per child tree)
#
# RLIMIT_AS is per process and ignores memory held in memfds, shared memory and tmpfs files. A
# cgroup counts all of it, and every process: the keeper makes one per child tree, below the
# cgroup it runs in (so a container's or a batch's own limit still holds above it), cgroup v2 when
# its memory and pids controllers can be used there, else v1's memory and pids hierarchies. The
# tree's first process joins it before anything else runs; the keeper removes it once the tree is
# gone, and reads there whether the kernel's OOM killer struck.


def _cgroup_places() -> dict[str, str]:
    """Where a child cgroup can be made: {"v2": dir} or {"memory": dir, "pids": dir}; {} when nowhere."""
    mounts: dict[str, tuple[str, str]] = {}  # controller ("v2", "memory", "pids") -> (mount root, mount point)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                rest = fields[fields.index("-") + 1:]
                if rest[0] == "cgroup2":
                    mounts.setdefault("v2", (fields[3], fields[4]))
                elif rest[0] == "cgroup":
                    for option in rest[2].split(","):
                        if option in ("memory", "pids"):
                            mounts.setdefault(option, (fields[3], fields[4]))
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            own = {}
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else ["v2"]:
                    own[name] = path
    except (OSError, ValueError, IndexError):
        return {}

    def place(name: str) -> str | None:
        if name not in mounts or name not in own:
            return None
        root, point = mounts[name]
        path = own[name]
        if not (path == root or path.startswith(root.rstrip("/") + "/")):
            return None
        return (point + path[len(root.rstrip("/")):]).rstrip("/")

    v2 = place("v2")
    if v2 is not None:
        try:
            with open(v2 + "/cgroup.controllers", encoding="utf-8") as handle:
                if {"memory", "pids"} <= set(handle.read().split()):
                    return {"v2": v2}
        except OSError:
            pass
    memory, pids = place("memory"), place("pids")
    return {"memory": memory, "pids": pids} if memory and pids else {}


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


class _Cgroup:
    """One cgroup of a child tree, held by descriptors: pid 1's pivot_root also moves the keeper's root
    (they share a mount namespace), so the keeper reaches its cgroups through these, not by path."""

    def __init__(self, parent: str, name: str) -> None:
        self.name = name
        self.parent = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.mkdir(name, dir_fd=self.parent)
            self.folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self.parent)
        except OSError:
            os.close(self.parent)
            raise

    def write(self, file: str, text: str) -> None:
        fd = os.open(file, os.O_WRONLY | os.O_CLOEXEC, dir_fd=self.folder)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)

    def read(self, file: str) -> str:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.folder)
        try:
            return os.read(fd, 1 << 16).decode("ascii", "replace")
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Kill whatever is left in it, then remove it (an empty cgroup's rmdir succeeds)."""
        for _ in range(2000):
            try:
                os.rmdir(self.name, dir_fd=self.parent)
                break
            except FileNotFoundError:
                break
            except OSError:
                pass
            try:
                for pid in self.read("cgroup.procs").split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
            except OSError:
                pass
            select.select([], [], [], 0.001)
        os.close(self.folder)
        os.close(self.parent)


def _make_cgroup(places: dict[str, str], name: str, memory: int, pids: int) -> list[_Cgroup]:
    """Create the child tree's cgroup(s) with their limits (raises OSError)."""
    made: list[_Cgroup] = []
    try:
        if "v2" in places:
            group = _Cgroup(places["v2"], name)
            made.append(group)
            group.write("memory.max", str(memory))
            for setting, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                try:
                    group.write(setting, value)
                except FileNotFoundError:
                    pass
            group.write("pids.max", str(pids))
            return made
        memory_group = _Cgroup(places["memory"], name)
        made.append(memory_group)
        made.append(_Cgroup(places["pids"], name))
        memory_group.write("memory.limit_in_bytes", str(memory))
        try:
            memory_group.write("memory.memsw.limit_in_bytes", str(memory))  # no escape into swap
        except FileNotFoundError:
            pass
        made[1].write("pids.max", str(pids))
    except OSError:
        _remove_cgroups(made)
        raise
    return made


def _move_into_cgroups(groups: list[_Cgroup], pid: int, go: int) -> None:
    """Move ``pid`` (the tree's first process) into the cgroups, then tell it to go on (b"1"; b"0": failed).

    Moving a process into a cgroup waits for an RCU grace period (milliseconds on a busy machine):
    the keeper does it while that process builds its root file system, which it then waits for.
    """
    try:
        for group in groups:
            group.write("cgroup.procs", str(pid))
    except OSError:
        os.write(go, b"0")
        raise
    os.write(go, b"1")


def _wait_for_cgroups(go: int) -> None:
    """In the tree's first process: wait until the keeper has moved it into its cgroups (raises OSError)."""
    answer = os.read(go, 1)
    os.close(go)
    if answer != b"1":
        raise OSError("the keeper could not move the submission's processes into their cgroup")


def _oom_killed(groups: list[_Cgroup]) -> bool:
    """Did the kernel's OOM killer kill a process of these cgroups (memory.events v2, memory.oom_control v1)?"""
    for group in groups:
        for name in ("memory.events", "memory.oom_control"):
            try:
                fields = dict(line.split() for line in group.read(name).splitlines() if len(line.split()) == 2)
            except OSError:
                continue
            if int(fields.get("oom_kill", 0)) or int(fields.get("oom_group_kill", 0)):
                return True
    return False


def _remove_cgroups(groups: list[_Cgroup]) -> None:
    for group in groups:
        group.remove()


def _remove_stale_cgroups(places: dict[str, str]) -> None:
    """Remove empty ``grader-<pid>`` cgroups whose keeper is gone (it was killed before it could)."""
    for parent in places.values():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid = name.removeprefix("grader-")
            if name.startswith("grader-") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.rmdir(os.path.join(parent, name))
                except OSError:
                    pass  # not empty, or not ours to remove


def _cgroups_work(places: dict[str, str]) -> bool:
    """Can this process make (and remove) a cgroup with limits here? Tried once, by the zygote."""
    if not places:
        return False
    _remove_stale_cgroups(places)
    try:
        _remove_cgroups(_make_cgroup(places, f"grader-probe-{os.getpid()}", 64 << 20, 16))
    except OSError:
        return False
    return True


# ---------------------------------------------------------------- user namespaces (user mode)
#
# An ordinary user gets the namespaces of root mode through a user namespace of its own, as
# bubblewrap and `unshare -r` do: the keeper maps its uid and gid to themselves, so it holds every
# capability inside (enough to mount and pivot_root), and the worker drops them all (capset and the
# bounding set) before student code runs, so what hides the real file system cannot be unmounted.

_CAP_VERSION_3 = 0x20080522
PR_CAPBSET_DROP = 24


def _enter_user_namespace() -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    _write("/proc/self/setgroups", "deny")  # required before gid_map, and no group can be dropped later
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _drop_capabilities() -> None:
    """Clear the bounding, effective, permitted and inheritable capability sets of this process."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two (effective, permitted, inheritable) triples, all zero
    _check(_libc.capset(header, data), "capset")


# ---------------------------------------------------------------- the process tree of one submission


def _set_limits(limits: dict, nproc: int | None) -> None:
    memory = limits["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = limits["file_size_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _user_tasks(uid: int) -> int:
    """Processes and threads of ``uid`` now: RLIMIT_NPROC counts them all, not only the submission's."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", "rb") as handle:
                    fields = dict(line.split(b":", 1) for line in handle.read().splitlines() if b":" in line)
                if int(fields[b"Uid"].split()[0]) == uid:
                    count += int(fields[b"Threads"])
            except (OSError, KeyError, ValueError):
                pass
    return count


def _worker(request: dict, proto: int, out: int, ctl: int, workdir: str) -> None:
    """The process that imports and calls student code: fds, limits, identity, then the call loop."""
    try:
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(proto, 3)
        os.dup2(ctl, 4)
        os.closerange(5, 1 << 16)
        os.chdir(workdir)
        isolated = request["isolated"]
        _set_limits(request["limits"], request["nproc"])
        os.environ.clear()
        os.environ.update(request["env"], HOME=workdir, TMPDIR="/tmp" if isolated else workdir, PWD=workdir)
        if isolated and request["userns"]:
            _drop_capabilities()  # the user's own uid, with none of the user namespace's capabilities
        elif isolated:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)  # clears every capability
        _prctl(PR_SET_NO_NEW_PRIVS, 1)  # setuid bits and file capabilities are ignored from now on
        if request.get("seccomp", True):
            _install_seccomp()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    except BaseException as exc:
        _report(socket.socket(fileno=4), {"event": "setup-error", "message": f"{type(exc).__name__}: {exc}"})
        raise
    os.close(4)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.argv = [request["argv0"]]
    try:
        serve(socket.socket(fileno=3), request["limits"]["max_result_bytes"])
    except (OSError, EOFError, ProtocolError, ValueError, KeyError, TypeError):
        os._exit(LOST_SOCKET_EXIT)


def _build_root(request: dict) -> None:
    """In a fresh mount namespace: a minimal root file system, then pivot into it.

    Only these are visible: /usr, /bin, /lib*, /etc and the Python prefix and
    package folders the grader named (read-only, nosuid, nodev), with the
    grader's own packages inside them hidden under empty tmpfs mounts; a
    private /dev with null, zero, full, random and urandom; a fresh /proc of
    the PID namespace; a private tmpfs /tmp holding the working folder. The
    old root is unmounted, so nothing else (the project folder, reference/,
    the graded suite, grader.toml, /root, /home) exists in the new one.
    """
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = request["workdir"]  # an empty folder of the parent's; this tmpfs covers it in this namespace only
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    size = f"size={max(64, 4 * request['limits']['file_size_mb'])}m"
    os.makedirs(root + "/tmp")  # first: a virtual environment under /tmp is bound inside it below
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + size)
    os.makedirs(root + "/tmp/work", mode=0o700)
    if not request["userns"]:
        os.chown(root + "/tmp/work", NOBODY, NOBODY)
    mounted: list[str] = []
    for path in request["visible"]:
        if not os.path.lexists(path) or any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounted):
            continue
        target = root + path
        if os.path.islink(path) and os.path.dirname(path) == "/":  # /lib -> usr/lib on merged-/usr systems
            os.symlink(os.readlink(path), target)
            continue
        os.makedirs(target, mode=0o755, exist_ok=True)
        _bind(path, target)
        mounted.append(os.path.realpath(path) if os.path.islink(path) else path)
    for path in request["hidden"]:
        target = root + path
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0000,size=4k")
        elif os.path.exists(target):
            _bind("/dev/null", target)
    os.makedirs(root + "/dev", mode=0o755)
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for name in ("null", "zero", "full", "random", "urandom"):
        open(f"{root}/dev/{name}", "w").close()
        _bind(f"/dev/{name}", f"{root}/dev/{name}", readonly=False)
    os.symlink("/proc/self/fd", root + "/dev/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{root}/dev/{name}")
    os.makedirs(root + "/dev/shm")
    _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + size)
    os.makedirs(root + "/proc")
    try:
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    except OSError:
        pass  # some containers forbid a fresh /proc; the student then has none
    os.chdir(root)
    if SYS_PIVOT_ROOT is not None:
        _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
        _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    else:
        os.chroot(".")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _report(ctl: socket.socket, message: dict) -> None:
    try:
        ctl.send(json.dumps(message).encode())
    except OSError:
        pass


def _wait_status(status: int) -> dict:
    if os.WIFSIGNALED(status):
        return {"event": "ended", "signal": os.WTERMSIG(status)}
    return {"event": "ended", "exit": os.waitstatus_to_exitcode(status)}


def _init(request: dict, proto: int, out: int, ctl: socket.socket, status_fd: int, go: int) -> None:
    """Pid 1 of the submission's PID namespace: build the root, fork the worker, tell the keeper how it ended.

    When this process exits, the kernel kills every other process of the
    namespace: setsid'd daemons and double forks included. How the worker
    ended goes to the keeper (``status_fd``), which adds what the cgroup saw.
    """
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        _build_root(request)
        _wait_for_cgroups(go)  # before the worker exists: it starts inside them
    except BaseException as exc:
        _report(ctl, {"event": "setup-error", "message": f"{type(exc).__name__}: {exc}"})
        raise
    worker = os.fork()
    if worker == 0:
        os.close(status_fd)
        _run_child(_worker, request, proto, out, ctl.fileno(), "/tmp/work")
    os.close(proto)
    os.close(out)
    while True:
        pid, status = os.waitpid(-1, 0)  # reaps orphans too
        if pid == worker:
            os.write(status_fd, json.dumps(_wait_status(status)).encode())
            os._exit(0)


def _descendants(ancestor: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found: list[int] = []
    frontier = {ancestor}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found.extend(frontier)
    return found


def _kill_tree() -> None:
    """SIGKILL every descendant of this subreaper until none is left (new ones are reparented here)."""
    for _ in range(10_000):
        for pid in _descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        select.select([], [], [], 0.002)


def _run_child(function, *args) -> None:
    """Run a forked child's body; any failure before student code is a grader error, reported, never raised."""
    try:
        function(*args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # noqa: BLE001 - any failure of the setup, reported
        try:
            os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
        code = 70
    os._exit(code)


def _keeper(request: dict, proto: int, out: int, ctl_fd: int) -> None:
    """Watch one submission's process tree; kill all of it on request, on EOF, or when the worker ends."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    ctl = socket.socket(fileno=ctl_fd)
    isolated, workdir = request["isolated"], None
    cgroups: list[_Cgroup] = []
    if request["cgroups"]:
        try:
            cgroups = _make_cgroup(request["cgroups"], f"grader-{os.getpid()}", request["limits"]["memory_mb"] << 20,
                                   request["nproc"])
        except OSError:
            cgroups = []  # the zygote could make one a moment ago; the rlimits still hold
    try:
        if isolated and request["userns"]:
            request["nproc"] = _user_tasks(os.getuid()) + request["nproc"]  # RLIMIT_NPROC counts the uid's tasks
            _enter_user_namespace()
        if isolated:
            _check(_libc.unshare(NAMESPACES), "unshare")
        else:
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
            workdir = request["workdir"]
            request["nproc"] = _user_tasks(os.getuid()) + request["nproc"]
    except OSError as exc:
        _report(ctl, {"event": "setup-error", "message": str(exc)})
        _remove_cgroups(cgroups)
        os._exit(70)
    status_read, status_write = os.pipe()
    go_read, go_write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(status_read)
        os.close(go_write)
        for group in cgroups:
            os.close(group.folder)
            os.close(group.parent)
        if isolated:
            _run_child(_init, request, proto, out, ctl, status_write, go_read)
        os.close(status_write)
        try:
            _wait_for_cgroups(go_read)
        except OSError as exc:
            _report(ctl, {"event": "setup-error", "message": str(exc)})
            os._exit(70)
        _run_child(_worker, request, proto, out, ctl.fileno(), workdir)
    os.close(status_write)
    os.close(go_read)
    os.close(proto)
    os.close(out)
    try:
        _move_into_cgroups(cgroups, child, go_write)
    except OSError:
        pass  # the child reports the setup error and exits
    os.close(go_write)
    pidfd = os.pidfd_open(child)
    status = None
    while status is None:
        watched: list[socket.socket | int] = [ctl, pidfd]
        ready, _, _ = select.select(watched, [], [])
        if ctl in ready:
            try:
                message = ctl.recv(64)
            except OSError:
                message = b""
            if message in (b"", b"kill"):
                break
        if pidfd in ready:
            status = os.waitpid(child, 0)[1]
            event = _wait_status(status)
            if isolated:  # pid 1 said how the worker ended; if it could not, pid 1 itself was killed
                os.set_blocking(status_read, False)
                try:
                    event = json.loads(os.read(status_read, 4096) or b"null") or event
                except (OSError, ValueError):
                    pass
            else:
                _kill_tree()
            if _oom_killed(cgroups):
                event["oom"] = True
            _report(ctl, event)
    if status is None:
        os.kill(child, signal.SIGKILL)  # in a PID namespace, killing pid 1 kills them all
        os.waitpid(child, 0)
    if not isolated:
        _kill_tree()
    _remove_cgroups(cgroups)
    os._exit(0)


def _namespaces_work(user: bool) -> bool:
    """Can this process create the namespaces of root mode (``user``: inside a user namespace of its own)?

    No in containers without CAP_SYS_ADMIN, or where unprivileged user namespaces are off.
    """
    pid = os.fork()
    if pid == 0:
        try:
            if user:
                _enter_user_namespace()
            _check(_libc.unshare(NAMESPACES), "unshare")
        except OSError:
            os._exit(1)
        os._exit(0)
    return os.waitpid(pid, 0)[1] == 0


def zygote(control_fd: int) -> None:
    """Fork one keeper per request that arrives on the control socket, until it closes.

    A request is a JSON object plus three descriptors (protocol socket, output
    pipe, control socket of the keeper); it carries limits, paths and the
    environment, never the submission or any grading data: the submission's
    bytes go straight to the worker on its own socket, so no copy of one
    student's code stays in the zygote's memory for the next submission to find.
    """
    # No PR_SET_PDEATHSIG here: it fires when the parent's *thread* ends, and the grader may start the
    # zygote from a worker thread. The zygote ends when its control socket closes instead.
    global _seccomp_filter
    _seccomp_filter = _build_seccomp_filter()
    places = _cgroup_places()
    hello = {"event": "ready", "pid": os.getpid(), "path": sys.path,
             "namespaces": os.geteuid() == 0 and _namespaces_work(user=False),
             "user_namespaces": _namespaces_work(user=True),
             "seccomp": _seccomp_filter is not None,
             "cgroups": places if _cgroups_work(places) else {}}
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers are reaped automatically
    control = socket.socket(fileno=control_fd)
    control.send(json.dumps(hello).encode())
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 16, 8)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            control.close()
            _run_child(_keeper, request, *fds)
        for fd in fds:
            os.close(fd)
        del request, data
        control.send(json.dumps({"event": "spawned", "pid": pid}).encode())


if __name__ == "__main__":
    zygote(int(sys.argv[1]))
