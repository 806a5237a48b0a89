"""The sandbox's two backends, for the tests of what both promise (grader.sandbox.backend).

A test that uses ``backend`` runs once per backend, with ``GRADER_SANDBOX`` set to it: every ``Sandbox``
and every grade inside it runs there. Tests of namespaces, cgroups, seccomp and uids do not use it: they
are the Linux backend's alone. Hostile kinds that need a cgroup (memory hogs, fork bombs) are never run
under the portable backend.
"""

from __future__ import annotations

import os

import pytest

BACKENDS = ("linux", "portable")


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch) -> str:
    monkeypatch.setenv("GRADER_SANDBOX", request.param)
    return request.param


def pytest_collection_modifyitems(config, items):
    """A test asked for both backends and for root-mode isolation (``isolated=True``) runs on the Linux one only:
    the portable backend refuses to isolate.

    ``GRADER_SANDBOX=portable`` set for the whole run is refused: the tests of the Linux backend would then grade
    the hostile corpus on the portable one, which isolates nothing, as this user (as root: ``kill(-1)`` ends
    every process of the machine, and pid 1's limits change for every process started after)."""
    if os.environ.get("GRADER_SANDBOX") == "portable" and any("tests/sandbox/" in item.nodeid for item in items):
        raise pytest.UsageError("tests/sandbox runs each backend itself (its `backend` fixture): unset GRADER_SANDBOX; "
                                "set for the whole run, the hostile corpus would be graded unisolated on this machine")
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        (dropped if params.get("backend") == "portable" and params.get("isolated") is True else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
