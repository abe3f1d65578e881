"""Names from a bundle made printable without losing what they were.

A member or file name is bytes on the host that made it: it may not be UTF-8, and it may
hold control characters (newlines, ANSI escapes) or bidirectional overrides that make a
report or a terminal show something else than what is there. `display_name` is the one
form every table, report and JSON uses for such a name:

- bytes that are not UTF-8 (Python's ``surrogateescape``) -> ``\\xNN``;
- control characters (C0, DEL, C1), line/paragraph separators, bidi embeddings,
  overrides and isolates, zero-width and BOM characters -> as Python's ``ascii()``
  writes them (``\\n``, ``\\x1b``, ``\\u202e``);
- a backslash -> ``\\\\`` (so the escape is lossless: two different names never show the
  same).

`escape_text` applies the same to any text for a terminal or an HTML attribute, without
the backslash doubling (free text is not an identity).
"""

from __future__ import annotations

import re

#: characters a name must not show raw: they move the cursor, hide or reorder text
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\udc80-\udcff]"
)


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return ascii(c)[1:-1]  # \n, \t, \x1b, \u202e: as Python writes them


def display_name(name: str) -> str:
    """``name`` with backslashes doubled and unsafe characters escaped (module doc).

    >>> display_name("dmesg\\udcff.log"), display_name("a\\u202eb"), display_name("x\\\\y")
    ('dmesg\\\\xff.log', 'a\\\\u202eb', 'x\\\\\\\\y')
    """
    return UNSAFE.sub(_escape, name.replace("\\", "\\\\"))


def escape_text(text: str) -> str:
    """``text`` with unsafe characters escaped (backslashes kept as they are)."""
    return UNSAFE.sub(_escape, text)


def fs_text(path: object) -> str:
    """A file-system path (possibly holding ``surrogateescape`` bytes) as printable text."""
    return escape_text(str(path))
