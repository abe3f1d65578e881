"""Helpers shared by the snapshot parsers (host_config, processes, df, interrupts, buddyinfo,
containers, proc_cgroup; `unescape` also app_log).

A capture snapshot is ``snap/<name>.<phase>.out`` with phase ``start`` or ``end``: the
phase comes from the file name, the snapshot time from the manifest (``ctx.capture_start``
for ``start``, ``ctx.capture_end`` for ``end``). Hand-made files have neither: ``snapshot``
and ``ts`` are NULL and the coverage says so.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer.parsers import _read, base

#: The two columns every snapshot table starts with.
SNAP_COLUMNS: tuple[tuple[str, pl.DataType, str, str], ...] = (
    ("ts", base.TS, "", "snapshot time (UTC); NULL when unknown"),
    ("snapshot", pl.String, "", "'start' or 'end' (capture phase); NULL for hand-made files"),
)
#: The line verdicts most snapshot parsers give, for `account`.
REASONS: dict[str, tuple[str, str]] = {
    "parsed": ("parsed", ""),
    "blank": ("structure", "blank"),
    "header": ("structure", "header"),
    "truncated": ("skipped", "truncated last line (no trailing newline)"),
    "other": ("skipped", "unrecognised line"),
}
_PHASE = re.compile(r"(?:^|[._-])(start|end)(?:[._-]|$)")


def phase_of(name: str) -> str | None:
    """'start' / 'end' from a capture file name such as ``ps_cpu.start.out``, else None."""
    m = _PHASE.search(name)
    return m.group(1) if m else None


def snapshot_time(
    path: Path, ctx: base.ParseContext, notes: list[str]
) -> tuple[str | None, datetime | None]:
    """(phase, ts) of a snapshot file; notes why ts is NULL when it is."""
    name = ctx.file_name or path.name
    phase = phase_of(name)
    ts = None
    if phase == "start":
        ts = ctx.capture_start
    elif phase == "end":
        ts = ctx.capture_end
    if phase is None:
        notes.append("not a capture snapshot name (<name>.start/.end): snapshot and ts NULL")
    elif ts is None:
        notes.append(f"capture {phase} time unknown (no manifest): ts NULL")
    return phase, ts


def lines(path: Path, notes: list[str]) -> pl.DataFrame:
    """All lines of a (small) snapshot file as ``line_no``, ``line``; notes UTF-8 repair."""
    if _read.needs_utf8_repair(path):
        notes.append("file is not valid UTF-8: invalid bytes replaced")
    return _read.read_lines(path).collect()


def blank_only(df: pl.DataFrame) -> bool:
    """True when the lines of ``df`` (from `lines`) are all blank, or there are none."""
    return df.height == 0 or bool(df["line"].str.strip_chars().eq("").all())


def ends_with_newline(path: Path) -> bool:
    """True when the file is empty or its last byte is a newline."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def verdicts(df: pl.DataFrame, parsed: pl.Expr, path: Path) -> pl.Expr:
    """Per line of ``df`` (from `lines`): ``blank``, ``truncated`` (the last line, when the
    file does not end with a newline), ``parsed`` where ``parsed`` holds, else ``other``
    — for `account`."""
    trunc = not ends_with_newline(path)
    return (
        pl.when(pl.col("line").str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(pl.lit(trunc) & (pl.col("line_no") == df.height))
        .then(pl.lit("truncated"))
        .when(parsed)
        .then(pl.lit("parsed"))
        .otherwise(pl.lit("other"))
    )


def account(cov: base.Coverage, what: pl.Series, reasons: dict[str, tuple[str, str]]) -> None:
    """Add the per-line verdicts in ``what`` to ``cov``.

    ``reasons`` maps a verdict to ``("parsed"|"structure"|"skipped", reason)``; a verdict
    not in the map is counted as skipped under its own name.
    """
    cov.total += what.len()
    for verdict, n in what.value_counts().iter_rows():
        kind, reason = reasons.get(verdict, ("skipped", str(verdict)))
        if kind == "parsed":
            cov.parsed += n
        elif kind == "structure":
            cov.add_structure(reason, n)
        else:
            cov.add_skipped(reason, n)


def snake(expr: pl.Expr) -> pl.Expr:
    """Normalise a label to a key part: ``CPU(s)`` -> ``cpus``, ``Model name`` -> ``model_name``."""
    return (
        expr.str.strip_chars()
        .str.to_lowercase()
        .str.replace_all(r"\(s\)", "s")
        .str.replace_all(r"[^a-z0-9]+", "_")
        .str.strip_chars("_")
    )


def unescape(expr: pl.Expr) -> pl.Expr:
    """Octal escapes of /proc/mounts and of the capture's paths: ``\\040`` space,
    ``\\011`` tab, ``\\012`` newline, ``\\134`` backslash."""
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        expr = expr.str.replace_all(code, ch, literal=True)
    return expr


def squash(expr: pl.Expr) -> pl.Expr:
    """Trim and collapse runs of whitespace (tabs included) to one space."""
    return expr.str.replace_all(r"\s+", " ").str.strip_chars()


def with_snapshot(frame: pl.DataFrame, phase: str | None, ts: datetime | None) -> pl.DataFrame:
    """Prepend the ``ts`` and ``snapshot`` columns."""
    return frame.with_columns(
        pl.lit(ts, dtype=base.TS).alias("ts"),
        pl.lit(phase, dtype=pl.String).alias("snapshot"),
    )
