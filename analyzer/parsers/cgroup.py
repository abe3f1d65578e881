"""cgroup v1/v2 control files -> ``cgroup_cpu``, ``cgroup_memory``, ``cgroup_memory_stat``,
``cgroup_io``, ``cgroup_limits``.

Inputs:

- a raw snapshot of one control file (``cat .../cpu.stat``). It has no timestamp (``ts``
  NULL, coverage note) and no path: the file kind comes from the name hint
  (``ctx.file_name`` or the file name, e.g. ``...__memory.events``) or else from the
  keys; the cgroup comes from a ``/sys/fs/cgroup/...`` path in the name hint, else NULL.
- the capture's sampler series (``series/cgroup.out``, see ``_sampler``):
  ``<epoch_s> <path> <raw line>``; the path gives the cgroup and the file. ``*.pressure``
  lines belong to the PSI parser and are skipped with a reason here.

Files understood (v2 and v1): ``cpu.stat`` (v1 ``throttled_time``/``burst_time`` in ns,
v2 ``*_usec`` in µs, normalised to µs), ``cpuacct.stat`` (USER_HZ=100 ticks -> µs),
``cpuacct.usage*`` (ns -> µs), ``cpu.max`` (``max 100000`` / ``50000 100000``),
``cpu.cfs_quota_us`` (-1 = unlimited), ``cpu.cfs_period_us``, ``cpu.weight``,
``cpu.weight.nice``, ``cpu.shares`` (converted to a weight: 1 + ((shares - 2) * 9999) /
262142), ``memory.current``/``usage_in_bytes``, ``memory.max``/``limit_in_bytes``
(``max`` or >= 2**62 = unlimited -> NULL), ``memory.high/low/min/peak``,
``memory.max_usage_in_bytes``, ``memory.swap.current/max``, ``memory.memsw.*``,
``memory.failcnt``, ``memory.stat``, ``memory.events[.local]``, ``memory.swap.events``,
``memory.oom_control``, ``io.stat``, ``io.max``, ``blkio.throttle.io_service_bytes`` /
``io_serviced`` (v1), ``pids.max``. Others are skipped ("unsupported cgroup file").

The cgroup is the path below ``/sys/fs/cgroup`` with a v1 controller mount
(``cpu,cpuacct``, ``memory``, ``blkio``, ``unified``...) removed; ``/`` is the root.
Wide tables have one row per (ts, cgroup) [and device]: files read at different
instants give different rows, with the other columns NULL. Derived per-interval values
(``cgroup_cpu.throttled_pct`` etc.) are NULL on the first sample of a cgroup, when ts is
unknown, and after a counter reset (noted in coverage).

Sample input (sampler format)::

    1764424800.010 /sys/fs/cgroup/train.slice/cpu.stat usage_usec 98701325189
    1764424800.010 /sys/fs/cgroup/train.slice/cpu.stat nr_periods 3936904
    1764424800.010 /sys/fs/cgroup/train.slice/cpu.stat nr_throttled 6004
    1764424800.010 /sys/fs/cgroup/train.slice/cpu.stat throttled_usec 19175137007
    1764424800.011 /sys/fs/cgroup/train.slice/cpu.max 50000 100000
    1764424800.012 /sys/fs/cgroup/train.slice/memory.current 2471755776
    1764424800.012 /sys/fs/cgroup/train.slice/memory.events oom_kill 0
    1764424800.013 /sys/fs/cgroup/train.slice/io.stat 259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0
    1764424800.014 /sys/fs/cgroup/cpu,cpuacct/train/cpu.stat throttled_time 3179427297
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _cgroup_build as cgb
from analyzer.parsers import _cgroup_fast as cgf
from analyzer.parsers import _cgroup_tables as ct
from analyzer.parsers import _sampler as smp
from analyzer.parsers import _sampler_stream as st
from analyzer.parsers._cgroup_schema import TABLES
from analyzer.parsers._read import read_head
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult

__all__ = ["TABLES", "parse", "sniff"]

_V1_MOUNT = (
    r"(?:unified|systemd|name=systemd|(?:cpu|cpuacct|cpuset|memory|blkio|pids|devices|freezer"
    r"|net_cls|net_prio|perf_event|hugetlb|rdma|misc)(?:,[a-z_]+)*)"
)
CGROUP_RE = rf"^/sys/fs/cgroup(?:/{_V1_MOUNT})?(/.*)?$"
_KV_RE = re.compile(r"^([a-z_.]+) (-?\d+)$")


def kind_from_name(name: str) -> str | None:
    """The control file named in ``name`` (longest known name first), e.g. ``cpu.stat``."""
    low = name.lower()
    for f in sorted(ct.ALL_FILES, key=len, reverse=True):
        if re.search(rf"(?:^|[^a-z0-9.]){re.escape(f)}(?:$|[^a-z0-9])", low):
            return f
    return None


def kind_from_content(head: str) -> str | None:
    """Guess a raw control file's kind from its keys (single values: unknown)."""
    lines = [ln.strip() for ln in head.splitlines()[:300] if ln.strip()]
    if not lines:
        return None
    if sum(bool(re.match(r"^\d+:\d+ \S+=", ln)) for ln in lines) >= len(lines) / 2:
        return "io.max" if "bps=" in head else "io.stat"
    keys = {m.group(1) for ln in lines if (m := _KV_RE.match(ln))}
    if len(keys) < len(lines) / 2 or len(keys) < 2:
        return None
    if {"under_oom", "oom_kill_disable"} & keys and keys <= {
        "oom_kill_disable",
        "under_oom",
        "oom_kill",
    }:
        return "memory.oom_control"
    if keys & {"usage_usec", "nr_periods", "throttled_time", "throttled_usec"} and keys <= {
        k for (f, k) in ct.CPU_MAP if f == "cpu.stat"
    }:
        return "cpu.stat"
    if "oom" in keys and keys <= set(ct.MEM_EVENTS):
        return "memory.events"
    if "fail" in keys and keys <= {"high", "max", "fail"}:
        return "memory.swap.events"
    if keys == {"user", "system"}:
        return "cpuacct.stat"
    if keys & {"anon", "file", "cache", "rss"} and "nr_free_pages" not in keys:
        return "memory.stat"
    return None


def sniff(head: str, name: str) -> float:
    """Sampler files under /sys/fs/cgroup, or raw control files recognised by keys/name."""
    if smp.sampler_share(head) >= 0.5:
        paths = [p for p in smp.sampler_paths(head) if not p.endswith(".pressure")]
        if not paths:
            return 0.0
        share = sum(p.startswith("/sys/fs/cgroup/") for p in paths) / len(paths)
        return 0.95 if share >= 0.5 else 0.0
    by_content = kind_from_content(head)
    by_name = kind_from_name(name)
    if by_content and by_name == by_content:
        return 0.95
    if by_content:
        return 0.6 if by_content == "cpuacct.stat" else 0.85
    if by_name and re.fullmatch(r"\s*(-?\d+|max)(\s+\d+)?\s*", head or "x"):
        return 0.7
    return 0.0


def cgroup_of(path_dir: pl.Expr) -> pl.Expr:
    """The cgroup of a control file's directory: below /sys/fs/cgroup, v1 mount removed."""
    return (
        pl.when(path_dir.str.contains(r"^/sys/fs/cgroup(/|$)"))
        .then(path_dir.str.extract(CGROUP_RE, 1).fill_null("/"))
        .otherwise(path_dir)
    )


def _tokenize(
    lf: pl.LazyFrame, raw_kind: str | None, raw_cgroup: str | None, ctx: ParseContext
) -> pl.LazyFrame:
    lf = smp.split_sampler(lf)
    s_ok = pl.col("s_ok")
    body = pl.when(s_ok).then(pl.col("raw")).otherwise(pl.col("line"))
    file = pl.when(s_ok).then(pl.col("path_file")).otherwise(pl.lit(raw_kind, pl.Utf8))
    cgroup = (
        pl.when(s_ok).then(cgroup_of(pl.col("path_dir"))).otherwise(pl.lit(raw_cgroup, pl.Utf8))
    )
    lf = lf.with_columns(file=file, cgroup=cgroup, body=body.str.strip_chars_end())
    b, f = pl.col("body"), pl.col("file")
    # splitn + capture-free checks: capturing regexes are several times slower in polars
    lf = lf.with_columns(_s3=b.str.splitn(" ", 3), _s2=b.str.splitn(" ", 2))
    f0, f1, f2 = (pl.col("_s3").struct.field(f"field_{i}") for i in range(3))
    rest1 = pl.col("_s2").struct.field("field_1")
    is_int = r"^-?\d+$"
    is_single, is_keyed = f.is_in(ct.SINGLE_FILES), f.is_in(ct.KEYED_FILES)
    is_blk, is_io = f.is_in(ct.BLKIO_FILES), f.is_in(["io.stat", "io.max"])
    keyed_ok = f1.str.contains(is_int) & f2.is_null()
    blk_ok = (
        f0.str.contains(r"^\d+:\d+$")
        & f1.is_in(["Read", "Write", "Sync", "Async", "Discard", "Total"])
        & f2.str.contains(r"^\d+$")
    )
    cmax_ok = (
        f0.str.contains(r"^(max|\d+)$") & (f1.is_null() | f1.str.contains(r"^\d+$")) & f2.is_null()
    )
    lf = lf.with_columns(
        key=pl.when(is_keyed & keyed_ok).then(f0).when(is_blk & blk_ok).then(f1),
        val=pl.when(is_keyed & keyed_ok)
        .then(f1)
        .when(is_single & b.str.contains(r"^\s*(-?\d+|max)$"))
        .then(b.str.strip_chars())
        .when((f == "cpu.max") & cmax_ok)
        .then(f0)
        .when(is_blk & blk_ok)
        .then(f2),
        val2=pl.when((f == "cpu.max") & cmax_ok).then(f1),
        device=pl.when(is_blk & blk_ok)
        .then(f0)
        .when(is_io & f0.str.contains(r"^\d+:\d+$") & rest1.is_not_null())
        .then(f0),
        kv=pl.when(is_io & f0.str.contains(r"^\d+:\d+$")).then(rest1),
    ).drop("_s3", "_s2")
    cpu_keyed = f.is_in(["cpu.stat", "cpuacct.stat"])
    why = (
        pl.when(pl.col("line").str.len_bytes() > ctx.max_line_bytes)
        .then(pl.lit(smp.reason("skipped", "line too long")))
        .when(b == "")
        .then(pl.lit(smp.reason("structure", "blank")))
        .when(s_ok & f.str.ends_with(".pressure"))
        .then(pl.lit(smp.reason("skipped", "psi line (psi parser)")))
        .when(~s_ok & pl.lit(raw_kind is None))
        .then(pl.lit(smp.reason("skipped", "not a cgroup sampler line and file kind unknown")))
        .when(~f.is_in(ct.ALL_FILES))
        .then(pl.lit(smp.reason("skipped", "unsupported cgroup file")))
        .when(is_blk & b.str.contains(r"^(\d+:\d+ )?Total \d+$"))
        .then(pl.lit(smp.reason("structure", "blkio total")))
        .when(is_blk & b.str.contains(r"^\d+:\d+ (Sync|Async) \d+$"))
        .then(pl.lit(smp.reason("structure", "blkio sync/async (redundant)")))
        .when(pl.col("val").is_null() & pl.col("kv").is_null())
        .then(pl.lit(smp.reason("skipped", "unexpected line for this file")))
        .when(cpu_keyed & ~ct.known_cpu_key(f, pl.col("key")))
        .then(pl.lit(smp.reason("skipped", "unknown cpu.stat key")))
    )
    return lf.with_columns(why=why)


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse a cgroup control-file snapshot or the capture's cgroup sampler series.

    Read in chunks (:mod:`._sampler_stream`): well-formed sampler lines are tokenized from
    CSV fields (:mod:`._cgroup_fast`), all others by :func:`_tokenize`; the tables are
    built chunk by chunk (:class:`._cgroup_build.Builder`).
    """
    cov = Coverage()
    head = read_head(path)
    hint = ctx.file_name or path.name
    sampled = smp.sampler_share(head) >= 0.5
    raw_kind = None if sampled else (kind_from_name(hint) or kind_from_content(head))
    raw_cgroup = None
    m = re.search(r"(/sys/fs/cgroup(?:/[^\s]*)?)/[^/]*$", hint)
    if m:
        raw_cgroup = pl.select(pl.lit(m.group(1)).str.extract(CGROUP_RE, 1).fill_null("/")).item()
    out = st.Output(path, ctx.sink, TABLES)
    build = cgb.Builder(TABLES)
    timeless = unplaced = done = False
    for chunk in st.iter_chunks(path, st.chunk_size(path)):
        tok = _chunk_tokens(chunk, ctx, cov, raw_kind, raw_cgroup)
        timeless = timeless or bool(tok["ts"].null_count())
        unplaced = unplaced or bool(tok["cgroup"].null_count())
        out.emit(build.add(tok, final=chunk.last), cov.parsed)
        done = chunk.last
    if not done:  # no chunk (empty file)
        out.emit(build.add(pl.DataFrame(schema=_TOKENS), final=True), cov.parsed)
    if cov.parsed == 0 and cov.n_skipped > 0 and not sampled and raw_kind is None:
        raise ParseError(f"{path.name}: not a recognisable cgroup control file")
    if build.resets:
        cov.notes.append(f"{build.resets} cgroup cpu counter reset(s): derived values NULL there")
    if timeless:
        cov.notes.append("snapshot without timestamp: ts is NULL")
    if unplaced:
        cov.notes.append("cgroup path unknown (no /sys/fs/cgroup path in the name): cgroup is NULL")
    if not sampled and raw_kind:
        cov.notes.append(f"file kind: {raw_kind}")
    return ParseResult(
        tables=out.result(), coverage=cov, meta={"cgroup_file": raw_kind} if raw_kind else {}
    )


_TOKENS = {
    "line_no": pl.UInt32(),
    "ts": TS,
    **{c: pl.String() for c in ("cgroup", "file", "key", "val", "val2", "device", "kv")},
}


def _chunk_tokens(
    chunk: st.Chunk, ctx: ParseContext, cov: Coverage, raw_kind: str | None, raw_cgroup: str | None
) -> pl.DataFrame:
    """Tokens of the parsed lines of one chunk (``_TOKENS``, line order); lines counted."""
    clean = st.is_clean(chunk, ctx.max_line_bytes, forbid=b"+")
    got = st.fields(chunk, cgf.FIELDS) if clean and raw_kind is None else None
    if got is None:
        return _rest_tokens(st.text_lines(chunk, clean=clean), ctx, cov, raw_kind, raw_cgroup)
    tok, counts, rest = cgf.tokens(chunk, *got, cgroup_of(pl.col("path_dir")))
    for why, n in counts.items():
        smp.count(cov, why, n)
    if not rest.any():
        return tok
    lines = st.text_lines(chunk, np.flatnonzero(rest))
    more = _rest_tokens(lines, ctx, cov, raw_kind, raw_cgroup)
    return pl.concat([tok, more]).sort("line_no")


def _rest_tokens(
    lines: pl.DataFrame,
    ctx: ParseContext,
    cov: Coverage,
    raw_kind: str | None,
    raw_cgroup: str | None,
) -> pl.DataFrame:
    """Tokens of text lines (``line_no``, ``line``) by the regular expressions."""
    df = _tokenize(lines.lazy(), raw_kind, raw_cgroup, ctx).select(*_TOKENS, "why").collect()
    smp.tally(cov, df)
    return df.filter(pl.col("why").is_null()).drop("why")
