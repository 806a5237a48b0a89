"""grader.similarity.reading: one reading (the grader's), so every file graded is a file compared."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
from pathlib import Path

from grader.similarity import analyse, calibrate, fingerprint, load_works, starter_hashes
from grader.similarity.reading import MAX_READ, read_code

ROOT = Path(__file__).resolve().parents[2]
EINSUM = (ROOT / "reference" / "mha" / "styles" / "einsum.py").read_bytes()
STARTER = starter_hashes((ROOT / "assignments" / "mha" / "starter.py").read_text())


def notebook(source: str) -> bytes:
    """A notebook of two code cells and a markdown cell, split where the source's second function starts."""
    at = source.index("\ndef ", source.index("\ndef ") + 1)
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# My attention"},
             {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [], "source": source[:at]},
             {"cell_type": "code", "metadata": {}, "execution_count": 2, "outputs": [], "source": source[at:]}]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def test_a_bom_crlf_file_and_a_notebook_read_as_the_plain_file():
    plain, note = read_code(Path("a.py"), EINSUM)
    assert note == "" and plain == EINSUM.decode()
    bom, note = read_code(Path("b.py"), b"\xef\xbb\xbf" + EINSUM.replace(b"\n", b"\r\n"))
    assert note == "" and bom.replace("\r\n", "\n") == plain
    cells, note = read_code(Path("c.ipynb"), notebook(plain))
    assert note == "" and fingerprint(cells).hashes.keys() == fingerprint(plain).hashes.keys()
    assert fingerprint(bom).hashes == fingerprint(plain).hashes and len(fingerprint(plain).hashes) == 136


def test_a_pep_263_file_is_decoded_as_declared_and_refused_files_say_why():
    latin = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + EINSUM
    source, note = read_code(Path("l.py"), latin)
    assert note == "" and source.startswith("# -*- coding: latin-1 -*-\n# caf\u00e9\n")
    assert read_code(Path("e.py"), b"  \n") == (None, "e.py is empty: there is no code to grade: its code is not compared")
    assert read_code(Path("n.py"), b"x = 1\x00") == (
        None, ("n.py is not text: it holds binary content (a NUL byte at byte 6); submit the Python source file: its "
               "code is not compared"))
    assert read_code(Path("big.py"), b"#" * (MAX_READ + 1)) == (None, "over 16 MiB: its code is not compared")
    source, note = read_code(Path("bad.ipynb"), b"{not json")
    assert source is None and note.startswith("bad.ipynb is not a valid notebook: not valid JSON")


def test_the_class_compares_bom_crlf_and_notebook_copies_of_one_file(tmp_path):
    # The three copies grade as the plain file does; read as grading reads them, each is the same code.
    files = {"plain.py": EINSUM, "bom.py": b"\xef\xbb\xbf" + EINSUM, "crlf.py": EINSUM.replace(b"\n", b"\r\n"),
             "cells.ipynb": notebook(EINSUM.decode())}
    (tmp_path / "reports").mkdir()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        (tmp_path / "reports" / f"{name}.json").write_text(json.dumps(
            {"schema_version": 1, "status": "graded", "score": 100, "tests": [],
             "submission": {"path": str(tmp_path / name), "sha256": hashlib.sha256(data).hexdigest()}}))
    works = load_works(tmp_path)
    assert [w.note for w in works] == ["", "", "", ""]
    data = analyse(works, calibrate([], STARTER), STARTER)
    assert data["flagged"] == 6 and data["pairs_compared"] == 6
    assert {p["code_score"] for p in data["pairs"]} == {1.0}


def test_a_graded_file_become_a_named_pipe_or_link_is_listed_not_read(tmp_path):
    # A plain open of a FIFO waits for a writer forever; it is refused before any read, like a link. The read runs in a
    # thread so that a regression fails here after 20 s instead of hanging the suite.
    (tmp_path / "reports").mkdir()
    for name in ("pipe.py", "link.py", "plain.py"):
        (tmp_path / "reports" / f"{name}.json").write_text(json.dumps(
            {"schema_version": 1, "status": "graded", "score": 100, "tests": [],
             "submission": {"path": str(tmp_path / name), "sha256": hashlib.sha256(EINSUM).hexdigest()}}))
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "plain.py").write_bytes(EINSUM)
    (tmp_path / "link.py").symlink_to(tmp_path / "plain.py")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        works = pool.submit(load_works, tmp_path).result(timeout=20)
    assert [(w.key, w.note, w.source is None) for w in works] == [
        ("link.py", f"{tmp_path / 'link.py'} is not a regular file (a link, named pipe or device): its code is not compared",
         True),
        ("pipe.py", f"{tmp_path / 'pipe.py'} is not a regular file (a link, named pipe or device): its code is not compared",
         True),
        ("plain.py", "", False)]
