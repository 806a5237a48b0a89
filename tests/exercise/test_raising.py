"""A raise as evidence (grader.exercise.raising): what a call that raised is matched by, read from fields.

The sandbox's client fills ``CallResult.exception`` and ``CallResult.misfit`` from the child's reply
(grader.sandbox.misfit_of parses numpy's own message, bounded, integers only); a trusted run of the
reference with switches on gives the same key from its exception object.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.config import Limits
from grader.exercise.raising import raise_key, raise_matches, raised, raised_by
from grader.sandbox import CallResult, Misfit, Sandbox, misfit_of


def _raise(make):
    with pytest.raises(Exception) as caught:
        make()
    return caught.value


def test_numpys_misfits_are_read_as_plain_numbers():
    reshape = _raise(lambda: np.ones(24).reshape(2, 3, 5))
    assert misfit_of("ValueError", str(reshape)) == Misfit("reshape", (24, 2, 3, 5))
    matmul = _raise(lambda: np.ones((2, 3)) @ np.ones((4, 5)))
    assert misfit_of("ValueError", str(matmul)) == Misfit("matmul", (4, 3))
    dot = _raise(lambda: np.dot(np.ones((2, 3)), np.ones((4, 5))))
    assert misfit_of("ValueError", str(dot)) == Misfit("matmul", (3, 4))
    added = _raise(lambda: np.ones((2, 3)) + np.ones((4, 5)))
    assert misfit_of("ValueError", str(added)) == Misfit("broadcast", (2, 3, 4, 5), ((2, 3), (4, 5)))
    assert misfit_of("ValueError", "cannot reshape array of size 36 into shape (1,newaxis,2,4)") == Misfit(
        "reshape", (36, 1, -1, 2, 4))
    split = _raise(lambda: np.split(np.ones(5), 2))
    assert misfit_of("ValueError", str(split)) == Misfit("split")

    def unpack(parts):
        _q, _k, _v = parts
    assert misfit_of("ValueError", str(_raise(lambda: unpack([1, 2, 3, 4])))) == Misfit("unpack", (3,))
    assert misfit_of("ValueError", str(_raise(lambda: unpack([1, 2])))) == Misfit("unpack", (3, 2))
    # Another class, another message, or a message that only looks like numpy's far into it: nothing.
    assert misfit_of("TypeError", str(reshape)) is None
    assert misfit_of("ValueError", "embed_dim must be divisible by num_heads") is None
    assert misfit_of("ValueError", "x" * 10_000 + str(reshape)) is None
    assert misfit_of("ValueError", "cannot reshape array of size 9" + "9" * 100 + " into shape (1)") is None


def test_the_key_of_a_raise_names_its_class_and_numpy_operation():
    assert raised(_raise(lambda: np.ones(24).reshape(2, 3, 5))) == "raises ValueError in reshape"
    assert raised(_raise(lambda: np.ones((2, 3)) + np.ones((4, 5)))) == "raises ValueError in broadcast"
    assert raised(KeyError("x")) == "raises KeyError"
    student = CallResult("raised", message="raised ValueError at line 3: whatever the student's text says",
                         exception="ValueError", classes=("ValueError", "Exception", "BaseException"),
                         misfit=Misfit("matmul", (4, 3)))
    assert raised_by(student) == "raises ValueError in matmul"
    # The key is the class of Python's the raise is: a subclass's is its base's, a class merely named so has none.
    shape_error = CallResult("raised", exception="ShapeError", classes=("ValueError", "Exception", "BaseException"))
    assert raised_by(shape_error) == "raises ValueError"
    assert raised_by(CallResult("raised", exception="ValueError", classes=("Exception", "BaseException"))) == \
        "raises Exception"
    assert raised(np.exceptions.AxisError("axis 3 is out of bounds")) == "raises ValueError"
    assert raised_by(CallResult("raised", message="raised ValueError: forged")) == "raises an unnamed exception"
    assert raise_key("IndexError") == "raises IndexError"


def test_a_raise_matches_by_class_and_operation_and_an_assert_matches_any_raise():
    reshape, broadcast = "raises ValueError in reshape", "raises ValueError in broadcast"
    assert raise_matches(reshape, reshape)
    # A reshape that cannot fit is not an addition or a product that cannot, nor a fused Q, K, V cut into parts
    # that do not come out equal (which raises where d_v ≠ d_k too); the cut is one kind, split or unpacked.
    assert not raise_matches(broadcast, reshape) and not raise_matches("raises ValueError in matmul", reshape)
    assert not raise_matches("raises ValueError in split", reshape)
    assert not raise_matches("raises ValueError in unpack", reshape)
    assert raise_matches("raises ValueError in unpack", "raises ValueError in split")
    assert raise_matches("raises ValueError", reshape)  # the student's own check, before the reshape
    assert not raise_matches("raises TypeError", reshape)
    # An assert copied from a starter fires before the step that raises: it matches any raise there.
    assert raise_matches("raises AssertionError", reshape) and raise_matches("raises AssertionError", "raises KeyError")
    assert raise_matches("raises ZeroDivisionError", reshape)  # a scale of d // h = 0 where h > d, before the reshape
    assert not raise_matches("raises AssertionError", "ok")  # only a raise
    assert not raise_matches(reshape, "raises AssertionError")
    # Loose (a pattern the probes confirm, grader.judging.diagnose.Search): the class alone, whatever the operation.
    assert raise_matches("raises ValueError in matmul", reshape, loose=True)
    assert raise_matches("raises ValueError in split", reshape, loose=True)
    assert not raise_matches("raises TypeError in matmul", reshape, loose=True)
    assert not raise_matches("raises TypeError", "raises ValueError", loose=True)


def test_the_client_fills_the_fields_from_a_validated_reply():
    sandbox = object.__new__(Sandbox)  # _decode reads nothing but the limits: no child is needed
    sandbox.limits = Limits()
    reply = {"status": "raised", "exception": "ValueError", "classes": ["ValueError", "Exception", "BaseException"],
             "standard": True, "where": "line 21", "message": "cannot reshape array of size 132 into shape (4,3,1,8)"}
    result = sandbox._decode(reply, [], "")
    assert (result.status, result.exception, result.misfit) == ("raised", "ValueError", Misfit("reshape", (132, 4, 3, 1, 8)))
    assert result.message == "raised ValueError at line 21: cannot reshape array of size 132 into shape (4,3,1,8)"
    # A class name that is not an identifier is kept in the message for the student, never as the field.
    forged = sandbox._decode(dict(reply, exception="ValueError: x"), [], "")
    assert (forged.status, forged.exception) == ("raised", "")
    # The misfit is read only from Python's ValueError itself: never from a subclass's message, nor a look-alike's.
    subclass = sandbox._decode(dict(reply, exception="ShapeError", standard=False), [], "")
    assert (subclass.exception, subclass.classes, subclass.misfit) == (
        "ShapeError", ("ValueError", "Exception", "BaseException"), None)
    assert sandbox._decode(dict(reply, classes=["Exception", "BaseException"], standard=False), [], "").misfit is None
    long = sandbox._decode(dict(reply, exception="E" * 101), [], "")
    assert long.exception == ""
    assert sandbox._decode(dict(reply, exception=["ValueError"]), [], "").exception == ""


def test_a_message_that_only_looks_like_numpys_is_read_as_nothing_never_a_failure():
    # The message is the submission's to write: what the patterns do not take exactly is no misfit.
    for message in ("cannot reshape array of size 1 into shape (sin)", "cannot reshape array of size 1 into shape ("
                    + "1," * 40 + "1)", "too many values to unpack (expected x)", "matmul: anything"):
        assert misfit_of("ValueError", message) is None
