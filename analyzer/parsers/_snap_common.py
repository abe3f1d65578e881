"""Helpers shared by the snapshot parsers (host_config, processes, df, interrupts, buddyinfo,
containers, proc_cgroup; `unescape` also app_log, `lines`/`snapshot_time` py_spy).

A capture snapshot is ``snap/<name>.<phase>.out`` with phase ``start`` or ``end``: the
phase comes from the file name, the snapshot time from the manifest (``ctx.capture_start``
for ``start``, ``ctx.capture_end`` for ``end``). Hand-made files have neither: ``snapshot``
and ``ts`` are NULL and the coverage says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer.parsers import _read, _sysstat, base

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


def snapshot_time(
    path: Path, ctx: base.ParseContext, notes: list[str]
) -> tuple[str | None, datetime | None]:
    """(phase, ts) of a snapshot file (phase 'start' / 'end' from a name such as
    ``ps_cpu.start.out``, else None); notes why ts is NULL when it is."""
    m = _PHASE.search(ctx.file_name or path.name)
    phase = m.group(1) if m else None
    ts = {"start": ctx.capture_start, "end": ctx.capture_end}.get(phase or "")
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


def all_blank(cov: base.Coverage, df: pl.DataFrame) -> bool:
    """True when the lines of ``df`` (from `lines`) are all blank, or there are none; they
    are then accounted in ``cov`` as blank."""
    if df.height and not df["line"].str.strip_chars().eq("").all():
        return False
    cov.total += df.height
    cov.add_structure("blank", df.height)
    return True


def truncated(df: pl.DataFrame, path: Path) -> pl.Expr:
    """Per line of ``df`` (from `lines`): it is the last one and the file does not end with a
    newline."""
    return pl.lit(not _sysstat.ends_with_newline(path)) & (pl.col("line_no") == df.height)


def classify(*cases: tuple[pl.Expr, str]) -> pl.Expr:
    """Per line: ``blank`` for blank lines, else the verdict of the first case whose
    condition holds, else ``other``."""
    expr = pl.when(pl.col("line").str.strip_chars() == "").then(pl.lit("blank"))
    for cond, verdict in cases:
        expr = expr.when(cond).then(pl.lit(verdict))
    return expr.otherwise(pl.lit("other"))


def verdicts(df: pl.DataFrame, parsed: pl.Expr, path: Path) -> pl.Expr:
    """Per line of ``df`` (from `lines`): `classify` with ``truncated`` (the last line, when
    the file does not end with a newline), then ``parsed`` where ``parsed`` holds."""
    return classify((truncated(df, path), "truncated"), (parsed, "parsed"))


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


def conformed(
    tables: Mapping[str, base.Table],
    frames: Mapping[str, pl.DataFrame],
    phase: str | None,
    ts: datetime | None,
) -> dict[str, pl.DataFrame]:
    """Each frame `with_snapshot` (unless it has no columns: no rows), conformed to its
    declared table."""
    return {
        name: tables[name].conform(with_snapshot(f, phase, ts) if f.width else f).collect()
        for name, f in frames.items()
    }
