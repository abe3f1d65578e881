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

How it reads: block by block (`_blocks.Blocks`); the sampler prefix is read once per
record (`_sampler.sampler_runs`), each line goes to the rules of its file's shape
(`_SHAPES`: keyed, single value, cpu.max, io, blkio) or is counted with the reason it is
not a row, and `_Builder` turns the tokens into the five tables, carrying what a table
needs across blocks (the last sample time's lines, the last counter sample per cgroup).

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
from analyzer.parsers import _blocks
from analyzer.parsers import _sampler as smp
from analyzer.parsers._read import read_head
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, table

_TS = ("ts", TS, "", "sample time (UTC); NULL for a snapshot without timestamp")
_CG = (
    "cgroup",
    pl.Utf8(),
    "",
    "cgroup path below /sys/fs/cgroup (v1 mount removed); NULL if unknown",
)
I64 = pl.Int64()
F64 = pl.Float64()

TABLES = {
    "cgroup_cpu": table(
        "one row per (ts, cgroup): cpu.stat / cpuacct counters, units normalised to µs",
        _TS,
        _CG,
        ("usage_usec", I64, "us", "total CPU time (v2 usage_usec; v1 cpuacct.usage ns/1000)"),
        ("user_usec", I64, "us", "user CPU time (v1 cpuacct.stat ticks x 10000, USER_HZ=100)"),
        ("system_usec", I64, "us", "system CPU time (v1 cpuacct.stat ticks x 10000)"),
        ("nice_usec", I64, "us", "nice CPU time (v2, kernel 6.x)"),
        ("force_idle_usec", I64, "us", "core_sched.force_idle_usec (core scheduling)"),
        ("nr_periods", I64, "", "CFS bandwidth periods elapsed (counter)"),
        ("nr_throttled", I64, "", "periods in which the group was throttled (counter)"),
        ("throttled_usec", I64, "us", "time throttled (v2 µs; v1 throttled_time ns/1000)"),
        ("nr_bursts", I64, "", "periods with a burst (counter)"),
        ("burst_usec", I64, "us", "burst time (v2 µs; v1 burst_time ns/1000)"),
        ("wait_usec", I64, "us", "v1 wait_sum (schedstats) ns/1000"),
        ("throttled_pct", F64, "%", "Δnr_throttled/Δnr_periods x 100 since previous sample"),
        ("throttled_ms_per_s", F64, "ms/s", "Δthrottled_usec/1000 per second of wall time"),
        ("usage_pct", F64, "%", "Δusage_usec per wall µs x 100 (100 = one CPU busy)"),
    ),
    "cgroup_memory": table(
        "one row per (ts, cgroup): memory usage, limits (NULL = unlimited) and events",
        _TS,
        _CG,
        ("current_bytes", I64, "bytes", "memory.current / v1 memory.usage_in_bytes"),
        ("max_bytes", I64, "bytes", "memory.max / v1 limit_in_bytes; NULL = unlimited"),
        ("high_bytes", I64, "bytes", "memory.high; NULL = unlimited"),
        ("low_bytes", I64, "bytes", "memory.low protection"),
        ("min_bytes", I64, "bytes", "memory.min protection"),
        ("peak_bytes", I64, "bytes", "memory.peak / v1 max_usage_in_bytes"),
        ("swap_current_bytes", I64, "bytes", "memory.swap.current"),
        ("swap_max_bytes", I64, "bytes", "memory.swap.max; NULL = unlimited"),
        ("memsw_current_bytes", I64, "bytes", "v1 memory.memsw.usage_in_bytes (memory+swap)"),
        ("events_low", I64, "", "memory.events low (counter)"),
        ("events_high", I64, "", "memory.events high: times over memory.high (counter)"),
        ("events_max", I64, "", "memory.events max: times at memory.max (counter)"),
        ("events_oom", I64, "", "memory.events oom: allocations that hit OOM (counter)"),
        ("events_oom_kill", I64, "", "processes OOM-killed (v2 memory.events, v1 oom_control)"),
        ("events_oom_group_kill", I64, "", "memory.events oom_group_kill (counter)"),
        ("failcnt", I64, "", "v1 memory.failcnt: limit hits (counter)"),
        ("under_oom", I64, "", "v1 memory.oom_control under_oom (0/1)"),
    ),
    "cgroup_memory_stat": table(
        "one row per key line of memory.stat, memory.events[.local], memory.swap.events, "
        "memory.oom_control",
        _TS,
        _CG,
        ("file", pl.Utf8(), "", "control file the line came from"),
        ("key", pl.Utf8(), "", "kernel key, e.g. anon, file_dirty, pgmajfault, oom_kill"),
        ("value", I64, "", "bytes for size keys of memory.stat, else counts/pages as printed"),
    ),
    "cgroup_io": table(
        "one row per (ts, cgroup, device): io.stat / v1 blkio.throttle counters",
        _TS,
        _CG,
        ("device", pl.Utf8(), "", "block device maj:min"),
        ("rbytes", I64, "bytes", "bytes read (counter)"),
        ("wbytes", I64, "bytes", "bytes written (counter)"),
        ("rios", I64, "", "read IOs (counter)"),
        ("wios", I64, "", "write IOs (counter)"),
        ("dbytes", I64, "bytes", "bytes discarded (counter)"),
        ("dios", I64, "", "discard IOs (counter)"),
    ),
    "cgroup_limits": table(
        "one row per limit value, v1 and v2 names normalised to one vocabulary",
        _TS,
        _CG,
        (
            "key",
            pl.Utf8(),
            "",
            "cpu.quota_us, cpu.period_us, cpu.weight, cpu.weight_nice, memory.max_bytes, "
            "memory.high_bytes, memory.low_bytes, memory.min_bytes, memory.swap_max_bytes, "
            "memory.soft_limit_bytes, memory.memsw_max_bytes, pids.max, io.max.{rbps,wbps,riops,wiops}",
        ),
        ("value", I64, "", "value in the unit the key names; NULL when unlimited"),
        ("unlimited", pl.Boolean(), "", "true for 'max', quota -1, or a v1 limit >= 2**62"),
        ("device", pl.Utf8(), "", "maj:min for io.max keys, else NULL"),
        ("source_key", pl.Utf8(), "", "original file (cpu.shares is converted to a weight)"),
    ),
}

#: v1 "unlimited" byte limits print PAGE_COUNTER_MAX * PAGE_SIZE (9223372036854771712
#: with 4 KiB pages); anything from 2**62 up is treated as unlimited.
UNLIMITED_BYTES = 2**62

#: (file, key) -> (cgroup_cpu column, multiplier, divisor). key None = single-value file.
CPU_MAP: dict[tuple[str, str | None], tuple[str, int, int]] = {
    ("cpu.stat", "usage_usec"): ("usage_usec", 1, 1),
    ("cpu.stat", "user_usec"): ("user_usec", 1, 1),
    ("cpu.stat", "system_usec"): ("system_usec", 1, 1),
    ("cpu.stat", "nice_usec"): ("nice_usec", 1, 1),
    ("cpu.stat", "core_sched.force_idle_usec"): ("force_idle_usec", 1, 1),
    ("cpu.stat", "nr_periods"): ("nr_periods", 1, 1),
    ("cpu.stat", "nr_throttled"): ("nr_throttled", 1, 1),
    ("cpu.stat", "throttled_usec"): ("throttled_usec", 1, 1),
    ("cpu.stat", "throttled_time"): ("throttled_usec", 1, 1000),  # v1: ns
    ("cpu.stat", "nr_bursts"): ("nr_bursts", 1, 1),
    ("cpu.stat", "burst_usec"): ("burst_usec", 1, 1),
    ("cpu.stat", "burst_time"): ("burst_usec", 1, 1000),  # v1: ns
    ("cpu.stat", "wait_sum"): ("wait_usec", 1, 1000),  # v1 with schedstats: ns
    ("cpuacct.stat", "user"): ("user_usec", 10_000, 1),  # USER_HZ (100) ticks
    ("cpuacct.stat", "system"): ("system_usec", 10_000, 1),
    ("cpuacct.usage", None): ("usage_usec", 1, 1000),  # ns
    ("cpuacct.usage_user", None): ("user_usec", 1, 1000),
    ("cpuacct.usage_sys", None): ("system_usec", 1, 1000),
}

#: single-value files -> cgroup_memory column
MEM_SINGLE = {
    "memory.current": "current_bytes",
    "memory.usage_in_bytes": "current_bytes",
    "memory.max": "max_bytes",
    "memory.limit_in_bytes": "max_bytes",
    "memory.high": "high_bytes",
    "memory.low": "low_bytes",
    "memory.min": "min_bytes",
    "memory.peak": "peak_bytes",
    "memory.max_usage_in_bytes": "peak_bytes",
    "memory.swap.current": "swap_current_bytes",
    "memory.swap.max": "swap_max_bytes",
    "memory.memsw.usage_in_bytes": "memsw_current_bytes",
    "memory.failcnt": "failcnt",
}
MEM_EVENTS = ("low", "high", "max", "oom", "oom_kill", "oom_group_kill")
#: keyed memory files that go to the long table cgroup_memory_stat
MEM_KEYED = (
    "memory.stat",
    "memory.events",
    "memory.events.local",
    "memory.swap.events",
    "memory.oom_control",
)

#: single-value files -> (cgroup_limits key, kind); kind: bytes | quota | plain | shares
LIMIT_SINGLE = {
    "memory.max": ("memory.max_bytes", "bytes"),
    "memory.limit_in_bytes": ("memory.max_bytes", "bytes"),
    "memory.high": ("memory.high_bytes", "bytes"),
    "memory.low": ("memory.low_bytes", "bytes"),
    "memory.min": ("memory.min_bytes", "bytes"),
    "memory.swap.max": ("memory.swap_max_bytes", "bytes"),
    "memory.soft_limit_in_bytes": ("memory.soft_limit_bytes", "bytes"),
    "memory.memsw.limit_in_bytes": ("memory.memsw_max_bytes", "bytes"),
    "cpu.cfs_quota_us": ("cpu.quota_us", "quota"),
    "cpu.cfs_period_us": ("cpu.period_us", "plain"),
    "cpu.weight": ("cpu.weight", "plain"),
    "cpu.weight.nice": ("cpu.weight_nice", "plain"),
    "cpu.shares": ("cpu.weight", "shares"),
    "pids.max": ("pids.max", "plain"),
}

IO_KEYS = ("rbytes", "wbytes", "rios", "wios", "dbytes", "dios")
IO_MAX_KEYS = ("rbps", "wbps", "riops", "wiops")
#: v1 blkio files: (file suffix, op) -> cgroup_io column
BLKIO_MAP = {
    ("io_service_bytes", "Read"): "rbytes",
    ("io_service_bytes", "Write"): "wbytes",
    ("io_service_bytes", "Discard"): "dbytes",
    ("io_serviced", "Read"): "rios",
    ("io_serviced", "Write"): "wios",
    ("io_serviced", "Discard"): "dios",
}

SINGLE_FILES = tuple(sorted({*MEM_SINGLE, *LIMIT_SINGLE, *(f for f, k in CPU_MAP if k is None)}))
KEYED_FILES = ("cpu.stat", "cpuacct.stat", *MEM_KEYED)
BLKIO_FILES = tuple(
    f"blkio.throttle.{s}{r}"
    for s in ("io_service_bytes", "io_serviced")
    for r in ("", "_recursive")
)
ALL_FILES = (*SINGLE_FILES, *KEYED_FILES, "cpu.max", "io.stat", "io.max", *BLKIO_FILES)


_V1_MOUNT = (
    r"(?:unified|systemd|name=systemd|(?:cpu|cpuacct|cpuset|memory|blkio|pids|devices|freezer"
    r"|net_cls|net_prio|perf_event|hugetlb|rdma|misc)(?:,[a-z_]+)*)"
)
CGROUP_RE = rf"^/sys/fs/cgroup(?:/{_V1_MOUNT})?(/.*)?$"
_KV_RE = re.compile(r"^([a-z_.]+) (-?\d+)$")


def kind_from_name(name: str) -> str | None:
    """The control file named in ``name`` (longest known name first), e.g. ``cpu.stat``."""
    low = name.lower()
    for f in sorted(ALL_FILES, key=len, reverse=True):
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
        k for (f, k) in CPU_MAP if f == "cpu.stat"
    }:
        return "cpu.stat"
    if "oom" in keys and keys <= set(MEM_EVENTS):
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


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse a cgroup control-file snapshot or the capture's cgroup sampler series, block
    by block (`_blocks.Blocks`); each block's rows go to ``ctx.sink`` when there is one."""
    cov = Coverage()
    head = read_head(path)
    hint = ctx.file_name or path.name
    sampled = smp.sampler_share(head) >= 0.5
    raw_kind = None if sampled else (kind_from_name(hint) or kind_from_content(head))
    raw_cgroup = None
    m = re.search(r"(/sys/fs/cgroup(?:/[^\s]*)?)/[^/]*$", hint)
    if m:
        raw_cgroup = pl.select(pl.lit(m.group(1)).str.extract(CGROUP_RE, 1).fill_null("/")).item()
    out = _blocks.Rows(ctx, TABLES)
    build = _Builder()
    timeless = unplaced = False
    for block in _blocks.Blocks(path):
        tok = _tokens(block.lines, ctx, cov, raw_kind, raw_cgroup)
        timeless = timeless or bool(tok["ts"].null_count())
        unplaced = unplaced or bool(tok["cgroup"].null_count())
        tables = build.tables(tok, final=block.last)
        if cov.parsed:  # a file that then fails with ParseError has sent nothing
            out.put(tables)
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
    empty = {name: pl.DataFrame() for name in TABLES}
    return ParseResult(
        tables=out.tables(empty), coverage=cov, meta={"cgroup_file": raw_kind} if raw_kind else {}
    )


def _tokens(
    lines: pl.DataFrame,
    ctx: ParseContext,
    cov: Coverage,
    raw_kind: str | None,
    raw_cgroup: str | None,
) -> pl.DataFrame:
    """Tokens of the parsed lines of one block (``_TOKENS``, line order), lines counted.

    A sampler line's file and cgroup come from its path, a raw line's from the name hint
    (``raw_kind``, ``raw_cgroup``). Each shape of file has its own rules (`_SHAPES`).
    """
    df = smp.sampler_runs(
        lines,
        file=pl.col("path_file"),
        cgroup=cgroup_of(pl.col("path_dir")),
        shape=_shape(pl.col("path_file")),
    )
    s_ok = pl.col("s_ok")
    raw_shape = (
        smp.reason("skipped", "not a cgroup sampler line and file kind unknown")
        if raw_kind is None
        else pl.select(_shape(pl.lit(raw_kind))).item()
    )
    df = df.select(
        "line_no",
        "ts",
        file=pl.when(s_ok).then("file").otherwise(pl.lit(raw_kind, pl.String)),
        cgroup=pl.when(s_ok).then("cgroup").otherwise(pl.lit(raw_cgroup, pl.String)),
        b=pl.col("body").str.strip_chars_end(),
        shape=pl.when(s_ok).then("shape").otherwise(pl.lit(raw_shape)),
        long=pl.col("line").str.len_bytes() > ctx.max_line_bytes,
    )
    early = pl.when("long").then(pl.lit(_TOO_LONG)).when(pl.col("b") == "").then(pl.lit(_BLANK))
    df = df.with_columns(shape=early.otherwise("shape"))
    parts = []
    for shape, group in df.partition_by("shape", as_dict=True, maintain_order=True).items():
        rules = _SHAPES.get(shape[0])
        if rules is None:  # the reason is the shape
            smp.count(cov, shape[0], group.height)
            continue
        group = rules(group)
        smp.tally(cov, group)
        parts.append(group.filter(pl.col("why").is_null()).select(c for c in _TOKENS if c in group))
    if not parts:
        return pl.DataFrame(schema=_TOKENS)
    out = pl.concat(parts, how="diagonal_relaxed")
    out = out.select(
        pl.col(c).cast(t) if c in out.columns else pl.lit(None, t).alias(c)
        for c, t in _TOKENS.items()
    )
    return out.sort("line_no") if len(parts) > 1 else out


_TOKENS = {
    "line_no": pl.UInt32(),
    "ts": TS,
    **{c: pl.String() for c in ("cgroup", "file", "key", "val", "val2", "device", "kv")},
}
_TOO_LONG = smp.reason("skipped", "line too long")
_BLANK = smp.reason("structure", "blank")
_INT, _DEV = r"^-?\d+$", r"^\d+:\d+$"


def _shape(file: pl.Expr) -> pl.Expr:
    """The shape of a sampler line's file: a key of `_SHAPES`, or the reason it is skipped."""
    shape = pl.when(file.str.ends_with(".pressure")).then(
        pl.lit(smp.reason("skipped", "psi line (psi parser)"))
    )
    for name, files in (
        ("keyed", KEYED_FILES),
        ("single", SINGLE_FILES),
        ("cpu.max", ("cpu.max",)),
        ("io", ("io.stat", "io.max")),
        ("blkio", BLKIO_FILES),
    ):
        shape = shape.when(file.is_in(files)).then(pl.lit(name))
    return shape.otherwise(pl.lit(smp.reason("skipped", "unsupported cgroup file")))


def _fields(g: pl.DataFrame, n: int) -> pl.DataFrame:
    """``g`` with ``f0`` .. the first ``n`` space-separated fields of ``b`` (the last: the rest)."""
    split = pl.col("b").str.splitn(" ", n).struct.rename_fields([f"f{i}" for i in range(n)])
    return g.with_columns(split.struct.unnest())


_UNEXPECTED = pl.lit(smp.reason("skipped", "unexpected line for this file"))
_f0, _f1, _f2 = pl.col("f0"), pl.col("f1"), pl.col("f2")


def _keyed(g: pl.DataFrame) -> pl.DataFrame:
    """``key int`` (cpu.stat, memory.stat, memory.events...); cpu keys must be known."""
    g = _fields(g, 3).with_columns(ok=_f1.str.contains(_INT) & _f2.is_null())
    g = g.with_columns(key=pl.when("ok").then(_f0), val=pl.when("ok").then(_f1))
    cpu = pl.col("file").is_in(["cpu.stat", "cpuacct.stat"])
    return g.with_columns(
        why=pl.when(~pl.col("ok"))
        .then(_UNEXPECTED)
        .when(cpu & ~_known_cpu_key(pl.col("file"), pl.col("key")))
        .then(pl.lit(smp.reason("skipped", "unknown cpu.stat key")))
    )


def _single(g: pl.DataFrame) -> pl.DataFrame:
    """One integer or ``max`` (memory.current, memory.max, cpuacct.usage...)."""
    g = g.with_columns(ok=pl.col("b").str.contains(r"^\s*(-?\d+|max)$"))
    return g.with_columns(
        val=pl.when("ok").then(pl.col("b").str.strip_chars()),
        why=pl.when(~pl.col("ok")).then(_UNEXPECTED),
    )


def _cpu_max(g: pl.DataFrame) -> pl.DataFrame:
    """``max|quota [period]``."""
    g = _fields(g, 3).with_columns(
        ok=_f0.str.contains(r"^(max|\d+)$")
        & (_f1.is_null() | _f1.str.contains(r"^\d+$"))
        & _f2.is_null()
    )
    ok = pl.col("ok")
    return g.with_columns(
        val=pl.when(ok).then(_f0), val2=pl.when(ok).then(_f1), why=pl.when(~ok).then(_UNEXPECTED)
    )


def _io(g: pl.DataFrame) -> pl.DataFrame:
    """``maj:min k=v ...`` (io.stat, io.max): ``kv`` is the text after the device."""
    g = _fields(g, 2).with_columns(dev=_f0.str.contains(_DEV))
    dev = pl.col("dev")
    return g.with_columns(
        device=pl.when(dev & _f1.is_not_null()).then(_f0),
        kv=pl.when(dev).then(_f1),
        why=pl.when(~dev | _f1.is_null()).then(_UNEXPECTED),
    )


def _blkio(g: pl.DataFrame) -> pl.DataFrame:
    """v1 ``maj:min Read|Write|Discard int``; totals and Sync/Async are redundant."""
    ops = ["Read", "Write", "Sync", "Async", "Discard", "Total"]
    g = _fields(g, 3).with_columns(
        ok=_f0.str.contains(_DEV) & _f1.is_in(ops) & _f2.str.contains(r"^\d+$")
    )
    ok, b = pl.col("ok"), pl.col("b")
    why = (
        pl.when(b.str.contains(r"^(\d+:\d+ )?Total \d+$"))
        .then(pl.lit(smp.reason("structure", "blkio total")))
        .when(b.str.contains(r"^\d+:\d+ (Sync|Async) \d+$"))
        .then(pl.lit(smp.reason("structure", "blkio sync/async (redundant)")))
        .when(~ok)
        .then(_UNEXPECTED)
    )
    return g.with_columns(
        key=pl.when(ok).then(_f1), val=pl.when(ok).then(_f2), device=pl.when(ok).then(_f0), why=why
    )


#: shape -> the rules of its lines: token columns and ``why`` (NULL = parsed)
_SHAPES = {"keyed": _keyed, "single": _single, "cpu.max": _cpu_max, "io": _io, "blkio": _blkio}


class _Builder:
    """The five tables from the tokens of one block after another (`tables`).

    Wide rows gather every line of one (ts, cgroup), so the rows of the last sample time
    of a block are held back and built with the next block's; the last counter sample
    of each cgroup carries over for the per-interval values. For a file whose sample
    times do not go back, the tables equal those of one whole-file block.
    """

    def __init__(self) -> None:
        self.held: pl.DataFrame | None = None
        self.prev: dict[str, pl.DataFrame | None] = {"throttle": None, "usage": None}
        self.resets = 0

    def tables(self, tok: pl.DataFrame, final: bool) -> dict[str, pl.DataFrame]:
        """The rows of every table from the tokens ``tok`` (``_TOKENS``, line order) and
        those held before them; ``final``: the file's last tokens (nothing held back)."""
        if self.held is not None:
            tok, self.held = pl.concat([self.held, tok]), None
        if not final and tok.height:
            ts = tok.get_column("ts")
            hold = ts.is_null() if ts[-1] is None else ts.eq_missing(ts[-1])
            n = int(hold.sum())
            if hold.slice(tok.height - n).all():  # the usual case: a tail, no copies
                self.held, tok = tok.slice(tok.height - n), tok.slice(0, tok.height - n)
            else:
                self.held, tok = tok.filter(hold), tok.filter(~hold)
        files = set(tok.get_column("file").unique().drop_nulls().to_list())

        def part(feeds: set[str]) -> pl.DataFrame | None:  # the rows a table needs
            return tok.filter(pl.col("file").is_in(sorted(feeds))) if files & feeds else None

        cpu, mem, io, lim = (part(s) for s in (_CPU_FILES, _MEM_FILES, _IO_FILES, _LIMIT_FILES))
        none = pl.DataFrame()
        return {
            "cgroup_cpu": none if cpu is None else self._cpu(cpu),
            "cgroup_memory": (
                none
                if mem is None
                else _wide(_memory_long(mem), ["ts", "cgroup"], _cols("cgroup_memory"))
            ),
            "cgroup_memory_stat": tok.filter(pl.col("file").is_in(MEM_KEYED)).select(
                "ts", "cgroup", "file", "key", value=pl.col("val").cast(pl.Int64, strict=False)
            ),
            "cgroup_io": none if io is None else _io_rows(io),
            "cgroup_limits": none if lim is None else _limits(lim),
        }

    def _cpu(self, ok: pl.DataFrame) -> pl.DataFrame:
        derived = ("throttled_pct", "throttled_ms_per_s", "usage_pct")
        cpu = _wide(_cpu_long(ok), ["ts", "cgroup"], _cols("cgroup_cpu", derived))
        cpu, r1, self.prev["throttle"] = _deltas(
            cpu,
            ["nr_periods", "nr_throttled", "throttled_usec"],
            {
                "throttled_pct": pl.when(pl.col("d_nr_periods") > 0).then(
                    100.0 * pl.col("d_nr_throttled") / pl.col("d_nr_periods")
                ),
                "throttled_ms_per_s": pl.col("d_throttled_usec") / 1000.0 / pl.col("dt_s"),
            },
            self.prev["throttle"],
        )
        cpu, r2, self.prev["usage"] = _deltas(
            cpu,
            ["usage_usec"],
            {"usage_pct": 100.0 * pl.col("d_usage_usec") / (pl.col("dt_s") * 1e6)},
            self.prev["usage"],
        )
        self.resets += r1 + r2
        return cpu


def _cols(name: str, but: tuple[str, ...] = ()) -> list[str]:
    return [c.name for c in TABLES[name].columns if c.name not in but]


#: files that feed each table (a block without any skips the table's work)
_CPU_FILES = {f for f, _ in CPU_MAP}
_MEM_FILES = {*MEM_SINGLE, "memory.events", "memory.oom_control"}
_IO_FILES = {"io.stat", *BLKIO_FILES}
_LIMIT_FILES = {*LIMIT_SINGLE, "cpu.max", "io.max"}


def _int(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Int64, strict=False)


def _cpu_long(df: pl.DataFrame) -> pl.DataFrame:
    """Long rows (line_no, ts, cgroup, column, value) for cgroup_cpu."""
    m = pl.DataFrame(
        [
            {"file": f, "key": k if k is not None else f, "column": c, "mul": mul, "div": div}
            for (f, k), (c, mul, div) in CPU_MAP.items()
        ]
    )
    j = df.with_columns(key=pl.coalesce("key", "file")).join(
        m, on=["file", "key"], how="inner", maintain_order="left"
    )
    return j.select(
        "line_no",
        "ts",
        "cgroup",
        "column",
        value=_int(pl.col("val")) * pl.col("mul") // pl.col("div"),
    )


def _known_cpu_key(file: pl.Expr, key: pl.Expr) -> pl.Expr:
    """True when (file, key) of a keyed cpu file is in :data:`CPU_MAP`."""
    ok = pl.lit(False)
    for f in ("cpu.stat", "cpuacct.stat"):
        keys = [k for (ff, k) in CPU_MAP if ff == f]
        ok = ok | ((file == f) & key.is_in(keys))
    return ok


def _wide(long: pl.DataFrame, index: list[str], columns: list[str]) -> pl.DataFrame:
    """Pivot (line_no, index..., column, value), in line order, to one row per index: its
    first line_no and, per column, the value of its last line; rows in line order.

    The sampler writes the lines of one index together, so the work is per run of equal
    indexes (runs of one index, wherever they are, join its row), then a numpy scatter.
    """
    if long.is_empty():
        schema = {"line_no": pl.UInt32, **{c: long.schema[c] for c in index}}
        return pl.DataFrame(schema={**schema, **{c: pl.Int64 for c in columns if c not in schema}})
    run = long.select(pl.struct(index).rle_id()).to_series()
    starts = long.filter(run.ne_missing(run.shift(1))).with_row_index("run")  # one per run
    groups = starts.group_by(index, maintain_order=True).agg(pl.col("line_no").first(), "run")
    runs = groups.get_column("run")
    of_run = np.empty(starts.height, dtype=np.int64)
    of_run[runs.explode().to_numpy()] = np.repeat(np.arange(groups.height), runs.list.len())
    names = long.get_column("column").unique(maintain_order=True).to_list()
    cells = long.select(
        row=pl.Series(of_run[run.to_numpy()]),
        col=pl.col("column").cast(pl.Enum(names)).to_physical(),
        value=pl.col("value").fill_null(0),
        null=pl.col("value").is_null(),
    ).filter(pl.struct("row", "col").is_last_distinct())
    r, c = cells["row"].to_numpy(), cells["col"].to_numpy()
    values = np.zeros((groups.height, len(names)), dtype=np.int64)
    nulls = np.ones((groups.height, len(names)), dtype=bool)
    values[r, c], nulls[r, c] = cells["value"].to_numpy(), cells["null"].to_numpy()
    out = groups.select("line_no", *index).with_columns(
        pl.when(pl.Series(nulls[:, j])).then(None).otherwise(pl.Series(values[:, j])).alias(name)
        for j, name in enumerate(names)
    )
    missing = [c for c in columns if c not in out.columns]
    return out.with_columns(pl.lit(None, pl.Int64).alias(c) for c in missing)


def _deltas(
    df: pl.DataFrame, need: list[str], exprs: dict[str, pl.Expr], prev: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, int, pl.DataFrame]:
    """Per-interval derived columns on rows where ``need`` are non-NULL, per cgroup in ts order.

    ``exprs`` may use ``d_<col>`` (difference to the previous sample) and ``dt_s``. Values
    are NULL on the first sample, when ts is unknown, and on a counter reset (any
    ``d_<col>`` < 0), whose count is returned. ``prev`` holds the last sample of each
    cgroup before ``df`` (an earlier chunk); the new one is returned third.
    """
    cols = ["line_no", "ts", "cgroup", *need]
    sub = df.filter(
        pl.all_horizontal(pl.col(c).is_not_null() for c in need) & pl.col("ts").is_not_null()
    ).select(cols)
    carried = prev is not None and prev.height > 0
    if carried:
        sub = pl.concat([prev.with_columns(_carry=True), sub.with_columns(_carry=False)])
    sub = sub.sort(["cgroup", "ts", "line_no"], nulls_last=True).with_columns(
        *((pl.col(c) - pl.col(c).shift(1).over("cgroup")).alias(f"d_{c}") for c in need),
        dt_s=(pl.col("ts") - pl.col("ts").shift(1).over("cgroup")).dt.total_microseconds() / 1e6,
    )
    last = sub.unique("cgroup", keep="last", maintain_order=True).select(cols)
    if carried:
        sub = sub.filter(~pl.col("_carry"))
    reset = pl.any_horizontal(pl.col(f"d_{c}") < 0 for c in need)
    resets = int(sub.select(reset.sum()).item() or 0)
    ok = ~reset.fill_null(True) & (pl.col("dt_s") > 0)
    sub = sub.select("line_no", *(pl.when(ok).then(e).alias(n) for n, e in exprs.items()))
    return df.join(sub, on="line_no", how="left", maintain_order="left"), resets, last


def _shares_to_weight(shares: pl.Expr) -> pl.Expr:
    """cgroup v1 cpu.shares -> v2 cpu.weight: 1 + ((shares - 2) * 9999) / 262142 (integer)."""
    s = shares.clip(2, 262144)
    return pl.when(shares == 0).then(0).otherwise(1 + ((s - 2) * 9999) // 262142)


def _limits(df: pl.DataFrame) -> pl.DataFrame:
    """cgroup_limits rows from single-value limit files, cpu.max and io.max."""
    m = pl.DataFrame(
        [{"file": f, "nkey": k, "kind": kind} for f, (k, kind) in LIMIT_SINGLE.items()]
    )
    s = df.filter(pl.col("key").is_null()).join(m, on="file", how="inner")
    v, kind, at = _int(pl.col("val")), pl.col("kind"), ("line_no", "ts", "cgroup")
    unlimited = (
        (pl.col("val") == "max")
        | ((kind == "bytes") & (v >= UNLIMITED_BYTES))
        | ((kind == "quota") & (v < 0))
    )
    value = pl.when(unlimited).then(None).when(kind == "shares").then(_shares_to_weight(v))
    none = pl.lit(None, pl.Utf8)
    parts = [
        s.select(
            *at, key="nkey", value=value.otherwise(v), unlimited=unlimited, device=none
        ).with_columns(source_key=s.get_column("file"))
    ]
    c = df.filter(pl.col("file") == "cpu.max")
    for key, col in (("cpu.quota_us", "val"), ("cpu.period_us", "val2")):
        x = pl.col(col)
        parts.append(
            c.filter(x.is_not_null())
            .select(*at, key=pl.lit(key), value=_int(x), unlimited=x == "max", device=none)
            .with_columns(source_key=pl.lit("cpu.max"))
        )
    io = df.filter(pl.col("file") == "io.max")
    for k in IO_MAX_KEYS:
        x = pl.col("kv").str.extract(rf"(?:^|\s){k}=(\S+)", 1)
        parts.append(
            io.filter(x.is_not_null())
            .select(
                *at, key=pl.lit(f"io.max.{k}"), value=_int(x), unlimited=x == "max", device="device"
            )
            .with_columns(source_key=pl.lit("io.max"))
        )
    return pl.concat(parts, how="vertical_relaxed").sort("line_no")


def _memory_long(df: pl.DataFrame) -> pl.DataFrame:
    """Long rows for cgroup_memory: single-value files and memory.events / oom_control, in
    line order (a column two lines of one sample fill takes the later line's value)."""
    m = pl.DataFrame({"file": list(MEM_SINGLE), "column": list(MEM_SINGLE.values())})
    s = df.filter(pl.col("key").is_null()).join(m, on="file", how="inner")
    v = _int(pl.col("val"))
    is_limit = pl.col("column").is_in(["max_bytes", "high_bytes", "swap_max_bytes"])
    single = s.select(
        "line_no",
        "ts",
        "cgroup",
        "column",
        value=pl.when(is_limit & ((pl.col("val") == "max") | (v >= UNLIMITED_BYTES)))
        .then(None)
        .otherwise(v),
    )
    ev = df.filter((pl.col("file") == "memory.events") & pl.col("key").is_in(MEM_EVENTS)).select(
        "line_no",
        "ts",
        "cgroup",
        column=pl.lit("events_") + pl.col("key"),
        value=_int(pl.col("val")),
    )
    oc = df.filter(
        (pl.col("file") == "memory.oom_control") & pl.col("key").is_in(["oom_kill", "under_oom"])
    ).select(
        "line_no",
        "ts",
        "cgroup",
        column=pl.when(pl.col("key") == "oom_kill")
        .then(pl.lit("events_oom_kill"))
        .otherwise(pl.lit("under_oom")),
        value=_int(pl.col("val")),
    )
    return pl.concat([single, ev, oc], how="vertical_relaxed").sort("line_no")


def _io_rows(df: pl.DataFrame) -> pl.DataFrame:
    """cgroup_io rows: io.stat lines (wide already) plus v1 blkio lines pivoted."""
    st = df.filter(pl.col("file") == "io.stat").select(
        "line_no",
        "ts",
        "cgroup",
        "device",
        *(_int(pl.col("kv").str.extract(rf"(?:^|\s){k}=(\d+)", 1)).alias(k) for k in IO_KEYS),
    )
    bm = pl.DataFrame(
        [{"op": op, "kind": kind, "column": col} for (kind, op), col in BLKIO_MAP.items()]
    )
    b = (
        df.filter(pl.col("file").str.starts_with("blkio."))
        .with_columns(
            kind=pl.col("file").str.extract(r"^blkio\.throttle\.(io_service_bytes|io_serviced)", 1)
        )
        .join(bm, left_on=["key", "kind"], right_on=["op", "kind"], maintain_order="left")
        .select("line_no", "ts", "cgroup", "device", "column", value=_int(pl.col("val")))
    )
    bw = _wide(b, ["ts", "cgroup", "device"], list(IO_KEYS)) if b.height else None
    parts = [st] if bw is None else [st, bw]
    return pl.concat(parts, how="diagonal_relaxed").sort("line_no")
