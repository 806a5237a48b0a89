"""What both sandbox backends share: ``Sandbox`` (which picks the backend), ``reply_limit`` and the budget of
student text (portable: no POSIX-only module is imported here).

``Sandbox(path, limits)`` makes the backend ``backend.chosen()`` names: ``client.LinuxSandbox`` (the
zygote, namespaces, seccomp, cgroups) or ``portable.PortableSandbox`` (a fresh interpreter per child,
pipes and threads). Both send the same framing and value codec (protocol.py), make a call alike (``Sandbox._call``: start,
await the import, refuse what was sent unasked, encode the request), judge replies alike (``_decode``: replies.py
reads each into a ``CallResult``), bound student text alike (``_budget``) and word every status the same; they
differ in how a worker is started, watched, sent a request and ended (docs/security.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from grader.config import Limits
from grader.sandbox import backend
from grader.sandbox.files import read_regular_file
from grader.sandbox.protocol import (
    CRASHED,
    IMPORT_ERROR,
    LOST_SOCKET_EXIT,
    MEMORY,
    TIMEOUT,
    TOO_LARGE,
    MessageReader,
    ProtocolError,
    TooLarge,
    announced_array,
    encode_values,
)
from grader.sandbox.replies import _CALL, CallResult, decode

TEXT_BUDGET = 100_000  # characters of student-controlled text (output, messages) kept per submission
TEXT_FLOOR = 300  # characters of a message kept even when the budget is spent


_reply_bound: contextvars.ContextVar[int | None] = contextvars.ContextVar("reply_bound", default=None)


@contextlib.contextmanager
def reply_limit(nbytes: int | None) -> Iterator[None]:
    """Within this block, a call's reply may hold at most ``nbytes`` bytes of arrays (None: ``max_result_bytes``).

    The caller knows what its test can accept (a few times the expected output's
    bytes); a reply that announces more fails its call as "too-large" before any
    of it is buffered, and its worker is replaced. Never more than
    ``limits.max_result_bytes``. Callers that are not a Sandbox ignore it.
    """
    token = _reply_bound.set(nbytes)
    try:
        yield
    finally:
        _reply_bound.reset(token)




# ---------------------------------------------------------------- output and messages from the child


class _Output:
    """What the child printed during one call: head and tail, with a marker for what was dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.cap // 2:
            self.dropped += len(self.tail) - self.cap // 2
            del self.tail[: len(self.tail) - self.cap // 2]

    def take(self) -> str:
        head, tail, dropped = bytes(self.head), bytes(self.tail), self.dropped
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        text = head.decode("utf-8", "replace")
        if dropped:
            text += f"\n... [{dropped} bytes of output omitted] ...\n"
        return text + tail.decode("utf-8", "replace")


# ---------------------------------------------------------------- the sandbox, either backend


class Sandbox:
    """One submission, imported in a child process; use as a context manager.

    ``Sandbox(submission, limits, ...)`` makes the backend ``backend`` names, else the one
    ``grader.sandbox.backend.chosen`` picks (``GRADER_SANDBOX``, the system): ``client.LinuxSandbox`` or
    ``portable.PortableSandbox``; the arguments are the same for both (see each). ``call(name, *args,
    **kwargs)`` runs one function there and returns a ``CallResult`` of plain data; ``restart`` starts
    the next call in a new child; ``mode`` and ``warnings`` say how it isolated the submission.
    """

    filename: str
    limits: Limits
    _text_left: int
    MEMFDS: bool  # do a call's large arrays travel in memfds (protocol.encode_values), or all on the channel
    _child: Any  # the running child, as the backend holds it (client._Child, portable._Worker); None between children
    _loading: bool  # the child was started and its import not yet awaited
    _used_up: bool  # a wait given all the submission's time left ran out

    def __new__(cls, *args, backend: str | None = None, **kwargs):
        return object.__new__(_backend_class(backend) if cls is Sandbox else cls)

    def __enter__(self) -> Sandbox:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def mode(self) -> str:
        """``root``, ``user-namespaces``, ``unisolated`` or ``portable`` (``isolation_mode``)."""
        raise NotImplementedError

    @property
    def warnings(self) -> list[str]:
        """What the report should say about this sandbox; often none."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    def _read(self, submission: Path, source: bytes | None, extra) -> None:
        """The submission's bytes and its other modules, as both backends take them (see ``LinuxSandbox``)."""
        self.source = read_regular_file(Path(submission)) if source is None else source
        self.extra = [(Path(name).name, data) for name, data in extra]
        self.filename = Path(submission).name
        self._text_left = TEXT_BUDGET
        self._import_failure: CallResult | None = None
        if len(self.source) > self.limits.file_size_mb << 20:  # the child could not even write it to its folder
            self._import_failure = CallResult(IMPORT_ERROR, message=(
                f"importing {self.filename} failed: the file is {len(self.source) / (1 << 20):.1f} MiB, "
                f"more than the {self.limits.file_size_mb} MiB a submission may have (limits.file_size_mb)"))

    # ------------------------------------------------------------ calls

    def call(self, function: str, *args, **kwargs) -> CallResult:
        """Call ``function(*args, **kwargs)`` in the child; args are ndarrays or plain numbers."""
        started = time.monotonic()
        result = self._call(function, args, kwargs)
        result.seconds = time.monotonic() - started
        result.message = self._budget(result.message, TEXT_FLOOR)
        result.output = self._budget(result.output, 0)
        return result

    def _call(self, function: str, args: tuple, kwargs: dict) -> CallResult:
        """One call, made alike by both backends: a child started where none runs (unless the submission's time is
        spent) and its import awaited; a reply sent before it was asked for fails the call; then the request is
        encoded and the backend sends it and waits for its reply (``_send_call``)."""
        if self._import_failure is None and self._child is None:
            if self._spent():
                return self._out_of_time()
            self._launch()
        if self._loading and (failed := self._loaded()):
            return failed
        if self._import_failure is not None:
            return replace(self._import_failure, output="")
        child = self._child
        assert child is not None  # started above, or the import failure was returned
        if self._unsolicited(child):
            return self._failure(child, "the submission's process sent a reply before it was asked for one "
                                        "(a second reply to a call, or one in advance)")
        specs, blobs, fds = encode_values(list(args) + list(kwargs.values()), memfd=self.MEMFDS)
        request = {"op": "call", "function": function, "args": specs[: len(args)],
                   "kwargs": dict(zip(kwargs, specs[len(args):]))}
        return self._send_call(child, request, blobs, fds)

    def _spent(self) -> bool:
        """Is the submission's time limit used up? (A microsecond's tolerance: the CPU seconds are sums of floats.)"""
        return self._used_up or self._remaining() < 1e-6

    def _budget(self, text: str, floor: int) -> str:
        """Keep the report small: student-controlled text shares one budget per submission."""
        keep = max(self._text_left, floor)
        self._text_left = max(0, self._text_left - len(text))
        if len(text) <= keep:
            return text
        marker = f"\n... [{len(text) - keep} characters dropped: the submission's total output limit is spent] ...\n"
        return text[: keep // 2] + marker + (text[len(text) - keep // 2:] if keep > 1 else "")


    def _out_of_time(self) -> CallResult:
        return CallResult(TIMEOUT, message=f"the submission used up its {self.limits.submission_timeout_s:g} s time limit",
                          timed_out="submission")

    def _timed_out(self, child: Any, timeout: float, last: bool) -> CallResult:
        """The wait for a reply ran out of time (``last``: it had all the submission's time left): end the child."""
        self._stop_child()
        output = self._output_after_end(child)
        # Given all the time left (the Linux backend: on CPU time or up to the backstop): the submission's is spent.
        self._used_up = self._used_up or last
        if self._spent():
            return replace(self._out_of_time(), output=output)
        return CallResult(TIMEOUT, message=f"the call did not finish within {timeout:g} s", output=output,
                          timed_out="call")

    def _feed(self, child: Any, reader: MessageReader, data: bytes, expect: str
              ) -> tuple[dict, list[bytes]] | CallResult | None:
        """``data`` read from the child, fed to ``reader``: a whole reply (a tuple for ``_decode``), None while one
        is still coming, or what a reply that breaks the protocol or exceeds its bound ends as (the child ended)."""
        try:
            return reader.feed(data)
        except TooLarge as refused:
            if expect != _CALL:
                return self._failure(child, f"the submission's process broke the grading protocol ({refused})")
            return self._refuse(child, refused)
        except ProtocolError as exc:
            return self._failure(child, f"the submission's process broke the grading protocol ({exc})")

    def _refuse(self, child: Any, refused: TooLarge) -> CallResult:
        """A reply larger than its call accepts: "too-large", its arrays never read; the worker is replaced."""
        header = refused.header
        items = header.get("items") if isinstance(header.get("items"), list) else None
        array = announced_array(refused.head) if items is None and "array" in header else None
        what = f"an array of shape {array[0]} ({array[1]}): " if array else ""
        output = self._replace_refused(child)
        return CallResult(TOO_LARGE, message=f"returned {what}{refused.size:,} bytes, more than the "
                          f"{refused.bound:,} bytes this test accepts, not read",
                          output=output, shape=array[0] if array else None)

    @staticmethod
    def _ended_as(output: str, detail: str, killed: int | None, code: int | None, lost: str) -> CallResult:
        """A worker that died or misbehaved, as both backends word it: killed by signal ``killed``, exited with status
        ``code`` (``LOST_SOCKET_EXIT``: it lost its connection to the grader, ``lost`` says how), else ``detail``."""
        if killed is not None:
            name = signal.Signals(killed).name if killed in signal.valid_signals() else f"signal {killed}"
            text = f"the submission's process was killed by {name}"
            if name == "SIGKILL":
                text += " (from inside the submission, or for using too much memory)"
            return CallResult(CRASHED, message=text, output=output)
        if code == LOST_SOCKET_EXIT:
            return CallResult(CRASHED, message="the submission's process lost its connection to the grader"
                              f" ({lost})", output=output)
        if code is not None:
            return CallResult(CRASHED, message=f"the submission's process exited with status {code}"
                              " (sys.exit or os._exit in the submission)", output=output)
        return CallResult(CRASHED, message=detail or "the submission's process stopped answering", output=output)

    # ------------------------------------------------------------ what each backend does its own way

    def _remaining(self) -> float:
        """Seconds of the submission's time limit left."""
        raise NotImplementedError

    def _launch(self) -> None:
        """Start a child and send it the submission; ``_loaded`` waits for its import."""
        raise NotImplementedError

    def _loaded(self) -> CallResult | None:
        """Wait for the started child's import; the failure to return now, else None."""
        raise NotImplementedError

    def _stop_child(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _unsolicited(child: Any) -> bool:
        """Has the worker sent bytes while no call was outstanding?"""
        raise NotImplementedError

    def _send_call(self, child: Any, request: dict, blobs: list, fds: list[int]) -> CallResult:
        """Send a call's request and wait for its reply."""
        raise NotImplementedError

    def _failure(self, child: Any, detail: str) -> CallResult:
        """The child died or misbehaved: say how (``_ended_as``), then end it."""
        raise NotImplementedError

    @staticmethod
    def _output_after_end(child: Any) -> str:
        """What the ended child printed that was not yet taken."""
        raise NotImplementedError

    def _replace_refused(self, child: Any) -> str:
        """What the child printed before a refused reply; then the worker, still sending, is replaced."""
        raise NotImplementedError


    def _import_failed(self, result: CallResult, spent: bool) -> CallResult | None:
        """The import's answer was not "ready": the failure to return now (the submission's time ran out), else
        None, and every later call fails as this import did (no more children are started)."""
        if result.status == TIMEOUT and spent:
            return result  # the submission's time ran out while it was being imported again
        if result.status == TIMEOUT:  # a hang at import: no call can run, so it is the import that failed
            result.message = f"the import did not finish within {self.limits.call_timeout_s:g} s"
        if result.status != MEMORY:
            result.status = IMPORT_ERROR
        result.message = f"importing {self.filename} failed: {result.message}"
        self._import_failure = result
        return None

    def _decode(self, reply: dict, blobs: list[bytes], output: str, expect: str = _CALL) -> CallResult:
        """The child's reply, validated under this sandbox's limits (``replies.decode``); never raises."""
        return decode(reply, blobs, output, self.limits, expect)

    @property
    def _module(self) -> str:
        stem = Path(self.filename).stem
        return stem if stem.isidentifier() else "submission"



def _backend_class(name: str | None) -> type[Sandbox]:
    module, cls = backend.BACKENDS[backend.chosen() if name is None else backend.checked(name)]
    return getattr(importlib.import_module(f"grader.sandbox.{module}"), cls)
