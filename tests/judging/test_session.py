"""The time budget reads which limit a timeout hit from the call's field, never from its message."""

from __future__ import annotations

from grader.judging.session import TimeBudget
from grader.sandbox import CallResult


class Replies:
    def __init__(self, *results):
        self.results = list(results)

    def call(self, function, *args, **kwargs):
        return self.results.pop(0)

    def restart(self):
        pass


def test_only_a_calls_own_timeout_spends_the_functions_budget():
    own = CallResult("timeout", message="the call did not finish within 2 s", timed_out="call")
    whole = CallResult("timeout", message="the submission used up its 60 s time limit", timed_out="submission")
    # A message worded like a call's timeout, without the field, is not one (only the sandbox sets it).
    worded = CallResult("timeout", message="the call did not finish within 2 s")
    budget = TimeBudget(Replies(whole, worded, own, own), timeouts=2)
    assert [budget.call("f").status for _ in range(2)] == ["timeout", "timeout"]
    assert budget.timed_out == {}
    budget.call("f")
    assert budget.timed_out == {"f": 1}
    budget.call("f")
    assert budget.timed_out == {"f": 2}
    assert budget.call("f").message == ("not run: f() already timed out in 2 earlier calls "
                                        "(limits.timeouts_per_function = 2)")
