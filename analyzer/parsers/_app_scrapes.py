"""Cut an ``--app-metrics`` file (docs/bundle-format.md) into its scrapes, lazily.

Private helper of `analyzer.parsers.app_metrics`. The capture writes every scrape as::

    # hindsight-scrape begin <epoch_s> <url>
    <the page, as the endpoint sent it>
    # hindsight-scrape end <epoch_s> rc=<int> bytes=<int> truncated=<0|1> dur_ms=<float>[ error=<text>]

`iter_scrapes` yields one `Block` per scrape (``kind`` ``scrape``), per begin marker
without its end marker (``cut``: killed mid-write, or the tail of a flight-recorder
slot), per run of lines outside any block (``stray``), and, for a file without any
marker (a page saved by hand: ``curl URL > metrics.txt``), the whole file as one
``bare`` block with no time. Memory: one block at a time (a page is at most
``HINDSIGHT_APP_MAX_KB``, 1 MiB by default); a block over ``MAX_BLOCK_BYTES`` keeps
only its line count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_BLOCK_BYTES = 64 << 20
BEGIN = "# hindsight-scrape begin "
END = "# hindsight-scrape end "
_BEGIN_RE = re.compile(r"^# hindsight-scrape begin ([0-9]{1,12}(?:\.[0-9]{1,9})?) (\S*)\s*$")
_END_RE = re.compile(
    r"^# hindsight-scrape end ([0-9]{1,12}(?:\.[0-9]{1,9})?) rc=(-?[0-9]+) bytes=([0-9]+)"
    r" truncated=([01]) dur_ms=([0-9.]+)(?: error=(.*))?$"
)


@dataclass
class Block:
    """One scrape (or a run of lines that is not one). ``lines``: the page's lines
    (markers excluded; empty when over ``MAX_BLOCK_BYTES``); ``n_lines``: every line of
    the block, markers included; ``start_us`` / ``end_us``: the marker times in µs since
    the epoch (None without markers)."""

    kind: str
    n_lines: int = 0
    lines: list[str] = field(default_factory=list)
    endpoint: str | None = None
    start_us: int | None = None
    end_us: int | None = None
    rc: int | None = None
    bytes: int | None = None
    truncated: bool = False
    dur_ms: float | None = None
    error: str | None = None
    oversized: bool = False
    _size: int = 0

    def add(self, line: str) -> None:
        self.n_lines += 1
        self._size += len(line) + 1
        if self._size > MAX_BLOCK_BYTES:
            self.oversized, self.lines = True, []
        elif not self.oversized:
            self.lines.append(line)


def epoch_us(text: str) -> int:
    """'1764424800.123456789' -> µs since the epoch, exactly (no float rounding)."""
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000 + int((frac + "000000")[:6])


def iter_scrapes(path: Path) -> Iterator[Block]:
    """The blocks of ``path`` in file order (see the module docstring)."""
    seen_marker = False
    pending = Block("stray")  # lines before the first marker: stray, or a bare page
    cur: Block | None = None
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for raw in f:
            line = raw.rstrip("\n").removesuffix("\r").replace("\x00", "")
            if line.startswith(BEGIN) and (m := _BEGIN_RE.match(line)):
                if cur is not None:
                    cur.kind = "cut"
                    yield cur
                elif pending.n_lines:
                    yield pending
                pending = Block("stray")
                seen_marker = True
                cur = Block("cut", endpoint=m.group(2) or None, start_us=epoch_us(m.group(1)))
                cur.n_lines = 1
                continue
            if cur is not None and line.startswith(END) and (m := _END_RE.match(line)):
                cur.n_lines += 1
                cur.kind, cur.end_us, cur.rc = "scrape", epoch_us(m.group(1)), int(m.group(2))
                cur.bytes, cur.truncated = int(m.group(3)), m.group(4) == "1"
                cur.dur_ms, cur.error = float(m.group(5)), m.group(6)
                yield cur
                cur = None
                continue
            (cur if cur is not None else pending).add(line)
    if cur is not None:
        yield cur
    if pending.n_lines:
        if not seen_marker:
            pending.kind = "bare"
        yield pending
