"""Vocabulary and table building for the cgroup parser (see ``cgroup.py``).

Input of every builder: the tokenized line frame of ``cgroup.py`` with columns
``line_no, ts, cgroup, file, key, val, val2, device, kv`` (strings except ts), already
filtered to parsed lines. Each builder returns one frame ready for ``Table.conform``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

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

SINGLE_FILES = tuple(
    sorted(
        {
            *MEM_SINGLE,
            *LIMIT_SINGLE,
            "cpuacct.usage",
            "cpuacct.usage_user",
            "cpuacct.usage_sys",
        }
    )
)
KEYED_FILES = ("cpu.stat", "cpuacct.stat", *MEM_KEYED)
BLKIO_FILES = tuple(
    f"blkio.throttle.{s}{r}"
    for s in ("io_service_bytes", "io_serviced")
    for r in ("", "_recursive")
)
ALL_FILES = (*SINGLE_FILES, *KEYED_FILES, "cpu.max", "io.stat", "io.max", *BLKIO_FILES)


def _int(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Int64, strict=False)


def cpu_long(df: pl.DataFrame) -> pl.DataFrame:
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


def known_cpu_key(file: pl.Expr, key: pl.Expr) -> pl.Expr:
    """True when (file, key) of a keyed cpu file is in :data:`CPU_MAP`."""
    ok = pl.lit(False)
    for f in ("cpu.stat", "cpuacct.stat"):
        keys = [k for (ff, k) in CPU_MAP if ff == f]
        ok = ok | ((file == f) & key.is_in(keys))
    return ok


def wide(long: pl.DataFrame, index: list[str], columns: list[str]) -> pl.DataFrame:
    """Pivot (line_no, index..., column, value), in line order, to one row per index: its
    first line_no and, per column, the value of its last line; rows in line order."""
    if long.is_empty():
        schema = {"line_no": pl.UInt32, **{c: long.schema[c] for c in index}}
        return pl.DataFrame(schema={**schema, **{c: pl.Int64 for c in columns if c not in schema}})
    run = long.select(pl.struct(index).rle_id()).to_series()
    heads = long.filter((run != run.shift(1)).fill_null(True)).select("line_no", *index)
    if heads.select(pl.struct(index).n_unique()).item() != heads.height:
        first = long.group_by(index, maintain_order=True).agg(pl.col("line_no").min())
        piv = long.pivot(on="column", index=index, values="value", aggregate_function="last")
        out = first.join(piv, on=index, how="left", nulls_equal=True).sort("line_no")
        missing = [c for c in columns if c not in out.columns]
        return out.with_columns(pl.lit(None, pl.Int64).alias(c) for c in missing)
    # the lines of each index are contiguous (the sampler's order): a numpy scatter
    names = long.get_column("column").unique(maintain_order=True).to_list()
    cells = long.select(
        run=run,
        col=pl.col("column").cast(pl.Enum(names)).to_physical(),
        value=pl.col("value").fill_null(0),
        null=pl.col("value").is_null(),
    ).filter(pl.struct("run", "col").is_last_distinct())
    r, c = cells["run"].to_numpy(), cells["col"].to_numpy()
    values = np.zeros((heads.height, len(names)), dtype=np.int64)
    nulls = np.ones((heads.height, len(names)), dtype=bool)
    values[r, c], nulls[r, c] = cells["value"].to_numpy(), cells["null"].to_numpy()
    out = heads.with_columns(
        pl.when(pl.Series(nulls[:, j])).then(None).otherwise(pl.Series(values[:, j])).alias(name)
        for j, name in enumerate(names)
    )
    missing = [c for c in columns if c not in out.columns]
    return out.with_columns(pl.lit(None, pl.Int64).alias(c) for c in missing)


def deltas(
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


def shares_to_weight(shares: pl.Expr) -> pl.Expr:
    """cgroup v1 cpu.shares -> v2 cpu.weight: 1 + ((shares - 2) * 9999) / 262142 (integer)."""
    s = shares.clip(2, 262144)
    return pl.when(shares == 0).then(0).otherwise(1 + ((s - 2) * 9999) // 262142)


def limits(df: pl.DataFrame) -> pl.DataFrame:
    """cgroup_limits rows from single-value limit files, cpu.max and io.max."""
    parts = []
    m = pl.DataFrame(
        [{"file": f, "nkey": k, "kind": kind} for f, (k, kind) in LIMIT_SINGLE.items()]
    )
    s = df.filter(pl.col("key").is_null()).join(m, on="file", how="inner")
    v = _int(pl.col("val"))
    unlimited = (
        (pl.col("val") == "max")
        | ((pl.col("kind") == "bytes") & (v >= UNLIMITED_BYTES))
        | ((pl.col("kind") == "quota") & (v < 0))
    )
    parts.append(
        s.select(
            "line_no",
            "ts",
            "cgroup",
            key=pl.col("nkey"),
            value=pl.when(unlimited)
            .then(None)
            .when(pl.col("kind") == "shares")
            .then(shares_to_weight(v))
            .otherwise(v),
            unlimited=unlimited,
            device=pl.lit(None, pl.Utf8),
            source_key=pl.col("file"),
        )
    )
    c = df.filter(pl.col("file") == "cpu.max")
    for key, col in (("cpu.quota_us", "val"), ("cpu.period_us", "val2")):
        parts.append(
            c.filter(pl.col(col).is_not_null()).select(
                "line_no",
                "ts",
                "cgroup",
                key=pl.lit(key),
                value=_int(pl.col(col)),
                unlimited=pl.col(col) == "max",
                device=pl.lit(None, pl.Utf8),
                source_key=pl.lit("cpu.max"),
            )
        )
    io = df.filter(pl.col("file") == "io.max")
    for k in IO_MAX_KEYS:
        tokv = pl.col("kv").str.extract(rf"(?:^|\s){k}=(\S+)", 1)
        parts.append(
            io.filter(tokv.is_not_null()).select(
                "line_no",
                "ts",
                "cgroup",
                key=pl.lit(f"io.max.{k}"),
                value=_int(tokv),
                unlimited=tokv == "max",
                device=pl.col("device"),
                source_key=pl.lit("io.max"),
            )
        )
    return pl.concat(parts, how="vertical_relaxed").sort("line_no")


def memory_long(df: pl.DataFrame) -> pl.DataFrame:
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


def io_rows(df: pl.DataFrame) -> pl.DataFrame:
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
        .join(bm, left_on=["key", "kind"], right_on=["op", "kind"], how="inner")
        .select("line_no", "ts", "cgroup", "device", "column", value=_int(pl.col("val")))
    )
    bw = wide(b, ["ts", "cgroup", "device"], list(IO_KEYS)) if b.height else None
    parts = [st] if bw is None else [st, bw]
    return pl.concat(parts, how="diagonal_relaxed").sort("line_no")
