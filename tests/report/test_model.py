"""grader.report.model's TypedDicts say what report.schema.json says: the same keys, required where it requires them.

mypy checks the report's keys where it is built (grader.report.native.build_report, grader.grade) against
these types; this test keeps the types and the schema from drifting apart, object by object.
"""

from __future__ import annotations

import json
import typing

import pytest

from grader.report import model
from grader.report.native import SCHEMA_PATH

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
PROPERTIES = SCHEMA["properties"]
TEST = PROPERTIES["tests"]["items"]
FUNCTION = PROPERTIES["functions"]["additionalProperties"]
STUDENT = PROPERTIES["student"]

# Each TypedDict beside the schema's object it stands for.
PAIRS = {
    "Report": SCHEMA,
    "SubmissionFiles": PROPERTIES["submission"],
    "HelperFile": PROPERTIES["submission"]["properties"]["helpers"]["items"],
    "Refused": PROPERTIES["refused"],
    "FunctionEntry": FUNCTION,
    "VerdictEntry": FUNCTION["properties"]["verdict"]["oneOf"][1],
    "FreeEntry": FUNCTION["properties"]["verdict"]["oneOf"][1]["properties"]["free"],
    "TestEntry": TEST,
    "DiagnosisEntry": TEST["properties"]["diagnosis"]["oneOf"][1],
    "NoteEntry": PROPERTIES["notes"]["items"],
    "Student": STUDENT,
    "Member": STUDENT["properties"]["group"]["items"],
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_each_typed_dict_has_the_schemas_keys_required_as_it_requires_them(name):
    typed, schema = getattr(model, name), PAIRS[name]
    assert set(typed.__annotations__) == set(schema["properties"])
    assert typed.__required_keys__ == set(schema.get("required", []))


def _choices(annotation: object) -> set[object]:
    return set(typing.get_args(annotation))


def test_the_closed_sets_of_values_are_the_schemas():
    hints = {name: typing.get_type_hints(getattr(model, name)) for name in ("Report", "TestEntry", "Refused")}
    assert _choices(hints["Report"]["status"]) == set(PROPERTIES["status"]["enum"])
    assert _choices(hints["TestEntry"]["status"]) == set(TEST["properties"]["status"]["enum"])
    assert _choices(hints["TestEntry"]["visibility"]) == set(TEST["properties"]["visibility"]["enum"])
    assert _choices(hints["Refused"]["status"]) == set(PROPERTIES["refused"]["properties"]["status"]["enum"])
    assert _choices(typing.get_type_hints(model.Student)["source"]) == set(STUDENT["properties"]["source"]["enum"])


def test_a_tests_kind_is_one_the_checks_find_or_null_for_a_pass():
    # The report's kinds are grader.judging.compare.Kind's values: a kind added there and not here fails.
    from grader.judging.compare import Kind

    kind = typing.get_type_hints(model.TestEntry)["kind"]
    assert set(typing.get_args(model.TestKind)) | {None} == set(TEST["properties"]["kind"]["enum"])
    assert kind == model.TestKind | None
    assert set(typing.get_args(model.TestKind)) == {str(k) for k in Kind} - {""}


def test_every_object_of_the_schema_has_its_typed_dict():
    # Objects with their own keys (the evidence's inner arrays are data, typed as a dict on purpose).
    def objects(node: object, path: str) -> list[str]:
        found = []
        if isinstance(node, dict):
            if "properties" in node and "evidence" not in path:
                found.append(path)
            for key, value in node.items():
                if key != "$defs":
                    found += objects(value, f"{path}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                found += objects(value, f"{path}/{index}")
        return found

    assert len(objects(SCHEMA, "")) == len(PAIRS)
