"""The sandbox's two backends, for the tests of what both promise (grader.sandbox.backend).

A test that uses ``backend`` runs once per backend, with ``GRADER_SANDBOX`` set to it: every ``Sandbox``
and every grade inside it runs there. Tests of namespaces, cgroups, seccomp and uids do not use it: they
are the Linux backend's alone. Hostile kinds that need a cgroup (memory hogs, fork bombs) are never run
under the portable backend.
"""

from __future__ import annotations

import pytest

BACKENDS = ("linux", "portable")


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch) -> str:
    monkeypatch.setenv("GRADER_SANDBOX", request.param)
    return request.param


def pytest_collection_modifyitems(config, items):
    """A test asked for both backends and for root-mode isolation (``isolated=True``) runs on the Linux one only:
    the portable backend refuses to isolate."""
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        (dropped if params.get("backend") == "portable" and params.get("isolated") is True else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
