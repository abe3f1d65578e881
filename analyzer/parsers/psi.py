"""Pressure stall information: ``/proc/pressure/{cpu,memory,io,irq}`` and cgroup v2
``*.pressure`` files (Linux >= 4.20; ``cpu`` has a ``full`` line from 5.13; ``irq`` exists
from 6.1 with ``CONFIG_IRQ_TIME_ACCOUNTING`` and has only a ``full`` line).

Three layouts, line by line (they may even be mixed in one file):

- raw snapshot (``cat /proc/pressure/io``): ``some avg10=… avg60=… avg300=… total=…``.
  There is no time: ``ts`` is NULL (noted). The resource comes from the command line's
  path (``ctx.command``) or the file name (``cpu``, ``io.pressure``,
  ``local-kernel6.18__host-idle__memory`` -> memory), else NULL with a note; ``source``
  is ``system`` for a bare resource name, NULL for a ``*.pressure`` name (cgroup unknown).
- the capture's sampler format (docs/bundle-format.md):
  ``<epoch_s> <path> <raw line>``; resource = base name of the path without
  ``.pressure``; source = ``system`` for ``/proc/pressure/*``, else the cgroup directory
  (full path, ``\\040`` decoded to a space). A sampler line cut short at the end of the
  file (no trailing newline) is skipped.
- the legacy pre-upstream layout (early Facebook kernels, oomd fixtures):
  ``aggr N`` / ``some a b c`` / ``full a b c`` (+ optional ``0 0 0`` padding rows).
  ``some``/``full`` become rows with avg10/60/300 and NULL total; ``aggr`` (undocumented
  unit) goes to ``meta['legacy_aggr']`` and counts as structure, as do padding rows.

``stall_pct`` is derived from ``total`` (cumulative stall time in µs):
100 × Δtotal_us / Δt_us between consecutive samples (in file order) of the same
source/resource/kind; NULL for the first sample, a counter reset (Δtotal < 0) or Δt <= 0.

Table ``psi``: ts, source, resource, kind, avg10_pct, avg60_pct, avg300_pct, total_us,
stall_pct (types and units in ``TABLES``).

Every line is checked against the regexes below; a PSI line whose seven fields are
separated by single blanks (the sampler's) is cut at its blanks, any other line is read
through the regexes' groups; then one typing step.

Sample input (sampler format)::

    1764424800.002 /proc/pressure/cpu some avg10=1.20 avg60=0.80 avg300=0.31 total=96242289
    1764424800.002 /proc/pressure/cpu full avg10=0.00 avg60=0.00 avg300=0.00 total=0
    1764424800.003 /sys/fs/cgroup/train.slice/memory.pressure some avg10=0.00 avg60=0.00 avg300=0.00 total=1203
    1764424801.002 /proc/pressure/cpu some avg10=1.31 avg60=0.83 avg300=0.32 total=96442289
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _sysstat, base

TABLES: dict[str, base.Table] = {
    "psi": base.table(
        "one row per PSI line (some/full) per sample",
        ("ts", base.TS, "", "sample time (UTC) from the sampler prefix; NULL for raw snapshots"),
        ("source", pl.String, "", "'system' for /proc/pressure/*, else the cgroup directory"),
        ("resource", pl.String, "", "cpu, memory, io or irq (NULL when it cannot be told)"),
        ("kind", pl.String, "", "'some' (at least one task stalled) or 'full' (all stalled)"),
        ("avg10_pct", pl.Float64, "%", "kernel's running average of stall time over 10 s"),
        ("avg60_pct", pl.Float64, "%", "running average over 60 s"),
        ("avg300_pct", pl.Float64, "%", "running average over 300 s"),
        ("total_us", pl.Int64, "us", "cumulative stall time since boot (NULL in legacy layout)"),
        (
            "stall_pct",
            pl.Float64,
            "%",
            "100 × Δtotal_us / Δt_us since the previous sample of the same source/resource/kind",
        ),
    )
}

# ASCII classes on purpose: Unicode \s/\d make these regexes ~3x slower in polars.
_NUM = r"[0-9]+(?:\.[0-9]+)?"
_PREFIX = r"^[ \t]*(?:(?P<epoch>[0-9]{1,12}(?:\.[0-9]{1,9})?)[ \t]+(?P<path>/[^ \t]*)[ \t]+)?"
_PSI = (
    _PREFIX
    + rf"(?P<kind>some|full)[ \t]+avg10=(?P<a10>{_NUM})[ \t]+avg60=(?P<a60>{_NUM})"
    + rf"[ \t]+avg300=(?P<a300>{_NUM})[ \t]+total=(?P<total>[0-9]{{1,19}})[ \t]*$"
)
#: A PSI line as the sampler writes it: `_PSI` with a prefix and single blanks only.
_SPLIT = (
    rf"^[0-9]{{1,12}}(?:\.[0-9]{{1,9}})? /[^ \t]* (?:some|full) avg10={_NUM} avg60={_NUM}"
    + rf" avg300={_NUM} total=[0-9]{{1,19}}$"
)
_LEGACY = (
    _PREFIX
    + rf"(?P<kind>some|full)[ \t]+(?P<a10>{_NUM})[ \t]+(?P<a60>{_NUM})[ \t]+(?P<a300>{_NUM})[ \t]*$"
)
_AGGR = _PREFIX + r"aggr[ \t]+(?P<aggr>[0-9]{1,19})[ \t]*$"
_PAD = _PREFIX + r"0[ \t]+0[ \t]+0[ \t]*$"
_SAMPLER = r"^[ \t]*[0-9]{1,12}(?:\.[0-9]+)?[ \t]+/[^ \t]*"
_NAME = re.compile(
    r"(?:^|[^A-Za-z0-9])(cpu|memory|io|irq)(\.pressure)?(?:\.(?:start|end|out|txt|snap|log))*$"
)
_FIELDS = ("epoch", "path", "kind", "a10", "a60", "a300")


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is PSI output (raw, sampler or legacy layout)."""
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    if not lines:
        return 0.0
    psi = sum(1 for ln in lines if re.match(_PSI, ln))
    if psi:
        return 0.95 if psi * 2 >= len(lines) else 0.3
    legacy = sum(1 for ln in lines if re.match(_LEGACY, ln) or re.match(_AGGR, ln))
    if legacy >= 2 and any(re.match(_AGGR, ln) for ln in lines[:3]):
        return 0.8
    return 0.0


def _raw_origin(ctx: base.ParseContext, path: Path) -> tuple[str | None, str | None, str | None]:
    """(source, resource, note) of lines without a sampler prefix, from the command or the
    file name."""
    try:
        words = shlex.split(ctx.command or "")
    except ValueError:
        words = (ctx.command or "").split()
    for w in words:
        if w.startswith("/") and "pressure" in w:
            p = PurePosixPath(w)
            resource = p.name.removesuffix(".pressure")
            source = "system" if w.startswith("/proc/pressure/") else str(p.parent)
            return source, resource, None
    name = PurePosixPath(ctx.file_name or path.name).name
    m = _NAME.search(name)
    if m is None:
        return None, None, f"raw PSI lines: resource not in the file name {name!r}: resource NULL"
    if m.group(2):
        note = "raw cgroup *.pressure lines: cgroup directory unknown, source NULL"
        return None, m.group(1), note
    note = f"raw PSI lines: source 'system' and resource {m.group(1)!r} from the file name"
    return "system", m.group(1), note


def _last_line(path: Path, limit: int = 4096) -> str:
    """The start of the file's last line, read from its tail (no full scan)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - limit))
        tail = f.read()
    return tail.rsplit(b"\n", 1)[-1].decode("utf-8", "replace").replace("\x00", "")


def _tokenize(lines: pl.DataFrame, cut_last: bool) -> pl.DataFrame:
    """``line_no``, the PSI fields as text (`_FIELDS`, ``total``, ``aggr``) and ``what``
    (the line's kind) of one block, in line order; ``cut_last``: its last line is a
    sampler line cut short (no newline)."""
    split = lines.get_column("line").str.contains(_SPLIT)
    f = pl.col("f").struct.field
    df = lines.filter(split).select("line_no", pl.col("line").str.split_exact(" ", 6).alias("f"))
    df = df.select(
        "line_no",
        f("field_0").alias("epoch"),
        f("field_1").alias("path"),
        f("field_2").alias("kind"),
        f("field_3").str.slice(len("avg10=")).alias("a10"),
        f("field_4").str.slice(len("avg60=")).alias("a60"),
        f("field_5").str.slice(len("avg300=")).alias("a300"),
        f("field_6").str.slice(len("total=")).alias("total"),
        pl.lit(None, pl.String).alias("aggr"),
        pl.lit("psi").alias("what"),
    )
    if df.height < lines.height:
        df = pl.concat([df, _regex(lines.filter(~split))]).sort("line_no")
    if cut_last and df.height:  # a sampler line without its newline was cut while being written
        last = pl.col("line_no") == pl.col("line_no").max()
        df = df.with_columns(
            pl.when(last).then(pl.lit("truncated")).otherwise("what").alias("what")
        )
    return df


def _regex(lines: pl.DataFrame) -> pl.DataFrame:
    """`_tokenize` of the lines that are not `_SPLIT`: fields from the regexes' groups."""
    line = pl.col("line")
    # the common PSI line first; the other layouts are tried only on what is left
    lf = lines.lazy().with_columns(line.str.extract_groups(_PSI).alias("g"))
    g = pl.col("g")
    lf = lf.with_columns(pl.when(g.struct.field("kind").is_null()).then(line).alias("rest"))
    rest = pl.col("rest")
    lf = lf.with_columns(
        rest.str.extract_groups(_LEGACY).alias("legacy"),
        rest.str.extract_groups(_AGGR).struct.field("aggr").alias("aggr"),
    )
    legacy = pl.col("legacy")
    what = (
        pl.when(rest.is_null())
        .then(pl.lit("psi"))
        .when(legacy.struct.field("kind").is_not_null())
        .then(pl.lit("legacy"))
        .when(pl.col("aggr").is_not_null())
        .then(pl.lit("aggr"))
        .when(rest.str.contains(_PAD))
        .then(pl.lit("pad"))
        .when(rest.str.contains(r"^\s*$"))
        .then(pl.lit("blank"))
        .when(rest.str.contains(_SAMPLER))
        .then(pl.lit("sampler_other"))
        .otherwise(pl.lit("other"))
    )
    return lf.select(
        "line_no",
        *[pl.coalesce(g.struct.field(f), legacy.struct.field(f)).alias(f) for f in _FIELDS],
        g.struct.field("total").alias("total"),
        "aggr",
        what.alias("what"),
    ).collect()


def _origin(rows: pl.DataFrame, known: pl.DataFrame | None) -> pl.DataFrame:
    """``known`` (``path``, ``p_id``, ``p_source``, ``p_resource``; None at first) and the
    sampler paths of ``rows`` it lacks (source and resource computed once per path)."""
    new = rows.select(pl.col("path").drop_nulls().unique(maintain_order=True))
    if known is not None:
        new = new.join(known, on="path", how="anti")
    p = pl.col("path").str.replace_all(r"\040", " ", literal=True)
    new = new.with_row_index("p_id", 0 if known is None else known.height).with_columns(
        pl.when(pl.col("path").str.starts_with("/proc/pressure/"))
        .then(pl.lit("system"))
        .otherwise(p.str.extract(r"^(.*)/[^/]*$").replace("", "/"))
        .alias("p_source"),
        p.str.extract(r"([^/]*)$").str.strip_suffix(".pressure").alias("p_resource"),
    )
    return new if known is None else pl.concat([known, new])


@dataclass
class _Carry:
    """What one block hands to the next."""

    origin: pl.DataFrame | None = None  # the sampler paths seen so far: `_origin`
    last: pl.DataFrame | None = None  # last sample per path id and kind: _key, total_us, ts
    raw: tuple[str | None, str | None, str | None] | None = None  # _raw_origin, once needed
    legacy: bool = False
    aggr: list[int] = field(default_factory=list)


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one PSI file (raw, sampler or legacy layout) into table ``psi``, block by
    block: each block's rows go to ``ctx.sink`` when there is one."""
    cov = base.Coverage()
    cut_end = not _sysstat.ends_with_newline(path) and re.match(_SAMPLER, _last_line(path))
    counts: Counter[str] = Counter()
    carry = _Carry()
    out = _blocks.Rows(ctx, TABLES)
    blocks = _blocks.Blocks(path)
    for block in blocks:
        df = _tokenize(block.lines, bool(cut_end) and block.last)
        cov.total += block.n_lines
        block_counts = Counter(dict(df.get_column("what").value_counts().iter_rows()))
        counts.update(block_counts)
        typed = _rows(df, block_counts, ctx, path, carry)
        cov.parsed += typed.height
        out.put({"psi": typed} if typed.height else {})
    cov.add_structure("blank", counts["blank"])
    cov.add_structure("legacy aggr line (value in meta)", counts["aggr"])
    cov.add_structure("legacy padding row (0 0 0)", counts["pad"])
    cov.add_skipped("sampler line without PSI content", counts["sampler_other"])
    cov.add_skipped("unrecognized line", counts["other"])
    cov.add_skipped("truncated last line (no trailing newline)", counts["truncated"])
    if counts["psi"] + counts["legacy"] == 0 and counts["other"] > 0:
        raise ParseError(f"{ctx.file_name or path.name}: no PSI line")
    notes = ["file is not valid UTF-8: invalid bytes replaced"] if blocks.repaired else []
    if carry.raw is not None:
        notes += [carry.raw[2]] if carry.raw[2] else []
        notes.append("raw PSI snapshot lines carry no time: ts NULL, stall_pct NULL")
    if carry.legacy:
        notes.append(
            "legacy pre-upstream PSI layout: bare numbers read as avg10/avg60/avg300, total NULL"
        )
    cov.notes[:] = list(dict.fromkeys(notes))
    meta: dict[str, object] = {"legacy_aggr": carry.aggr} if carry.aggr else {}
    return base.ParseResult(tables=dict(out.tables()), coverage=cov, meta=meta)


def _rows(
    df: pl.DataFrame, counts: dict[str, int], ctx: base.ParseContext, path: Path, carry: _Carry
) -> pl.DataFrame:
    """The typed ``psi`` rows of one block's tokenized lines ``df`` (``counts``: lines per
    ``what``), in line order
    (``stall_pct`` continues from the last sample of each path/kind in earlier blocks);
    updates ``carry``."""
    if len(carry.aggr) < 16:
        aggr = df.filter(pl.col("what") == "aggr")["aggr"].cast(pl.Int64, strict=False)
        carry.aggr += aggr.drop_nulls().head(16 - len(carry.aggr)).to_list()
    carry.legacy = carry.legacy or counts["legacy"] > 0
    rows = df if counts["psi"] == df.height else df.filter(pl.col("what").is_in(["psi", "legacy"]))
    if rows["path"].null_count() and carry.raw is None:
        carry.raw = _raw_origin(ctx, path)
    raw_source, raw_resource = carry.raw[:2] if carry.raw else (None, None)
    carry.origin = _origin(rows, carry.origin)
    source = pl.coalesce("p_source", pl.lit(raw_source, dtype=pl.String))
    resource = pl.coalesce("p_resource", pl.lit(raw_resource, dtype=pl.String))
    ts = pl.col("epoch").str.to_datetime("%s%.f", time_unit="us", time_zone="UTC", strict=False)
    typed = rows.join(carry.origin, on="path", how="left", maintain_order="left").select(
        ts.alias("ts"),
        source.alias("source"),
        resource.alias("resource"),
        "kind",
        pl.col("a10").cast(pl.Float64, strict=False).alias("avg10_pct"),
        pl.col("a60").cast(pl.Float64, strict=False).alias("avg60_pct"),
        pl.col("a300").cast(pl.Float64, strict=False).alias("avg300_pct"),
        pl.col("total").cast(pl.Int64, strict=False).alias("total_us"),
        (pl.col("p_id") * 2 + (pl.col("kind") == "full")).alias("_key"),
    )
    return _stall(typed, carry)


def _stall(typed: pl.DataFrame, carry: _Carry) -> pl.DataFrame:
    """``typed`` with ``stall_pct`` from the previous sample of its ``_key`` (path id and
    kind; that of an earlier block included: ``carry.last``, which is then updated).
    Rows without a sampler path have no time, hence no stall_pct, whatever their key."""
    n_prev = 0 if carry.last is None else carry.last.height
    both = typed if carry.last is None else pl.concat([carry.last, typed], how="diagonal")
    d_total = pl.col("total_us") - pl.col("total_us").shift(1).over("_key")
    d_t = (pl.col("ts") - pl.col("ts").shift(1).over("_key")).dt.total_microseconds()
    pct = pl.when((d_total >= 0) & (d_t > 0)).then(100.0 * d_total / d_t)
    both = both.with_columns(pct.alias("stall_pct"))
    carry.last = both.group_by("_key").agg(pl.col("total_us").last(), pl.col("ts").last())
    return both.slice(n_prev).drop("_key")
