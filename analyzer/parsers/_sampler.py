"""Shared helpers for the capture's *sampler* line format and for line accounting.

Shell samplers in the capture (``series/psi.out``, ``series/cgroup.out``,
``series/meminfo.out``, ``series/proc_vmstat.out``; see ``docs/bundle-format.md``) copy
kernel files line by line, each prefixed with the sample time and the path read::

    <epoch_s> <path> <raw line as the kernel printed it>

    1764424800.002 /proc/pressure/cpu some avg10=1.20 avg60=0.80 avg300=0.31 total=96242289
    1764424800.003 /sys/fs/cgroup/train.slice/cpu.stat nr_throttled 12
    1764424801 /proc/meminfo MemTotal:       24684084 kB

``epoch_s`` is UTC seconds with an optional fraction (``%N`` gives nanoseconds);
``path`` is absolute, spaces written as ``\\040``; the rest of the line is unchanged.

Everything here is vectorized polars: use :func:`split_sampler` on the ``line`` column of
``_read.read_lines`` to get ``s_ok`` (bool), ``ts`` (UTC, microseconds), ``path``,
``path_dir``, ``path_file`` and ``raw``; :func:`sampler_share` scores a head for sniffing.
:func:`sampler_runs` gives the same for the lines of a `_blocks.Block`, working once per
record (the parsers use it). :func:`tally` turns a per-line reason column into
``Coverage`` counts.

This module is used by the cgroup, meminfo and proc_vmstat parsers; the PSI parser may
import it too. Keep it free of tool-specific knowledge.
"""

from __future__ import annotations

import re

import polars as pl

from analyzer.parsers.base import TS, Coverage

#: One sampler line: epoch seconds (9-11 digits, optional fraction), absolute path, rest.
SAMPLER_RE = r"^(\d{9,11}(?:\.\d{1,9})?) (/\S*)(?: (.*))?$"
_SAMPLER_PY = re.compile(SAMPLER_RE)

#: Prefix of a coverage reason column value marking a *structure* line (else: skipped).
STRUCTURE = "structure:"
#: Prefix marking a *skipped* line.
SKIPPED = "skipped:"


EPOCH_TOKEN = r"^\d{9,11}(\.\d{1,9})?$"


def epoch_to_ts(expr: pl.Expr) -> pl.Expr:
    """``"1764424800.123456789"`` (string) -> UTC Datetime(us), exact (no float rounding).

    The fraction is truncated to microseconds. NULL when the token is not an epoch.
    """
    parts = expr.str.splitn(".", 2)
    whole = parts.struct.field("field_0").cast(pl.Int64, strict=False)
    frac = parts.struct.field("field_1").fill_null("").str.pad_end(6, "0").str.slice(0, 6)
    us = whole * 1_000_000 + frac.cast(pl.Int64, strict=False)
    ok = expr.str.contains(EPOCH_TOKEN)
    return pl.when(ok).then(us).cast(pl.Datetime("us")).dt.replace_time_zone("UTC").cast(TS)


def split_sampler(lf: pl.LazyFrame, line: str = "line") -> pl.LazyFrame:
    """Add the sampler fields of column ``line``.

    Added columns: ``s_ok`` (line is in sampler format), ``ts`` (UTC; NULL when not),
    ``path`` (``\\040`` decoded), ``path_dir`` (path without its last component; ``/``
    for top-level files), ``path_file`` (last component) and ``raw`` (the kernel line;
    ``""`` when the sampler copied an empty line). Implemented with ``splitn`` and
    capture-free regexes: capturing regexes are several times slower in polars.
    """
    lf = lf.with_columns(_s=pl.col(line).str.splitn(" ", 3))
    epoch = pl.col("_s").struct.field("field_0")
    path0 = pl.col("_s").struct.field("field_1")
    lf = lf.with_columns(
        s_ok=epoch.str.contains(EPOCH_TOKEN) & path0.str.starts_with("/").fill_null(False),
        _e=epoch,
        _p=path0,
        _r=pl.col("_s").struct.field("field_2"),
    )
    ok = pl.col("s_ok")
    lf = lf.with_columns(
        ts=pl.when(ok).then(epoch_to_ts(pl.col("_e"))),
        path=pl.when(ok).then(pl.col("_p").str.replace_all(r"\040", " ", literal=True)),
        raw=pl.when(ok).then(pl.col("_r").fill_null("")),
    )
    return lf.with_columns(path_parts(pl.col("path"))).drop("_s", "_e", "_p", "_r")


def sampler_runs(lines: pl.DataFrame, **by_path: pl.Expr) -> pl.DataFrame:
    """``lines`` (``line_no``, ``line``) with the columns of :func:`split_sampler`, found
    once per run of lines with the same ``<epoch> <path>`` prefix (the lines of one record),
    the time once per run of equal epochs and the path facts once per distinct path.

    Adds ``s_ok``, ``ts``, ``body`` (the kernel line: ``raw`` of a sampler line, else the
    whole line) and the ``by_path`` columns, expressions over ``path``, ``path_dir`` and
    ``path_file`` (NULL when not ``s_ok``).
    """
    parts = lines.get_column("line").str.splitn(" ", 3).struct.unnest()
    e, p = parts.get_column("field_0"), parts.get_column("field_1")
    new_e = e.ne_missing(e.shift(1))
    first = new_e | p.ne_missing(p.shift(1))
    if first.len():
        new_e[0] = first[0] = True
    run = (first.cum_sum() - 1).cast(pl.UInt32)
    ep = pl.col("e")
    epochs = pl.DataFrame({"e": e.filter(new_e)}).select(
        e_ok=ep.str.contains(EPOCH_TOKEN), ts=epoch_to_ts(ep)
    )
    at = (new_e.cum_sum() - 1).filter(first)
    heads = pl.DataFrame({"p": p.filter(first)}).with_columns(
        epochs.get_column("e_ok").gather(at), epochs.get_column("ts").gather(at)
    )
    path = pl.col("p").str.replace_all(r"\040", " ", literal=True)
    paths = (
        pl.DataFrame({"p": heads.get_column("p").unique().drop_nulls()})
        .filter(pl.col("p").str.starts_with("/"))
        .with_columns(path=path)
        .with_columns(path_parts(pl.col("path")))
        .select("p", **by_path)
    )
    heads = heads.join(paths, on="p", how="left", maintain_order="left")
    ok = pl.col("e_ok") & pl.col("p").str.starts_with("/").fill_null(False)
    heads = heads.select(
        s_ok=ok, ts=pl.when(ok).then("ts"), **{n: pl.when(ok).then(n) for n in by_path}
    )
    s_ok = heads.get_column("s_ok").gather(run)
    raw = parts.get_column("field_2").fill_null("")
    return lines.with_columns(
        s_ok,
        *(heads.get_column(c).gather(run) for c in heads.columns[1:]),
        body=pl.when(s_ok).then(raw).otherwise(pl.col("line")),
    )


def path_parts(path: pl.Expr) -> list[pl.Expr]:
    """``path_file`` (last component of ``path``) and ``path_dir`` (the rest; ``/`` for
    top-level files)."""
    file = path.str.split("/").list.last()
    return [
        file.alias("path_file"),
        path.str.head(path.str.len_chars() - file.str.len_chars() - 1)
        .replace("", "/")
        .alias("path_dir"),
    ]


def sampler_share(head: str, max_lines: int = 400) -> float:
    """Share of non-blank lines of ``head`` that are sampler lines (0 when none)."""
    lines = [ln for ln in head.splitlines()[:max_lines] if ln.strip()]
    if len(lines) > 1:
        lines = lines[:-1]  # the head may cut the last line
    if not lines:
        return 0.0
    return sum(1 for ln in lines if _SAMPLER_PY.match(ln)) / len(lines)


def sampler_paths(head: str, max_lines: int = 400) -> list[str]:
    """Paths named by the sampler lines of ``head`` (for sniffing by path)."""
    out = []
    for ln in head.splitlines()[:max_lines]:
        m = _SAMPLER_PY.match(ln)
        if m:
            out.append(m.group(2))
    return out


def reason(kind: str, text: str) -> str:
    """A reason value for :func:`tally`: ``reason("structure", "blank")``."""
    return (STRUCTURE if kind == "structure" else SKIPPED) + text


def tally(coverage: Coverage, frame: pl.DataFrame, col: str = "why") -> None:
    """Count lines into ``coverage``: NULL in ``col`` = parsed, else a :func:`reason` value.

    ``coverage.total`` is increased by the number of rows, so call it once per line frame.
    """
    for why, n in frame.group_by(col).len().iter_rows():
        count(coverage, why, n)


def count(coverage: Coverage, why: str | None, n: int) -> None:
    """Count ``n`` lines with reason ``why`` (a :func:`reason` value; None = parsed)."""
    coverage.total += n
    if why is None:
        coverage.parsed += n
    elif why.startswith(STRUCTURE):
        coverage.add_structure(why[len(STRUCTURE) :], n)
    else:
        coverage.add_skipped(why.removeprefix(SKIPPED), n)
