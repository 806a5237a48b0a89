"""run_autograder's log (stdout, which Gradescope shows to the instructor only): its first line names the submission.

Gradescope's submission_metadata.json gives the submission's ``id`` and its ``users``
(each with ``name`` and ``email``); what it lacks is said in words, never as "?" or "None".
"""

from __future__ import annotations

import json

import pytest

from grader.lms.autograder import describe_submission, run

ADA = {"name": "Ada Lovelace", "email": "ada@example.edu"}


@pytest.mark.parametrize(("metadata", "line"), [
    ({"id": 123456, "users": [ADA]}, "submission 123456 by Ada Lovelace <ada@example.edu>"),
    ({"users": [ADA]}, "a submission with no id, by Ada Lovelace <ada@example.edu>"),
    ({"id": "", "users": [ADA, {"name": "Alan Turing"}]},
     "a submission with no id, by Ada Lovelace <ada@example.edu>, Alan Turing"),
    ({"id": 7, "users": [{"email": "x@example.edu"}]}, "submission 7 by a user with no name <x@example.edu>"),
    ({"id": 7}, "submission 7, with no users listed"),
    ({"id": 7, "users": "Ada"}, "submission 7, with no users listed"),
    ({}, "a submission with no id and no users listed"),
])
def test_the_log_names_the_submission_plainly(metadata, line):
    assert describe_submission(metadata) == line


def test_run_logs_a_submission_without_an_id_plainly(tmp_path, capsys):
    # No file in the submission: run() answers without grading, after its first log line.
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission_metadata.json").write_text(json.dumps({"users": [ADA]}))
    results = run(tmp_path)
    assert results["score"] == 0
    assert capsys.readouterr().out == "a submission with no id, by Ada Lovelace <ada@example.edu>\n"
