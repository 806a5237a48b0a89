"""A student's submission with no file to grade: refused unread but for a bounded hash (grader.submission.load)."""

from __future__ import annotations

import hashlib
import os

from grader.submission import load
from grader.submission.load import NOT_A_SUBMISSION, refused_submission

EMPTY = hashlib.sha256(b"").hexdigest()
WHY = "not a submission: .pdf extension, expected .py or .ipynb"


def test_the_hash_covers_the_file_up_to_its_bound(tmp_path, monkeypatch):
    essay = tmp_path / "essay.pdf"
    essay.write_bytes(b"%PDF-1.4 " * 1000)
    found = refused_submission(essay, NOT_A_SUBMISSION, WHY)
    assert (found.sha256, found.data, found.kind, found.problem, found.refused) == (
        hashlib.sha256(essay.read_bytes()).hexdigest(), b"", NOT_A_SUBMISSION, WHY, True)
    monkeypatch.setattr(load, "REFUSED_HASH_BYTES", 100)  # a larger file costs no more than the bound
    assert refused_submission(essay, NOT_A_SUBMISSION, WHY).sha256 == hashlib.sha256(essay.read_bytes()[:100]).hexdigest()


def test_links_fifos_and_folders_are_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the grading process may read this; the student may not learn its hash\n")
    (tmp_path / "link.pdf").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.pdf")  # opening it for reading would block without O_NONBLOCK
    (tmp_path / "folder").mkdir()
    for name in ("link.pdf", "fifo.pdf", "folder", "gone.pdf"):
        assert refused_submission(tmp_path / name, NOT_A_SUBMISSION, WHY).sha256 == EMPTY
