"""The report module: student text made safe to print."""

from grader.report import printable


def test_control_characters_are_escaped_and_newlines_only_where_allowed():
    text = "x\r\x1b[1A\x85 ok\u2028\u202eevil\n"
    assert printable(text, newlines=True) == "x\\x0d\\x1b[1A\\x85 ok\\u2028\\u202eevil\n"
    assert printable(text, newlines=False) == "x\\x0d\\x1b[1A\\x85 ok\\u2028\\u202eevil\\n"
    assert printable("tab\tand plain text, é ✓", newlines=False) == "tab\tand plain text, é ✓"
