"""Grade a whole class: in parallel, resumable, one atomic report per submission, then the gradebook.

``run_batch`` discovers the submissions (grader.batch.discover), grades them in
long-lived worker processes (each imports the grader once and grades
many submissions; student code still runs only in the sandbox's child), writes
each report atomically as soon as it is graded, skips on ``resume`` the reports
whose file hash and grader configuration hash still match, and finally writes
``gradebook.csv``, ``summary.json`` (grader.batch.gradebook) and ``summary.html``
(grader.batch.summary_html) from the reports, so an interrupted-then-resumed batch ends with the
same gradebook as an uninterrupted one. Each output file has this one writer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec

from grader.batch.discover import IGNORED, BatchError, Entry, discover
from grader.batch.gradebook import build_summary, gradebook_csv, gradebook_rows
from grader.batch.summary_html import render_html
from grader.batch.workers import cores, default_jobs, worker_context
from grader.config import Config
from grader.exercise.assignment import describe
from grader.exercise.cases import prebuild
from grader.exercise.fingerprint import config_hash
from grader.exercise.teaching import load_feedback
from grader.report.formats import FORMATS, render
from grader.report.model import plain
from grader.report.native import build_report, printable, shown_name, to_json, write_atomic
from grader.sandbox import adopt, get_zygote, hand_over, keep_trees
from grader.version import __version__

if TYPE_CHECKING:
    from grader.sandbox import Handed, Started
from grader.submission.load import (
    Submission,
    SubmissionError,
    classify,
    load_submission,
    read_submission,
    refused_submission,
)

__all__ = ["BatchError", "BatchResult", "Entry", "Graded", "config_hash", "discover", "run_batch"]


@dataclass
class Graded:
    """What one worker sends back: the report and the worker's peak memory."""

    report: dict
    worker_rss_mb: float = 0.0  # peak resident memory of the worker process so far
    child_rss_mb: float = 0.0  # peak resident memory of the largest sandbox child it has ended


@dataclass
class BatchResult:
    outdir: Path
    entries: list[Entry]
    reports: dict[str, dict]  # key → report, for every graded entry
    summary: dict
    graded_now: int = 0  # graded in this run (not resumed)
    resumed: int = 0  # skipped because a matching report already existed
    peak_worker_rss_mb: float = 0.0
    peak_child_rss_mb: float = 0.0
    rows: list[dict] = field(default_factory=list)
    sources: dict[str, bytes] = field(default_factory=dict)  # sha256 → bytes of each file graded (keep_sources)
    # The formats an earlier run left in the folder and this run was not asked for: written again for every report
    formats_kept: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()  # an earlier run's class pages (STALE_PAGES) removed, for the caller to say so


# ---------------------------------------------------------------- hashing


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# A submission's file and its helpers, each read once (grader.submission.load), in the batch's main process.
Read = tuple[Submission, tuple[tuple[str, Submission], ...]]


def read_entry(entry: Entry) -> Read | None:
    """``entry``'s file (read_submission) and helpers (load_submission), read once: what the resume check
    hashes, the worker grades and ``grade similar`` compares. None when a path is unusable (a link, gone):
    the worker then tries it itself, and its report says why."""
    if entry.skip is not None:  # a student's submission with no file to grade: refused, score 0, unread
        return refused_submission(entry.path, entry.skip_status, entry.skip), ()
    known = {s.path: s for s in entry.files}  # read by discovery already (a several-file submission)
    try:
        main = known.get(entry.path)
        submission = read_submission(entry.path) if main is None else Submission(
            main.path, main.sha256, main.data, *classify(main.data, main.path))
        return submission, tuple((name, known.get(path) or load_submission(path)) for name, path in entry.helpers)
    except SubmissionError:
        return None


# ---------------------------------------------------------------- grading one entry (in a worker)

_GRADE_LOCK = threading.Lock()  # one grading at a time per process (a course suite's pytest.main is not thread-safe)


def grade_entry(path: str, student: dict, config: Config, fingerprint: str,
                helpers: tuple[tuple[str, str], ...] = (), read: Read | None = None) -> Graded:
    """Grade one submission in this (trusted) worker process and return its report.

    Runs in a long-lived worker: the first call imports the grader, later calls
    reuse it. Never raises for a submission's fault: a file the grader cannot take, or a
    grader failure, becomes a report with status "error". ``read``: the file and its helpers as the
    main process read them (``read_entry``); they are graded without being read again.
    """
    import resource

    from grader.grade import grade_submission
    from grader.submission.load import SubmissionError

    with _GRADE_LOCK:
        started = time.monotonic()
        try:
            prebuild(config, fingerprint)  # done already in a local worker; a Dask worker's first call builds here
            report = grade_submission(Path(path), config, [(n, Path(p)) for n, p in helpers], read=read).report
        except SubmissionError as exc:
            report = _error_report(path, config, str(exc), time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - a bug of ours: the batch goes on, the report says so
            report = _error_report(path, config, f"internal grader error: {type(exc).__name__}: {exc}",
                                   time.monotonic() - started, read[0].sha256 if read is not None else None)
    report["student"] = student
    report["grader_config_sha256"] = fingerprint
    return Graded(report, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def _error_report(path: str, config: Config, error: str, seconds: float, sha: str | None = None) -> dict:
    from datetime import UTC, datetime

    try:
        sha = sha or file_sha256(Path(path))
    except OSError:
        sha = hashlib.sha256(b"").hexdigest()
    return plain(build_report(assignment=config.assignment, submission={"path": str(path), "sha256": sha},
                        seed=config.seed, grader_version=__version__,
                        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                        duration_s=seconds, outcomes=[], score=None, visibility=config.visibility, error=error))


# ---------------------------------------------------------------- running the batch


P = ParamSpec("P")


def _faults_as_errors(run: Callable[P, BatchResult]) -> Callable[P, BatchResult]:
    """``run`` (run_batch) with a fault of the machine (a full disk, a read-only or vanished output folder) as one
    BatchError: what failed, what is kept, and that --resume finishes. Reports are written atomically, so each one
    already written is whole."""

    @functools.wraps(run)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> BatchResult:
        try:
            return run(*args, **kwargs)
        except OSError as exc:
            outdir = Path(kwargs["outdir"] if "outdir" in kwargs else args[1])  # type: ignore[arg-type]
            raise BatchError(fault_message(exc, outdir)) from None

    return wrapped


def fault_message(exc: OSError, outdir: Path) -> str:
    """One line for a batch stopped by ``exc``: what failed, the reports kept in ``outdir``, and --resume."""
    what = f"{exc.filename}: {exc.strerror or exc}" if exc.filename else f"{exc.strerror or exc}"
    try:
        kept = sum(1 for p in (outdir / "reports").iterdir() if p.suffix == ".json" and not p.name.startswith("."))
        reports = f"the {kept} report(s) in {outdir / 'reports'} are whole and kept"
    except OSError:
        reports = "every report written so far is whole and kept"
    return (f"{what}; the batch stopped there, and {reports}: once {outdir} can be written, run the same command "
            "with --resume to finish")


@_faults_as_errors
def run_batch(paths: list[Path], outdir: Path, config: Config, *, jobs: int | None = None, resume: bool = False,
              scheduler: str | None = None,
              progress: Callable[[Entry | None, Graded | None, int, int], None] | None = None,
              formats: tuple[str, ...] = (), allow_unisolated: bool = False,
              scheduler_timeout: float | None = None, keep_sources: bool = False) -> BatchResult:
    """Grade every submission under ``paths`` into ``outdir``; returns the reports and the summary.

    outdir gets reports/<key>.json (one per submission, written atomically as soon as it is
    graded), gradebook.csv, summary.json and summary.html. ``jobs``: worker processes (default: the number of
    cores). ``resume``: keep reports whose file sha256 and grader configuration hash match.
    ``scheduler``: address of a Dask distributed scheduler to grade on instead of local workers;
    ``scheduler_timeout``: seconds to wait for it to answer (default SCHEDULER_TIMEOUT_S).
    ``progress(entry, graded_or_None, done, total)`` is called once with entry None before grading
    starts, then after each entry (graded None: its report was kept by ``resume``).
    ``formats``: LMS formats also written per submission, as OUTDIR/<format>/<key>.json
    (``.txt`` for text, ``.html`` for html: the student's feedback page).
    A format whose folder an earlier run left in ``outdir`` (OUTDIR/html/, say) is written too, for every report,
    kept or graded now (``formats_kept``): no page there is older than its report. The pages of ``grade similar`` and
    ``grade diff`` (STALE_PAGES) compared the reports as they were: they are removed before grading starts
    (``removed``), for the caller to write again or to say so.
    ``allow_unisolated``: grade even where the sandbox cannot isolate submissions from each other.
    Each submission is read once, here (``read_entry``): its hash for ``resume``, and the bytes the
    worker grades. ``keep_sources``: keep those bytes in the result's ``sources`` (by sha256) for
    ``grade similar``, which then reads no submission again.
    Raises BatchError when the inputs or the output folder are unusable, or when the sandbox
    would run unisolated and ``allow_unisolated`` is not set; and at whatever point a file of ``outdir`` cannot
    be written (a full disk, a read-only folder: ``fault_message``), the reports written until then kept whole.
    """
    # Local workers' fork server starts (and imports the grader) while the inputs are read and hashed, then
    # the sandbox is asked how it isolates (its zygote, started first thing, has imported numpy by then).
    context = worker_context() if scheduler is None else None
    outdir = Path(outdir)
    clock = time.monotonic()
    _renderer(formats)  # an unknown format is refused before the folder is looked at
    formats_kept = tuple(f for f in FORMATS if f != "native" and f not in formats and (outdir / f).is_dir())
    formats = (*formats, *formats_kept)
    render = _renderer(formats)
    load_feedback(config.assignment_dir)  # the exercise's step pictures, for --format html and the like
    entries = discover(paths, exclude=outdir, main_file=config.main_file,
                       functions=describe(config).function_names)
    if all(e.skip_status == IGNORED for e in entries):
        ignored = f" (only files that are not .py or .ipynb: {', '.join(e.key for e in entries)})" if entries else ""
        raise BatchError("no submissions found under " + ", ".join(str(p) for p in paths) + ignored)
    fingerprint = config_hash(config)
    if scheduler is None and not allow_unisolated:
        _refuse_unisolated()
    reports_dir = outdir / "reports"
    try:
        reports_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BatchError(f"cannot create {reports_dir}: {exc.strerror}") from None
    result = BatchResult(outdir, entries, {}, {}, formats_kept=formats_kept, removed=_remove_stale_pages(outdir))
    reads: dict[str, Read | None] = {}

    def read(entry: Entry) -> Read | None:
        """The entry read once (``read_entry``), kept until its report is written (a retry reads nothing again)."""
        if entry.key not in reads:
            found = reads[entry.key] = read_entry(entry)
            if keep_sources and found is not None and entry.skip is None:  # no file, nothing to compare
                result.sources[found[0].sha256] = found[0].data
        return reads[entry.key]

    todo: list[Entry] = []
    # A student's submission with no file to grade is graded too, as refused (score 0, the reason its message).
    total = sum(1 for e in entries if e.skip_status != IGNORED or e.skip is None)
    done = 0
    if progress:
        progress(None, None, 0, total)  # the count is known before the first result
    for entry in entries:
        if entry.skip is not None and entry.skip_status == IGNORED:
            continue
        existing = _matching_report(reports_dir / f"{entry.key}.json", entry, fingerprint, read(entry)) if resume else None
        if existing is not None and not _kept_usable(outdir, entry, existing, config, fingerprint, formats, render):
            existing = None  # a kept report that cannot be read back whole is graded again
        if existing is not None:
            reads.pop(entry.key, None)
            result.reports[entry.key] = existing
            result.resumed += 1
            done += 1
            if progress:
                progress(entry, None, done, total)
        else:
            todo.append(entry)

    def finished(entry: Entry, graded: Graded) -> None:
        nonlocal done
        reads.pop(entry.key, None)
        write_atomic(reports_dir / f"{entry.key}.json", to_json(graded.report))
        try:
            _write_formats(outdir, entry.key, graded.report, formats, render)
        except OSError:  # the machine's fault (a full disk), not the student's: the batch stops (_faults_as_errors)
            raise
        except Exception as exc:  # noqa: BLE001 - one student's output the exporters cannot render: the rest go on
            print(f"grade batch: {printable(entry.key, newlines=False)}: a format could not be written "
                  f"({type(exc).__name__}: {printable(str(exc), newlines=False)[:200]}); its native report is written",
                  file=sys.stderr)
        result.reports[entry.key] = graded.report
        result.graded_now += 1
        result.peak_worker_rss_mb = max(result.peak_worker_rss_mb, graded.worker_rss_mb)
        result.peak_child_rss_mb = max(result.peak_child_rss_mb, graded.child_rss_mb)
        done += 1
        if progress:
            progress(entry, graded, done, total)

    if todo:
        if context is None:
            _run_dask(str(scheduler), todo, config, fingerprint, finished,
                      SCHEDULER_TIMEOUT_S if scheduler_timeout is None else scheduler_timeout, read)
        else:
            jobs = jobs or default_jobs()
            # The zygotes started first thing (grader.launch), this process's own included, go to the workers.
            handed = hand_over(min(jobs, len(todo)))
            try:
                _run_local(context, todo, config, fingerprint, jobs, finished, handed, read)
            finally:
                for zygote in handed:
                    zygote.reap()

    result.rows = gradebook_rows(entries, result.reports)
    write_atomic(outdir / "gradebook.csv", gradebook_csv(result.rows))
    result.summary = build_summary(entries, result.reports, config, fingerprint)
    # How this run went (not a function of the inputs: left out of the gradebook).
    result.summary["run"] = {"wall_s": round(time.monotonic() - clock, 3), "graded_now": result.graded_now,
                             "resumed": result.resumed, "jobs": None if scheduler else (jobs or default_jobs()),
                             "scheduler": scheduler, "peak_worker_rss_mb": round(result.peak_worker_rss_mb, 1),
                             "peak_child_rss_mb": round(result.peak_child_rss_mb, 1)}
    write_atomic(outdir / "summary.json", json.dumps(result.summary, indent=2, allow_nan=False) + "\n")
    write_atomic(outdir / "summary.html", render_html(result.summary, feedback="html" in formats))
    return result


# What `grade similar` and `grade diff` write into a batch's folder: they describe its reports as they were, so a
# later run into the folder removes them first (grade batch --similarity, --regrade-of then write them anew).
STALE_PAGES = ("similarity.json", "similarity.html", "diff.csv", "diff.html")


def _remove_stale_pages(outdir: Path) -> tuple[str, ...]:
    """Remove the STALE_PAGES an earlier run left in ``outdir``; returns the names removed."""
    removed = []
    for name in STALE_PAGES:
        if os.path.lexists(outdir / name):  # unlink says EROFS, not ENOENT, on a read-only folder
            (outdir / name).unlink()
            removed.append(name)
    return tuple(removed)


def _refuse_unisolated() -> None:
    """A class is never graded unisolated by accident: each submission could rewrite the others' files."""
    from grader.sandbox import PORTABLE_MODE, UNISOLATED, isolation_mode, shutdown

    mode = isolation_mode()  # asked of this process's zygote (Linux backend), which then goes to a worker
    if mode == PORTABLE_MODE:
        raise BatchError("refusing to grade a class in the portable sandbox (no namespaces: each submission could "
                         "read and rewrite the other students' files and reports); grade on Linux with the Linux "
                         "sandbox (unset GRADER_SANDBOX), or pass --allow-unisolated")
    if mode == UNISOLATED:
        shutdown()
        raise BatchError("refusing to grade a class unisolated: this kernel allows neither the namespaces of root "
                         "mode nor unprivileged user namespaces, so each submission could read and rewrite the other "
                         "students' files and reports; run where either is allowed, or pass --allow-unisolated")


def _renderer(formats: tuple[str, ...]) -> Callable[[dict, str], str] | None:
    """``render(report, format)`` of grader.report.formats when a format beside the native one is asked for;
    an unknown name is refused before anything is graded."""
    extra = [f for f in formats if f != "native"]
    unknown = [f for f in extra if f not in FORMATS]
    if unknown:
        raise BatchError(f"unknown format {unknown[0]!r}; expected one of {', '.join(FORMATS)}")
    return render if extra else None


def _write_formats(outdir: Path, key: str, report: dict, formats: tuple[str, ...],
                   render: Callable[[dict, str], str] | None) -> None:
    for fmt in formats:
        if fmt == "native" or render is None:
            continue
        folder = outdir / fmt
        folder.mkdir(exist_ok=True)
        write_atomic(folder / f"{key}.{FORMATS[fmt].suffix}", render(report, fmt))


def _kept_usable(outdir: Path, entry: Entry, report: dict, config: Config, fingerprint: str,
                 formats: tuple[str, ...], render: Callable[[dict, str], str] | None) -> bool:
    """Whether a kept report (``--resume``) reads back whole: as strict JSON, as a gradebook row, in the summary
    and in each format (written now). A kept report that is corrupt, or that breaks any of them, is graded again."""
    try:
        to_json(report)  # no NaN: summary.json is strict JSON
        gradebook_rows([entry], {entry.key: report})
        build_summary([entry], {entry.key: report}, config, fingerprint)
        _write_formats(outdir, entry.key, report, formats, render)
    except OSError:  # the page could not be written (a full disk): the machine's fault, not the report's
        raise
    except Exception:  # noqa: BLE001 - a kept file is data: whatever it breaks, it is regraded, never a crash
        return False
    return True



def _matching_report(path: Path, entry: Entry, fingerprint: str, read: Read | None = None) -> dict | None:
    """The report at ``path`` when it was made from this very file with this very grader configuration.

    ``read``: the entry as ``read_entry`` read it (its hashes are used; the files are not read again)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        if read is not None:
            sha, helpers = read[0].sha256, [s.sha256 for _, s in read[1]]
        else:
            sha, helpers = file_sha256(entry.path), [file_sha256(p) for _, p in entry.helpers]
        matches = (report["submission"]["sha256"] == sha
                   and [h["sha256"] for h in report["submission"].get("helpers", [])] == helpers
                   and report.get("grader_config_sha256") == fingerprint and report.get("student") == entry.student)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return report if matches else None


def _run_local(context, todo: list[Entry], config: Config, fingerprint: str, jobs: int,
               finished: Callable[[Entry, Graded], None], zygotes: Sequence[Handed] = (),
               read: Callable[[Entry], Read | None] = read_entry) -> None:
    """Grade in ``jobs`` long-lived worker processes (of ``context``, from ``grader.batch.workers.worker_context``), one submission
    at a time each.

    Each worker holds one submission at a time, so when a worker dies (a grader crash, or a
    submission that escapes the sandbox and kills it) exactly that submission is known: it is
    retried once on a fresh worker, then reported as failed to grade; the others are unaffected.
    ``read``: an entry's file and helpers, read once (``read_entry``), sent with it.
    """
    from collections import deque
    from multiprocessing.connection import wait

    queue = deque(todo)
    attempts: Counter[str] = Counter()
    allowed = cores()
    workers = [_Worker(context, config, fingerprint, allowed[i % len(allowed)] if allowed else None,
                       zygotes[i] if i < len(zygotes) else None)
               for i in range(min(jobs, len(queue)))]
    try:
        for worker in workers:
            worker.take(queue, read)
        while any(w.entry is not None for w in workers):
            busy = [w for w in workers if w.entry is not None]
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            ended: list[tuple[Entry, Graded]] = []
            for index, worker in enumerate(workers):
                if worker.entry is None:
                    continue
                entry = worker.entry
                graded = worker.result()
                if graded is not None:
                    worker.entry = None
                    worker.take(queue, read)  # every ready worker gets its next one before any report is written
                    ended.append((entry, graded))
                elif not worker.process.is_alive():
                    worker.entry = None
                    attempts[entry.key] += 1
                    if attempts[entry.key] < 2:
                        queue.appendleft(entry)
                    else:
                        ended.append((entry, Graded(_lost(entry, config, fingerprint))))
                    worker.close()
                    workers[index] = _Worker(context, config, fingerprint, worker.core) if queue else worker
                    workers[index].take(queue, read)
            for entry, graded in ended:
                finished(entry, graded)
        # Left only when every worker died before it could take its next submission (one that cannot even
        # start, say): each still gets a report that says so, never silence.
        while queue:
            entry = queue.popleft()
            finished(entry, Graded(_lost(entry, config, fingerprint, "no grading worker was left to grade this "
                                         "submission: each one died before taking it")))
    finally:
        # Normal end: each worker is told to stop. Interrupted (Ctrl-C): they are killed at once;
        # the reports already written stay, and --resume grades the rest.
        for worker in workers:
            worker.close(kill=worker.entry is not None)


class _Worker:
    """One long-lived grading process and the pipe it takes submissions from."""

    def __init__(self, context, config: Config, fingerprint: str, core: int | None,
                 zygote: Handed | None = None) -> None:
        self.conn, child = context.Pipe()
        self.core = core
        # Never written to: the worker reads EOF on its end the moment this process is gone.
        alive_child, self._alive = context.Pipe(duplex=False)
        self.process = context.Process(target=_serve, args=(child, config, fingerprint, alive_child, core, zygote),
                                       name="grade-worker")
        self.process.start()
        child.close()
        alive_child.close()
        if zygote is not None:
            zygote.sent()  # the worker holds it now; it ends with the worker
        self.entry: Entry | None = None

    def take(self, queue, read: Callable[[Entry], Read | None] = read_entry) -> None:
        if queue and self.process.is_alive():
            self.entry = queue.popleft()
            self.conn.send((str(self.entry.path), self.entry.student, _helpers(self.entry), read(self.entry)))

    def result(self) -> Graded | None:
        """The finished submission's result, or None while it runs or when the worker died."""
        try:
            return self.conn.recv() if self.conn.poll() else None
        except (EOFError, OSError):
            return None

    def close(self, kill: bool = False) -> None:
        if self.process.is_alive() and not kill:
            try:
                self.conn.send(None)
            except OSError:
                kill = True
        if kill and self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()
        self._alive.close()


def _serve(conn, config: Config, fingerprint: str, alive, core: int | None, zygote: Started | None) -> None:
    """A worker's loop: grade each (path, student) received until told to stop (None) or orphaned.

    zygote: one the main process started as it started (unpickled from a ``Handed``), ready by now.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C on the terminal is the main process's to handle
    _die_with_parent(alive)
    if zygote is not None:
        adopt(zygote)
    if core is not None:
        _pin(core)  # with its zygote: every sandbox process it forks then runs on that core too
    get_zygote()  # started now if none was handed over; the cases are built meanwhile
    prebuild(config, fingerprint)  # the main process's hash names the case store's entry: no second reading
    keep_trees()  # each submission takes the emptied process tree of the one before
    try:
        while True:
            try:
                task = conn.recv()
            except (EOFError, OSError):
                return
            if task is None:
                return
            conn.send(grade_entry(task[0], task[1], config, fingerprint, task[2], task[3]))
    finally:
        keep_trees(False)  # the last tree ends before this worker does


def _pin(core: int) -> None:
    """Run this worker, and the sandbox processes it starts from now on, on ``core`` alone.

    Each call of a student function is a round trip between this process and the
    submission's. On two cores each process wakes the other on the other core, an
    interrupt between cores that a virtual machine makes costly; on one core the
    kernel just switches. Pinned so, a call of a one-line student function (an integer formula) cost the machine
    0.1-0.12 ms of this process's CPU instead of 0.22-0.23 ms, and one worker grading
    a class one submission after another 20-30 % less CPU in all. The trees it starts run on this process's
    CPUs as they were before the pin (sandbox.hold_cpus): a student sees the same CPUs alone and in a batch.
    """
    from grader.sandbox import hold_cpus  # here: the module imports where the Linux backend's modules do not

    hold_cpus()
    try:
        os.sched_setaffinity(0, {core})
        if (zygote := get_zygote()) is not None:  # none under the portable sandbox
            os.sched_setaffinity(zygote.process.pid, {core})  # one handed over started elsewhere
    except OSError:  # the core went away (a container's CPU set changed): run wherever allowed
        pass


def _helpers(entry: Entry) -> tuple[tuple[str, str], ...]:
    return tuple((name, str(path)) for name, path in entry.helpers)


def _die_with_parent(alive) -> None:
    """End this worker at once when the batch's main process dies, even by SIGKILL, mid-grading.

    A thread waits on ``alive``, a pipe whose other end only the main process holds
    and never writes (it reads EOF when that process is gone), then kills this one; its sandboxes' keepers see
    their control sockets close and kill their submissions' process trees, and the
    zygote's control socket closes too. Without it a worker would notice only after
    finishing its submission (25-70 s).
    """
    import signal
    from multiprocessing.connection import wait

    def watch() -> None:
        wait([alive])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _lost(entry: Entry, config: Config, fingerprint: str,
          why: str = "the grading worker process died while grading this submission") -> dict:
    report = _error_report(str(entry.path), config, why, 0)
    return dict(report, student=entry.student, grader_config_sha256=fingerprint)


SCHEDULER_TIMEOUT_S = 5.0  # a scheduler that has not answered by then is reported unreachable


def _run_dask(address: str, todo: list[Entry], config: Config, fingerprint: str,
              finished: Callable[[Entry, Graded], None], timeout: float = SCHEDULER_TIMEOUT_S,
              read: Callable[[Entry], Read | None] = read_entry) -> None:
    """Grade on an existing Dask distributed cluster (needs the optional extra ``dask``: pip install '.[dask]').

    The workers must have this grader installed; each submission goes to them as read here (``read``),
    and its path names it in the report; reports come back to this process, which writes them. A scheduler that does not answer
    within ``timeout`` seconds is a BatchError of one line.
    """
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise BatchError("--scheduler needs Dask: pip install '.[dask]' in the grader's checkout") from None
    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as exc:  # ValueError: an address without a port, say
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BatchError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s: {why}") from None
    with client:
        futures = {client.submit(grade_entry, str(e.path), e.student, config, fingerprint, _helpers(e), read(e),
                                 pure=False): e for e in todo}
        for future in as_completed(futures):
            entry = futures[future]
            try:
                graded = future.result()
            except Exception as exc:  # noqa: BLE001 - the worker died or the task failed: the report says so
                graded = Graded(dict(_lost(entry, config, fingerprint),
                                     error=f"the Dask task failed: {type(exc).__name__}: {exc}"))
            finished(entry, graded)


def log_line(entry: Entry, graded: Graded | None, done: int, total: int) -> str:
    """One plain progress line, for logs (no terminal)."""
    who = shown_name(str(entry.student.get("name") or entry.student.get("id", "")))
    key = shown_name(entry.key)  # a file name may hold control characters too
    if graded is None:
        return f"[{done}/{total}] {key} ({who}): kept the existing report (--resume)"
    report = graded.report
    outcome = (f"{report['score']:g} / {report['max_score']:g}" if report["status"] == "graded"
               else f"error: {printable(str(report['error']), newlines=False)}")
    return f"[{done}/{total}] {key} ({who}): {outcome} in {report['duration_s']:.2f} s"


def is_terminal() -> bool:
    return sys.stderr.isatty()
