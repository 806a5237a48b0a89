"""What a raised exception is (``protocol.classify_exception``), read as the worker reads it for its reply.

The classes are Python's own in the type's real method resolution order (type's own slot, the order
``except`` walks), compared by identity with the builtins module's classes as they were before any
student code ran; nothing the class or its metaclass defines is called. These run in this process:
the worker runs the same function (tests/sandbox/test_sandbox.py calls it there, in both backends).
"""

from __future__ import annotations

import builtins

import numpy as np
import pytest

from grader.sandbox import classify_exception
from grader.sandbox.protocol import EXCEPTION_NAMES

VALUE_ERROR = ("ValueError", "Exception", "BaseException")


def test_a_builtin_class_is_itself_and_a_subclass_is_what_it_derives_from():
    assert classify_exception(ValueError("x")) == ("ValueError", VALUE_ERROR, True)

    class ShapeError(ValueError):
        pass

    assert classify_exception(ShapeError("x")) == ("ShapeError", VALUE_ERROR, False)
    assert classify_exception(ConnectionRefusedError()) == (
        "ConnectionRefusedError", ("ConnectionRefusedError", "ConnectionError", "OSError", "Exception", "BaseException"),
        True)
    assert classify_exception(KeyboardInterrupt()) == ("KeyboardInterrupt", ("KeyboardInterrupt", "BaseException"), True)


def test_numpys_exceptions_are_the_classes_of_pythons_they_derive_from():
    assert classify_exception(np.exceptions.AxisError("axis 3 is out of bounds")) == (
        "AxisError", ("ValueError", "IndexError", "LookupError", "Exception", "BaseException"), False)
    assert classify_exception(np.linalg.LinAlgError("singular")) == ("LinAlgError", VALUE_ERROR, False)
    with pytest.raises(MemoryError) as memory:  # 2**60 bytes: more than any address space, refused at once
        np.empty((1 << 57,))
    assert type(memory.value) is not MemoryError  # numpy's _ArrayMemoryError, whose __name__ is "MemoryError"
    assert classify_exception(memory.value) == ("MemoryError", ("MemoryError", "Exception", "BaseException"), False)
    with pytest.raises(ValueError, match="cannot reshape") as reshape:
        np.ones(24).reshape(5, 5)
    assert classify_exception(reshape.value) == ("ValueError", VALUE_ERROR, True)  # numpy's misfits: Python's own


def test_a_class_only_named_valueerror_is_not_one_however_it_is_named():
    class ValueError(Exception):  # a student's own class, as in tests/hostile/own_class_named_valueerror.py
        pass

    assert classify_exception(ValueError("x")) == ("ValueError", ("Exception", "BaseException"), False)

    class Fake(Exception):
        pass

    Fake.__name__ = Fake.__qualname__ = "ValueError"
    Fake.__module__ = "builtins"
    assert classify_exception(Fake("x")) == ("ValueError", ("Exception", "BaseException"), False)


def test_nothing_a_hostile_metaclass_defines_is_called():
    called = []

    class Meta(type):
        def _trap(cls, *args):
            called.append(args)
            raise AssertionError("called")

        __name__ = property(lambda cls: "ValueError")  # type: ignore[assignment]
        __mro__ = property(lambda cls: (cls, builtins.ValueError, Exception, BaseException, object))  # type: ignore[assignment]
        __hash__ = __eq__ = __instancecheck__ = __subclasscheck__ = __getattribute__ = _trap  # type: ignore[assignment]

    class Fake(Exception, metaclass=Meta):
        pass

    assert Meta.__dict__["__name__"].__get__(Fake) == "ValueError"  # what cls.__name__ would have said
    assert classify_exception(Fake("x")) == ("Fake", ("Exception", "BaseException"), False)
    assert called == []


def test_the_order_except_walks_is_what_counts_a_custom_mro_included():
    # A metaclass's mro() sets the order the class holds, which `except ValueError` walks: such a class is caught,
    # so it is a ValueError, as the grader says.
    class Meta(type):
        def mro(cls):
            return [cls, builtins.ValueError, Exception, BaseException, object]

    class Odd(Exception, metaclass=Meta):
        pass

    with pytest.raises(builtins.ValueError):
        raise Odd("x")
    assert classify_exception(Odd("x")) == ("Odd", VALUE_ERROR, False)


def test_the_builtins_a_submission_rebinds_change_nothing():
    class Mine(Exception):
        pass

    saved = builtins.ValueError, builtins.type, builtins.id
    builtins.ValueError, builtins.type, builtins.id = Mine, lambda obj: KeyError, lambda obj: 0  # as a submission may
    try:
        got = classify_exception(Mine("x")), classify_exception(saved[0]("x"))
    finally:
        builtins.ValueError, builtins.type, builtins.id = saved  # type: ignore[misc]
    assert got == (("Mine", ("Exception", "BaseException"), False), ("ValueError", VALUE_ERROR, True))


def test_the_names_are_pythons_exception_classes_only():
    assert {"ValueError", "BaseException", "MemoryError", "ExceptionGroup"} <= EXCEPTION_NAMES
    assert "IOError" not in EXCEPTION_NAMES  # an alias of OSError: one name per class
    assert "AxisError" not in EXCEPTION_NAMES and "object" not in EXCEPTION_NAMES
    assert all(issubclass(getattr(builtins, name), BaseException) for name in EXCEPTION_NAMES)
