"""Typed errors of the library. Only `analyzer/cli.py` turns them into messages and exit codes.

- `HindsightError`: base class; its message is one line meant for the user.
- `BundleError`: the bundle as a whole is unusable (not an archive, empty, unreadable,
  or a refused member under `--strict`). Exit code 2.
- `ParseError`: a single file cannot be parsed at all. The pipeline catches it, records the
  file in `collectors` with the reason, and goes on with the rest of the bundle.
- `LimitError`: a resource bound (bytes, lines, members, ratio) was exceeded.
"""


class HindsightError(Exception):
    """Base class for expected, user-facing failures."""


class BundleError(HindsightError):
    """The bundle as a whole cannot be analysed."""


class ParseError(HindsightError):
    """One file cannot be parsed; the rest of the bundle still can."""


class LimitError(HindsightError):
    """A documented resource bound was exceeded."""
