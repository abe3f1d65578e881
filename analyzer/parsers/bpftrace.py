"""bpftrace and bcc histogram / map output -> ``bpf_hist`` and ``bpf_scalar``.

Supported (text, any bpftrace version from 0.9 to 0.2x; bcc tools' ``print_log2_hist`` /
``print_linear_hist``):

* bpftrace ``hist()``/``lhist()`` maps: a map line ``@usecs:`` / ``@[comm]:`` /
  ``@name[k1, k2]:`` then bucket rows ``[lo, hi)  count |@@@|`` with K/M/G/T suffixes
  (powers of 1024), single-value buckets ``[0]``, ``[1]``, the negative bucket
  ``(..., 0)`` and the lhist overflow bucket ``[64K, ...)``.
* scalar maps ``@a[comm]: 26`` (count/sum/avg/min/max print the same way: stat
  ``value``), ``stats()`` lines ``@s: count 80723, average 8661, total 699159288``
  (stats ``count``/``average``/``total``), string maps (``text``), ``tseries()`` rows.
* bcc histograms: ``     usecs   : count     distribution`` headers with
  ``0 -> 1   : 233  |****|`` (log2) or ``5   : 12  |**|`` (linear) rows, per-key
  sections (``disk = 'sda'``: map ``disk``, key ``sda``).
* interval timestamps on their own line: ``HH:MM:SS`` (bpftrace ``time()`` default,
  bcc ``-T``; also ``[HH:MM:SS]``) dated with ``ctx.capture_start`` and rolled over at
  midnight, ISO 8601 (``2026-11-29T14:00:10Z``, offset or local), epoch seconds. A
  timestamp applies to the maps after it until the next one or two blank lines in a row
  (bpftrace's exit dump has no time: ``ts`` NULL). Local times use ``ctx.tz``.
* ``-f json``: NDJSON records ``hist``, ``map``, ``stats``, ``tseries``, ``time``,
  ``attached_probes`` (pretty-printed multi-line records too); see ``_bpftrace_json``.

Banners (``Attaching N probes...``, ``Tracing ... Hit Ctrl-C to end.``), titles and
``^C`` are structure; stderr noise (``ERROR: ... RLIMIT_MEMLOCK``), shell prompts and
prose of example transcripts are skipped with reasons. Other printf output (snoop
tables, stacks) is skipped as unsupported.

Tables: ``bpf_hist`` (ts, map, key, bucket_low, bucket_high, count, unit, style) and
``bpf_scalar`` (ts, map, key, stat, value, text). Buckets are ``[bucket_low,
bucket_high)``: high is exclusive, so bcc's ``2 -> 3`` is ``[2, 4)`` and JSON
``max`` is ``max + 1``.

Sample input::

    Attaching 5 probes...
    17:26:46
    @usecs:
    [1]                25440 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
    [2, 4)              6511 |@@@@@@@@@@@@@                                       |
    [64K, ...)             2 |                                                    |

    @s: count 80723, average 8661, total 699159288
    @a[dd]: 8663
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.parsers import _blocks, _bpftrace_json, _bpftrace_text, _read, base
from analyzer.parsers._nvbpf_time import resolve_tz
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult

TABLES: dict[str, base.Table] = {
    "bpf_hist": base.table(
        "one row per histogram bucket per map key per printed interval",
        ("ts", TS, "", "interval end: the timestamp printed before the map (NULL if unknown)"),
        ("map", pl.String, "", "map name with '@' (bpftrace), or the bcc section/label"),
        ("key", pl.String, "", "map key as printed ('' when none)"),
        ("bucket_low", pl.Int64, "", "inclusive lower bound (NULL for the negative bucket)"),
        ("bucket_high", pl.Int64, "", "exclusive upper bound (NULL for an open overflow bucket)"),
        ("count", pl.Int64, "", "events in the bucket"),
        (
            "unit",
            pl.String,
            "",
            "usecs/nsecs/msecs/secs/bytes/kbytes from the map name or header, else NULL",
        ),
        ("style", pl.String, "", "'bpftrace', 'bcc' or 'json'"),
    ),
    "bpf_scalar": base.table(
        "one row per scalar map value (per key, per stat, per interval)",
        ("ts", TS, "", "interval end (tseries: interval start) or NULL if unknown"),
        ("map", pl.String, "", "map name with '@'"),
        ("key", pl.String, "", "map key as printed ('' when none)"),
        (
            "stat",
            pl.String,
            "",
            "'value' (count/sum/avg/min/max maps), or 'count'/'average'/'total' of stats()",
        ),
        ("value", pl.Float64, "", "numeric value (NULL for string maps)"),
        ("text", pl.String, "", "the value as printed when it is not a number"),
    ),
}

_SNIFF = [
    (r"^Attach(?:ing|ed) \d+ probes?", 0.9),
    (r'^\{"type": ?"(?:attached_probes|hist|map|stats|tseries|time|printf)"', 0.95),
    (r"^\s*\S.*\s+: count\s+distribution\s*$", 0.9),
    (r"^[\[(][^\])]*[\])]\s+\d+\s+\|[@ ]*\|\s*$", 0.9),
]


def sniff(head: str, name: str) -> float:
    """bpftrace banners, bucket rows or JSON records; bcc ``: count distribution`` headers."""
    score = max((p for rx, p in _SNIFF if re.search(rx, head, re.M)), default=0.0)
    if not score and len(re.findall(r"^@[A-Za-z_0-9]*(?:\[.*\])?: \S", head, re.M)) >= 2:
        score = 0.6
    if (
        not score
        and re.search(r"^\{\s*$", head, re.M)
        and re.search(r'"type":\s*"(?:hist|map|stats|tseries)"', head)
    ):
        score = 0.8
    return score


def _json_mode(path: Path) -> bool:
    """Whether the first line that is neither blank nor stderr noise starts with ``{``."""
    for block in _blocks.Blocks(path, chunk_bytes=1 << 16):
        first = block.lines.filter(
            (pl.col("line").str.strip_chars() != "")
            & ~pl.col("line").str.contains(_bpftrace_text.NOISE)
        ).head(1)
        if first.height:
            return first.item(0, "line").startswith("{")
    return False


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one bpftrace / bcc output file (see the module docstring).

    Text output is read in blocks that start at an empty line (`_bpftrace_text`); each
    block's rows go to ``ctx.sink`` when there is one. JSON output is read whole.
    """
    cov = Coverage()
    tz, tz_note = resolve_tz(ctx)
    json_mode = _json_mode(path)
    out = _blocks.Rows(ctx, TABLES)
    placed = False
    if json_mode:
        df = _read.read_lines(path).collect()
        cov.total = df.height
        if _read.needs_utf8_repair(path):
            cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
        hist, scalars = _bpftrace_json.tokenize(df, ctx, tz, cov)
        out.put({"bpf_hist": hist, "bpf_scalar": scalars})
        placed = _any_ts(hist, scalars)
    else:
        carry = _bpftrace_text.Carry()
        blocks = _blocks.Blocks(path, _bpftrace_text.cut_before_blank, lookahead=2)
        for block in blocks:
            cov.total += block.lines.height
            hist, scalars = _bpftrace_text.tokenize(block.lines, block.ahead, ctx, tz, cov, carry)
            out.put({"bpf_hist": hist, "bpf_scalar": scalars})
            placed = placed or _any_ts(hist, scalars)
        if blocks.repaired:
            cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
        _bpftrace_text.finish(carry, cov)
    if tz_note and placed:
        cov.notes.append(tz_note)
    empty = {name: pl.DataFrame() for name in TABLES}
    return ParseResult(
        tables=dict(out.tables(empty)),
        coverage=cov,
        meta={"format": "json" if json_mode else "text"},
    )


def _any_ts(*frames: pl.DataFrame) -> bool:
    return any(f.get_column("ts").is_not_null().any() for f in frames)
