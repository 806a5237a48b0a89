"""The notebook check in a real Jupyter kernel (nbclient runs the cells in ipykernel), as a student's notebook runs it.

Each notebook defines the exercise's functions across cells and calls the check; the tests read what
the kernel displayed (the HTML Jupyter renders, the text plain Python prints) and assert the score,
the named misconception, where each definition was taken from, and that a hanging function neither
freezes the kernel nor the check.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, SUBMISSIONS, generous_config
from nbclient import NotebookClient

# A test that starts a kernel (or a script that checks itself) runs student code in the sandbox and takes seconds:
# marked sandbox and slow.

SETUP = "%matplotlib inline\nimport numpy as np\n!python -c \"print('installed')\""
HELPER = "NEG = -np.inf\n\ndef causal_mask(T):\n    return np.triu(np.full((T, T), NEG), 1)\n"
_MHA_HEAD = """def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = X.ndim == 2
    if squeeze:
        X = X[np.newaxis]
    B, T, d = X.shape
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
"""
_MHA_TAIL = """    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)
    if causal:
        logits = logits + causal_mask(T)
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)
"""
RIGHT_MHA = _MHA_HEAD + """    q = (X @ W_Q).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    k = (X @ W_K).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    v = (X @ W_V).reshape(B, T, h, d_v).transpose(0, 2, 1, 3)
""" + _MHA_TAIL + """    out = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, h * d_v) @ W_O
    return out[0] if squeeze else out
"""
# The classic bug (tests/submissions/wrong_reshape.py): heads split by reshaping (B, T, h·d_k) straight to (B, h, T, d_k)
WRONG_MHA = _MHA_HEAD + """    q, k, v = (X @ W_Q).reshape(B, h, T, d_k), (X @ W_K).reshape(B, h, T, d_k), (X @ W_V).reshape(B, h, T, d_v)
""" + _MHA_TAIL + """    out = (p @ v).reshape(B, T, h * d_v) @ W_O
    return out[0] if squeeze else out
"""
TRAINING = """import sys
if "ipykernel" not in sys.modules:  # run again anywhere but in this kernel, it ends the run at once
    raise SystemExit("the training cell ran again")
losses = []
for epoch in range(3):
    losses.append(1.0 / (epoch + 1))
"""
COUNT = """%%time
def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    return 4 * d * h * d_k + ((3 * h * d_k + d) if bias else 0)
"""
# Two cells that raise part way, as a download that failed: what stands below the error never ran in the kernel.
# The first raised before the kernel's last exception (only the kernel's namespace tells its count's definition
# did not run), the second is the kernel's last exception (its line is known).
FAILED_EARLIER = """raise RuntimeError("the download failed")
def attention_param_count(d, h, d_k=None, bias=False):
    return 0
"""
FAILED_LAST = """weights = np.load("weights-not-downloaded.npy")
def head_entropy(A):
    return 0
"""
ENTROPY = """def head_entropy(A):
    !python -c "print('a shell line inside a function')"
    A = np.asarray(A, dtype=float)
    safe = np.where(A > 0, A, 1.0)
    return -(A * np.log(safe)).sum(-1).mean(-1)
"""


def run_notebook(sources: list[str], cwd: Path, order: list[int] | None = None,
                 interrupt: tuple[int, int] | None = None, raising: tuple[int, ...] = ()) -> list:
    """Run the cells in a fresh ipykernel started in ``cwd``, in ``order`` (default: top to bottom); the cells
    with their outputs. A cell that raises fails the test, but for ``interrupt``: (cell, seconds), a cell the
    kernel is interrupted in after that many seconds (Jupyter's stop button), as a student would, and the
    cells ``raising``, which may raise part way."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    stopped = notebook.cells[interrupt[0]] if interrupt else None
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}},
                            timeout_func=lambda cell: interrupt[1] if interrupt and cell is stopped else 600,
                            interrupt_on_timeout=True, allow_errors=interrupt is not None or bool(raising))
    with client.setup_kernel():
        for index in order if order is not None else range(len(sources)):
            client.execute_cell(notebook.cells[index], index)
    for index, cell in enumerate(notebook.cells):
        assert cell is stopped or index in raising or not [o for o in cell.outputs if o.output_type == "error"], \
            cell.outputs
    return notebook.cells


def shown(cell) -> dict:
    """What Jupyter displays as the cell's value: its execute_result's data (text/html, text/plain)."""
    results = [o for o in cell.outputs if o.output_type == "execute_result"]
    assert len(results) == 1, cell.outputs
    return results[0].data


def printed(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def page_in(fragment: str) -> str:
    """The feedback page inside the displayed HTML: the document of its iframe's srcdoc."""
    frames = re.findall(r"<iframe sandbox='' title='feedback page' srcdoc=\"([^\"]*)\"", fragment)
    assert len(frames) == 1, fragment[:500]
    return html.unescape(frames[0])


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_notebook_is_graded_as_the_kernel_defines_it_and_shown_inline(tmp_path):
    config = generous_config(tmp_path)
    check = f"from grader import check\nresult = check(config={str(config)!r}, course={str(ROOT)!r})\nresult"
    cells = run_notebook([SETUP, HELPER, WRONG_MHA, RIGHT_MHA, TRAINING, COUNT, ENTROPY, FAILED_EARLIER, FAILED_LAST,
                          check], tmp_path,
                         # the notebook shows the wrong function above the right one, but runs it after: In [4]
                         order=[0, 1, 3, 2, 4, 5, 6, 7, 8, 9], raising=(7, 8))
    data = shown(cells[9])
    page = page_in(data["text/html"])
    # the same grade as `grade tests/submissions/wrong_reshape.py`: the training cell was not run again
    assert "<p class='total'>39.1667 / 100 points</p>" in page
    assert "<code>wrong-split-order + wrong-merge-order</code> · textbook §4.5 · 23 tests" in page
    assert ("<section class='cells' id='cells'><h2>Where the graded definitions come from</h2><table>"
            "<tr><td><code>multi_head_attention</code></td><td>In [4], line 1</td></tr>"
            "<tr><td><code>attention_param_count</code></td><td>In [6], line 2</td></tr>"
            "<tr><td><code>head_entropy</code></td><td>In [7], line 1</td></tr>"
            "<tr><td><code>np (import)</code></td><td>In [1], line 2</td></tr>"
            "<tr><td><code>NEG (constant)</code></td><td>In [2], line 1</td></tr>"
            "<tr><td><code>causal_mask (function)</code></td><td>In [2], line 3</td></tr></table>"
            "<p class='warning'>Not taken: In [8] stopped at line 2 (an exception): nothing of that cell from that "
            "line on was taken (it never ran)</p>"
            "<p class='warning'>Not taken: In [9] stopped at line 1 (an exception): nothing of that cell from that "
            "line on was taken (it never ran)</p>"
            "<p class='warning'>Not taken: IPython magics and shell lines inside the definitions were dropped "
            "(In [7], line 2)</p></section>") in page
    # below the section on cells, the page is the one `grade FILE --format html` writes, pictures included
    subprocess.run([sys.executable, "-m", "grader", str(SUBMISSIONS / "wrong_reshape.py"), "--config", str(config),
                    "--course", str(ROOT), "--format", "html", "-o", str(tmp_path / "feedback.html")], cwd=tmp_path,
                   check=True, capture_output=True)
    graded = (tmp_path / "feedback.html").read_text(encoding="utf-8")
    first = "<section class='function'"
    assert page[page.index(first):] == graded[graded.index(first):]
    assert page.count("<img ") == 2  # the head split's and the head merge's maps
    assert data["text/html"].startswith("<div style='font-family: system-ui, sans-serif'><div style='margin: .3em 0'>"
                                        "<b>mha: 39.1667 / 100</b> · graded from In [1], In [2], In [4], In [6], "
                                        "In [7] · ")
    text = data["text/plain"]
    # the report names the cells graded (the kernel does not know the notebook's file here), not the check's own file
    assert "<title>mha: feedback on notebook cells In [1], In [2], In [4], In [6], In [7]</title>" in page
    assert text.startswith("mha: notebook cells In [1], In [2], In [4], In [6], In [7] scored 39.1667 / 100\n"
                           "  multi_head_attention     9.1667 / 70     4 of 27 tests passed\n")
    assert "    ⇒ wrong-split-order + wrong-merge-order (§4.5, 23 tests): " in text
    assert text.endswith("taken from:\n"
                         "  multi_head_attention         In [4], line 1\n"
                         "  attention_param_count        In [6], line 2\n"
                         "  head_entropy                 In [7], line 1\n"
                         "  np (import)                  In [1], line 2\n"
                         "  NEG (constant)               In [2], line 1\n"
                         "  causal_mask (function)       In [2], line 3\n"
                         "  not taken: In [8] stopped at line 2 (an exception): nothing of that cell from that line on "
                         "was taken (it never ran)\n"
                         "  not taken: In [9] stopped at line 1 (an exception): nothing of that cell from that line on "
                         "was taken (it never ran)\n"
                         "  not taken: IPython magics and shell lines inside the definitions were dropped "
                         "(In [7], line 2)")


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_cell_that_raised_then_ran_again_once_fixed_counts_whole(tmp_path):
    # In [2] raises at its line 1 (NameError); the student binds the name and runs the same cell again: In [4] ran
    # to its end. The kernel's last exception is In [2]'s, and ipykernel compiled both under one name
    entropy = "scale = missing_name\n" + ENTROPY.replace("    !python", "    # !python")
    check = (f"import json\nfrom grader import check\nresult = check(config={str(generous_config(tmp_path))!r}, "
             f"course={str(ROOT)!r})\nprint(json.dumps([result.origins, result.untaken, "
             "result.report['submission']['path']]))")
    cells = run_notebook(["import numpy as np", entropy, "missing_name = 2.0", check], tmp_path,
                         order=[0, 1, 2, 1, 3], raising=(1,))
    origins, untaken, path = json.loads(printed(cells[3]))
    assert origins == [["multi_head_attention", "not defined in any cell the kernel ran"],
                       ["attention_param_count", "not defined in any cell the kernel ran"],
                       ["head_entropy", "In [4], line 2"], ["np (import)", "In [1], line 1"]]
    assert untaken == []
    assert path == "notebook cells In [1], In [4]"


HANG = """def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    while True:
        pass
"""
RAISES = """def attention_param_count(d, h, d_k=None, bias=False):
    raise ValueError("not written yet")
"""


def short_limits(folder: Path) -> Path:
    """The course's mha configuration with a 1-second call limit, after which a function's other tests are not run."""
    folder.mkdir()
    text = (ROOT / "assignments/mha/grader.toml").read_text(encoding="utf-8")
    for key, value in {"call_timeout_s": 1, "timeouts_per_function": 1, "submission_timeout_s": 60}.items():
        text, found = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
        if not found:
            text = text.replace("[limits]\n", f"[limits]\n{key} = {value}\n", 1)
    (folder / "grader.toml").write_text(text, encoding="utf-8")
    return folder / "grader.toml"


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_hanging_function_ends_as_a_timeout_and_the_kernel_lives_on(tmp_path):
    short = short_limits(tmp_path / "short")
    (tmp_path / "generous").mkdir()
    generous = generous_config(tmp_path / "generous")
    timed = ("import json, time\nfrom grader import check, CheckError\nstarted = time.monotonic()\n"
             "result = check(config={config!r}, course={course!r})\n"
             "print(json.dumps({{'seconds': time.monotonic() - started, 'score': result.score,"
             " 'statuses': sorted({{t['status'] for t in result.report['tests'] if t['function'] == "
             "'multi_head_attention'}}), 'messages': [t['message'] for t in result.report['tests'] if t['function']"
             " == 'attention_param_count'][:1]}}))")
    # the same hang, stopped by the kernel's own wait (timeout_s) long before the sandbox's generous limits would
    backstop = ("started = time.monotonic()\ntry:\n    check(config={config!r}, course={course!r}, timeout_s=3)\n"
                "except CheckError as exc:\n    print(json.dumps({{'seconds': time.monotonic() - started, "
                "'error': str(exc)}}))")
    # the same hang again, and the student stops the kernel (Jupyter's stop button) after 8 s: so is the grading
    stop = f"check(config={str(generous)!r}, course={str(ROOT)!r})"
    children = """import os
from pathlib import Path

def parent(process):
    try:
        return (process / "stat").read_text().rsplit(")", 1)[-1].split()[1]
    except (OSError, IndexError):  # it ended meanwhile
        return None

print([p.name for p in Path("/proc").iterdir() if p.name.isdigit() and parent(p) == str(os.getpid())])
"""
    cells = run_notebook(["import numpy as np", HANG, RAISES, ENTROPY,
                          timed.format(config=str(short), course=str(ROOT)),
                          backstop.format(config=str(generous), course=str(ROOT)), stop, children,
                          "print('alive', 1 + 1)"], tmp_path, interrupt=(6, 8))
    graded = json.loads(printed(cells[4]))
    # one call runs out of its second of CPU (the wall clock stops it at 4 s), the function's other tests are not
    # run, and the rest grades in seconds: far under a minute even on a busy machine, where a hang is forever
    assert graded["seconds"] < 60
    assert graded["statuses"] == ["timeout"]
    assert graded["score"] == 15  # head_entropy's 15 points; the count raises, the attention hangs
    assert graded["messages"] == ["attention_param_count() raised ValueError at In [3], line 2: not written yet"]
    stopped = json.loads(printed(cells[5]))
    assert stopped["error"] == "the check stopped after 3 s without a result (timeout_s)"
    assert stopped["seconds"] < 3 + 5 + 10  # its limit, the grace given to stop, and room for a busy machine
    assert [o.ename for o in cells[6].outputs if o.output_type == "error"] == ["KeyboardInterrupt"]
    assert printed(cells[7]) == "[]\n"  # the grading process is gone with it
    assert printed(cells[8]) == "alive 2\n"


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_student_kit_grades_a_notebook_with_the_magic_as_grade_grades_its_file(tmp_path):
    from grader.course.student_kit import build_kit

    kit = build_kit(ROOT / "grader.toml", tmp_path / "mha-kit").folder
    # the kit's README says how to check in a notebook, as docs/students.md does
    readme = (kit / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Checking your work in a notebook\n"):]
    assert "```\n%load_ext grader\n%grade\n```\n" in section
    assert "(or `from grader import check`, then `check()`). It grades\n" \
           "`multi_head_attention`, `attention_param_count`, `head_entropy`\nas your kernel last defined them" in section
    assert section.endswith("```\n!unzip -qo mha-kit.zip && pip install -q ./mha-kit\n%cd mha-kit\n```\n")
    source = (SUBMISSIONS / "wrong_reshape.py").read_text(encoding="utf-8")
    cells = run_notebook(["%load_ext grader", source, "%grade"], kit)
    page = page_in(shown(cells[2])["text/html"])
    (kit / "wrong_reshape.py").write_text(source, encoding="utf-8")
    graded = subprocess.run([sys.executable, "-m", "grader", "wrong_reshape.py", "-o", "report.json"], cwd=kit,
                            capture_output=True, text=True, check=True)
    report = json.loads((kit / "report.json").read_text(encoding="utf-8"))
    assert graded.stdout.startswith(f"mha: wrong_reshape.py scored {report['score']:g} / 100\n")
    assert f"<p class='total'>{report['score']:g} / 100 points</p>" in page
    assert "<p class='total'>43.3333 / 100 points</p>" in page
    assert "<code>wrong-split-order + wrong-merge-order</code> · textbook §4.5 · 21 tests" in page
    # the kit's cases are public: its messages say the expected value
    assert "largest difference 2.77 at index (3, 1, 3): got 0.765457, expected -2.0055" in page
    assert "<tr><td><code>multi_head_attention</code></td><td>In [2], line 6</td></tr>" in page


@pytest.mark.sandbox
@pytest.mark.slow
def test_plain_python_prints_the_text_summary(tmp_path):
    script = tmp_path / "attention.py"
    config = generous_config(tmp_path)
    script.write_text((SUBMISSIONS / "wrong_reshape.py").read_text(encoding="utf-8")
                      + f"\nfrom grader import check\nprint(check(config={str(config)!r}, course={str(ROOT)!r}))\n",
                      encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.startswith("mha: attention.py scored 39.1667 / 100\n")
    assert done.stdout.endswith("taken from:\n"
                                "  multi_head_attention         line 6\n"
                                "  attention_param_count        line 32\n"
                                "  head_entropy                 line 40\n"
                                "  np (import)                  line 3\n")


def test_importing_grader_loads_neither_ipython_numpy_nor_the_grading_machinery():
    code = ("import grader, sys; print(sorted(m for m in sys.modules if "
            "m.split('.')[0] in ('grader', 'IPython', 'numpy', 'matplotlib', 'click')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded == "['grader', 'grader.version']\n"  # the version, a leaf module of one line


@pytest.mark.parametrize(("line", "said"), [
    ("--config", "%grade: --config needs a value\n"),
    ("mha sdpa", "usage: %grade [ASSIGNMENT] [--config PATH] [--course DIR] [--timeout SECONDS]\n"),
    ("--seed 3", "usage: %grade [ASSIGNMENT] [--config PATH] [--course DIR] [--timeout SECONDS]\n"),
])
def test_the_magic_refuses_what_it_cannot_read_in_one_line(line, said, capsys):
    from grader.notebook.kernel import grade_magic

    assert grade_magic(line) is None
    assert capsys.readouterr().err == said

