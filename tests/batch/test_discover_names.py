"""Who a file belongs to in Canvas's download, whatever the student's name holds.

Canvas names each file "<name>[_LATE]_<user id>_<submission id>_<original name>", <name> being the
sortable name lowercased with every non-word character stripped; Unicode letters stay ("müllerjörg").
"""

from __future__ import annotations

from grader.batch.discover import discover
from grader.lms.canvas import DOWNLOAD_NAME


def test_canvas_names_keep_the_ids_whatever_the_name_holds(tmp_path):
    names = ["müllerjörg_1031_9001_mha.py", "o'neilcathy_1032_9002_mha.py", "smith-jonesann_LATE_1033_9003_mha.py",
             "çelikayşe_1034_9004_my_mha_v2.py", "doejane_LATE_1035_9005_mha.py"]
    for name in names:
        (tmp_path / name).write_text("x = 1\n")
    students = {e.path.name: e.student for e in discover([tmp_path])}
    assert students == {
        "müllerjörg_1031_9001_mha.py": {"id": "1031", "name": "müllerjörg", "source": "canvas",
                                        "submission_id": "9001", "late": False},
        "o'neilcathy_1032_9002_mha.py": {"id": "1032", "name": "o'neilcathy", "source": "canvas",
                                         "submission_id": "9002", "late": False},
        "smith-jonesann_LATE_1033_9003_mha.py": {"id": "1033", "name": "smith-jonesann", "source": "canvas",
                                                 "submission_id": "9003", "late": True},
        "çelikayşe_1034_9004_my_mha_v2.py": {"id": "1034", "name": "çelikayşe", "source": "canvas",
                                             "submission_id": "9004", "late": False},
        "doejane_LATE_1035_9005_mha.py": {"id": "1035", "name": "doejane", "source": "canvas",
                                          "submission_id": "9005", "late": True},
    }


def test_the_original_file_name_keeps_its_underscores():
    match = DOWNLOAD_NAME.match("çelikayşe_LATE_1034_9004_my_mha_v2.py")
    assert match is not None
    assert (match["name"], match["late"], match["user_id"], match["submission_id"], match["file"]) == (
        "çelikayşe", "_LATE", "1034", "9004", "my_mha_v2.py")


def test_a_canvas_name_that_cannot_be_read_is_a_row_that_says_so(tmp_path):
    # Canvas never writes a space or a comma in the name part: the ids are there, the student is not certain.
    (tmp_path / "muller, jorg_1031_9001_mha.py").write_text("x = 1\n")
    [entry] = discover([tmp_path])
    assert entry.student == {"id": "muller, jorg_1031_9001_mha", "source": "file"}
    assert entry.skip == ("not graded: its name has Canvas's ids (name_userid_submissionid_file) but its name part "
                          "holds characters Canvas never writes, so the student cannot be read from it; rename it "
                          "<name>_<user id>_<submission id>_<file> to grade it as that student's")


def test_two_files_of_one_canvas_submission_are_one_submission(tmp_path):
    (tmp_path / "müllerjörg_1031_9001_mha.py").write_text("from attention_utils import f\n")
    (tmp_path / "müllerjörg_1031_9001_attention_utils.py").write_text("def f():\n    return 1\n")
    [entry] = discover([tmp_path], main_file="mha.py")
    assert entry.path.name == "müllerjörg_1031_9001_mha.py"
    assert [(name, path.name) for name, path in entry.helpers] == [
        ("attention_utils.py", "müllerjörg_1031_9001_attention_utils.py")]
