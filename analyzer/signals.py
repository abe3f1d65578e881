"""Stage 5, *signals*: one wide table on a common 1-second grid, built in DuckDB SQL.

Each group of columns comes from the first source table (in a fixed preference order)
that exists and has rows; `signal_sources` records which table fed which column. A
column whose sources are all missing is NULL (never 0). Rows flagged ``since_boot`` are
excluded. Nothing is interpolated.

Time attribution: a source sampled every ``step`` seconds (its median spacing) covers
its interval: the sample stamped ``t`` (interval-end stamp, as vmstat/iostat/mpstat/
bpftrace print them) is attributed to every grid second in ``(t - step, t]``. A 10 s
run-queue histogram therefore fills ten seconds, and ``runqlat_interval_s`` says so. A
missed sample (a gap longer than the step) is not filled: those seconds stay NULL and
the `sampling_gap` detector reports them. Several samples in one second are averaged.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import polars as pl

from analyzer import sqlmacros
from analyzer._signal_sql import GROUPS, WITH_INTERVAL, Alt
from analyzer.parsers.base import TS, table

F = pl.Float64
SIGNALS = table(
    "One row per second of the capture: every signal the detectors use, NULL where its source is missing.",
    (
        "ts",
        TS,
        "UTC",
        "the second [ts, ts+1 s); holds the samples stamped in [ts, ts + step) (a sample stamped t fills the step seconds up to t)",
    ),
    (
        "cpu_busy_pct",
        F,
        "%",
        "100 − idle − iowait (mpstat all, else sar -u, vmstat, iostat avg-cpu)",
    ),
    ("cpu_user_pct", F, "%", "user + nice CPU time"),
    ("cpu_sys_pct", F, "%", "kernel CPU time including irq and softirq"),
    ("iowait_pct", F, "%", "idle with outstanding I/O (hidden when CPUs are busy)"),
    ("steal_pct", F, "%", "time stolen by the hypervisor"),
    ("irq_soft_max_cpu_pct", F, "%", "max over CPUs of %irq + %soft (mpstat -P ALL)"),
    ("runq", F, "tasks", "runnable tasks (vmstat r, else sar -q runq-sz)"),
    ("blocked", F, "tasks", "tasks in uninterruptible sleep (vmstat b, else sar -q blocked)"),
    ("cpus", pl.Int32, "count", "logical CPUs (bundle, else mpstat CPU count)"),
    ("cs_per_s", F, "1/s", "context switches per second (vmstat cs, else sar -w)"),
    ("mem_available_kb", F, "kB", "MemAvailable (meminfo, else sar -r kbavail)"),
    ("dirty_kb", F, "kB", "Dirty page cache waiting for writeback (meminfo, else sar -r kbdirty)"),
    ("writeback_kb", F, "kB", "pages under writeback (meminfo Writeback)"),
    (
        "page_cache_growth_kb_s",
        F,
        "kB/s",
        "change of Dirty + Writeback since the previous meminfo sample, per second between them (sar -r: kbdirty)",
    ),
    ("swap_in_kb_s", F, "kB/s", "swap-in (vmstat si, else pswpin × 4 kB)"),
    ("swap_out_kb_s", F, "kB/s", "swap-out (vmstat so, else pswpout × 4 kB)"),
    (
        "pgscan_per_s",
        F,
        "pages/s",
        "pages scanned for reclaim, all reclaimers: max(kswapd + direct + khugepaged + proactive, anon + file), so memory-cgroup limit reclaim counts (/proc/vmstat, else sar -B kswapd + direct)",
    ),
    (
        "pgscan_direct_per_s",
        F,
        "pages/s",
        "pages scanned by global direct reclaim (allocating tasks stalled; not cgroup limit reclaim)",
    ),
    (
        "pgscan_kswapd_per_s",
        F,
        "pages/s",
        "pages scanned by kswapd (background global reclaim: free memory below the low watermark)",
    ),
    (
        "pgsteal_per_s",
        F,
        "pages/s",
        "pages reclaimed per second, all reclaimers (as pgscan_per_s)",
    ),
    ("pgmajfault_per_s", F, "1/s", "major page faults per second"),
    ("refault_per_s", F, "pages/s", "workingset refaults (evicted pages needed again)"),
    ("psi_cpu_some_pct", F, "%", "system CPU pressure some (stall_pct, else avg10)"),
    ("psi_mem_some_pct", F, "%", "system memory pressure some"),
    ("psi_mem_full_pct", F, "%", "system memory pressure full"),
    ("psi_io_some_pct", F, "%", "system I/O pressure some"),
    ("psi_io_full_pct", F, "%", "system I/O pressure full"),
    (
        "disk_read_kb_s",
        F,
        "kB/s",
        "read throughput summed over whole disks (no partitions, dm, md, loop, zram)",
    ),
    ("disk_write_kb_s", F, "kB/s", "write throughput summed over whole disks"),
    ("disk_util_max_pct", F, "%", "max over disks of %util"),
    ("disk_w_await_max_ms", F, "ms", "max over disks of w_await (await on old sysstat)"),
    ("disk_aqu_sz_max", F, "requests", "max over disks of the average queue size"),
    ("net_rx_kb_s", F, "kB/s", "received over all interfaces but lo (sar -n DEV)"),
    ("net_tx_kb_s", F, "kB/s", "transmitted over all interfaces but lo"),
    ("net_drop_per_s", F, "1/s", "rx + tx drops over all interfaces but lo (sar -n EDEV)"),
    ("net_err_per_s", F, "1/s", "rx/tx errors, frame, FIFO and carrier errors (sar -n EDEV)"),
    ("gpu_count", pl.Int32, "count", "GPUs reporting in this second (nvidia-smi dmon)"),
    ("gpu_util_mean_pct", F, "%", "mean SM utilisation over GPUs"),
    ("gpu_util_min_pct", F, "%", "min SM utilisation over GPUs"),
    ("gpu_power_w", F, "W", "power draw summed over GPUs"),
    ("gpu_temp_max_c", F, "C", "max GPU temperature"),
    ("gpu_sm_clock_min_mhz", F, "MHz", "min SM (processor) clock over GPUs"),
    ("gpu_pviol_max_pct", F, "%", "max over GPUs of the power-violation share"),
    ("gpu_tviol_any", F, "0/1", "1 when any GPU flagged a thermal violation"),
    ("gpu_mem_used_mib", F, "MiB", "frame-buffer memory used, summed over GPUs"),
    ("throttled_pct", F, "%", "max over cgroups of Δnr_throttled/Δnr_periods × 100"),
    ("throttled_ms_per_s", F, "ms/s", "max over cgroups of throttled time per second"),
    (
        "runqlat_p99_us",
        F,
        "us",
        "run-queue latency p99 (bucket upper bound) from the runqlat histogram",
    ),
    (
        "runqlat_interval_s",
        F,
        "s",
        "length of the histogram interval the runqlat value covers (attributed to each of its seconds)",
    ),
    (
        "biolat_p99_us",
        F,
        "us",
        "block I/O latency p99 (bucket upper bound) from the biolat histogram, all disks",
    ),
    ("biolat_interval_s", F, "s", "length of the histogram interval the biolat value covers"),
)

SIGNAL_SOURCES = table(
    "One row per signals column: which source table fed it and at what sampling step (NULL table = missing).",
    ("signal", pl.String, "", "signals column"),
    ("source_table", pl.String, "", "table the values came from; NULL when no source exists"),
    (
        "step_s",
        pl.Float64,
        "s",
        "the source's sampling step (median spacing); a sample covers that many seconds",
    ),
    ("note", pl.String, "", "how it was derived, or which tables would have fed it"),
)


def _materialise(con: duckdb.DuckDBPyConnection, group: str, alt: Alt) -> str | None:
    """Run ``alt``'s aggregation once into a temporary table; its name, or None when
    the source is absent or has no timed row (the next alternative is tried then).

    The per-second aggregates are small (one row per sample time) while their sources
    can be tens of millions of rows: the step, the span and the join below all read the
    temporary table instead of aggregating the source again.
    """
    exists = con.sql(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", params=[alt.table]
    ).fetchall()[0][0]
    if not exists:
        return None
    name = f"_signal_{group}"
    try:
        con.sql(f"CREATE OR REPLACE TEMP TABLE {name} AS {alt.sql}")
    except duckdb.Error:  # a column the query needs is absent in this store
        return None
    if con.sql(f"SELECT count(*) FROM {name} WHERE sec IS NOT NULL").fetchall()[0][0] > 0:
        return name
    con.sql(f"DROP TABLE {name}")
    return None


# A sample describes at most this many seconds before it (10 s histograms, 1–60 s
# samplers); broken clocks must not make one sample cover years of grid.
MAX_STEP_S = 600


def _expanded(sql: str, cols: tuple[str, ...], with_interval: bool) -> str:
    """Per-second rows of ``sql`` spread over the seconds each sample covers."""
    values = [c for c in cols if not (with_interval and c.endswith("_interval_s"))]
    inner = ", ".join(f"c{i} AS {c}" for i, c in enumerate(values))
    renamed = f"SELECT * FROM ({sql}) AS q(sec, {', '.join(f'c{i}' for i in range(len(values)))})"
    agg = ", ".join(f"avg({c}) AS {c}" for c in values)
    extra = f", max(step)::DOUBLE AS {cols[-1]}" if with_interval else ""
    return f"""(
        WITH p AS ({renamed}),
        st AS (SELECT coalesce(least(greatest(1, round(median(d))), {MAX_STEP_S}), 1)::INT AS step FROM (
                 SELECT epoch(sec) - epoch(lag(sec) OVER (ORDER BY sec)) AS d FROM p)),
        x AS (SELECT unnest(generate_series(p.sec - to_seconds(st.step - 1), p.sec, INTERVAL 1 SECOND)) AS ts,
                     st.step AS step, {inner} FROM p, st WHERE p.sec IS NOT NULL)
        SELECT ts, {agg}{extra} FROM x GROUP BY ts)"""


def build(
    con: duckdb.DuckDBPyConnection,
    start: datetime | None = None,
    end: datetime | None = None,
    cpus: int | None = None,
    notes: list[str] | None = None,
) -> pl.DataFrame:
    """Create tables ``signals`` and ``signal_sources`` in ``con`` and return signals.

    The grid runs from ``start`` to ``end`` (the capture span) truncated to seconds; when
    either is unknown, or when that window misses most of the samples (`_data_wins`), the
    span of the chosen sources is used, and ``notes`` gets a line saying so.
    """
    sqlmacros.install(con)
    chosen: list[tuple[str, str]] = []  # group, temporary table of its aggregates
    source_rows = []
    for group, (cols, alts) in GROUPS.items():
        found = next(((a, t) for a in alts if (t := _materialise(con, group, a))), None)
        if found is None:
            wanted = " or ".join(dict.fromkeys(a.table for a in alts))
            source_rows += [(c, None, None, f"missing: needs {wanted}") for c in cols]
            continue
        alt, temp = found
        chosen.append((group, temp))
        step = con.sql(
            f"SELECT coalesce(least(greatest(1, round(median(d))), {MAX_STEP_S}), 1) FROM (SELECT epoch(sec) - epoch(lag(sec) OVER (ORDER BY sec)) AS d FROM (SELECT DISTINCT sec FROM {temp} WHERE sec IS NOT NULL))"
        ).fetchall()[0][0]
        source_rows += [(c, alt.table, float(step), alt.note or None) for c in cols]
    if cpus is None:
        cpus = _cpu_count(con)
    source_rows.append(("cpus", "bundle" if cpus else None, None, "bundle.cpus, else mpstat CPUs"))

    subs = {g: _expanded(f"SELECT * FROM {t}", GROUPS[g][0], g in WITH_INTERVAL) for g, t in chosen}
    start, end = _data_wins(con, [t for _g, t in chosen], start, end, notes)
    lo, hi = _span(con, subs, start, end, [t for _g, t in chosen])
    con.sql("DROP TABLE IF EXISTS signals")
    con.sql("DROP TABLE IF EXISTS signal_sources")
    joins = "".join(f" LEFT JOIN {sql} AS g_{g} ON g_{g}.ts = grid.ts" for g, sql in subs.items())
    have = {c: f"g_{g}.{c}" for g in subs for c in GROUPS[g][0]}
    select = []
    for col in SIGNALS.columns[1:]:
        expr = have.get(col.name, "NULL")
        if col.name == "cpus":
            expr = str(int(cpus)) if cpus else "NULL"
        sql_type = "INTEGER" if col.dtype == pl.Int32 else "DOUBLE"
        select.append(f"CAST({expr} AS {sql_type}) AS {col.name}")
    if lo is None:
        con.sql(
            f"CREATE TABLE signals AS SELECT NULL::TIMESTAMPTZ AS ts, {', '.join(select)} LIMIT 0"
        )
    else:
        grid = "(SELECT unnest(generate_series($lo::TIMESTAMPTZ, $hi::TIMESTAMPTZ, INTERVAL 1 SECOND)) AS ts)"
        con.sql(
            f"CREATE TABLE signals AS SELECT grid.ts, {', '.join(select)} FROM {grid} AS grid{joins} ORDER BY grid.ts",
            params={"lo": lo, "hi": hi},
        )
    frame = pl.DataFrame(source_rows, schema=list(SIGNAL_SOURCES.schema.items()), orient="row")
    con.register("_signal_sources", frame.to_arrow())
    con.sql("CREATE TABLE signal_sources AS SELECT * FROM _signal_sources")
    con.unregister("_signal_sources")
    for _group, temp in chosen:
        con.sql(f"DROP TABLE IF EXISTS {temp}")
    return SIGNALS.conform(con.sql("SELECT * FROM signals ORDER BY ts").pl()).collect()


#: Below this share of the sample seconds inside the manifest's window, the data wins.
MIN_IN_WINDOW = 0.5
WINDOW_SLACK = timedelta(seconds=5)  # collectors start and stop around the manifest's times


def _data_wins(
    con: duckdb.DuckDBPyConnection,
    samples: list[str],
    start: datetime | None,
    end: datetime | None,
    notes: list[str] | None,
) -> tuple[datetime | None, datetime | None]:
    """``start``..``end`` (the manifest's window), unless fewer than `MIN_IN_WINDOW` of the
    sources' sample seconds lie inside it: then the data's own span (None, None) — a
    clock that moved, a manifest edited by hand. The host's sysstat history (rows from
    before the capture) is a minority of the samples of any capture, so it does not count.
    """
    if start is None or end is None or not samples:
        return start, end
    union = " UNION ALL ".join(f"SELECT sec FROM {t} WHERE sec IS NOT NULL" for t in samples)
    n, inside, lo, hi = con.sql(
        f"SELECT count(*), count(*) FILTER (WHERE sec >= $lo AND sec <= $hi), min(sec), max(sec) "
        f"FROM (SELECT DISTINCT sec FROM ({union}))",
        params={"lo": start - WINDOW_SLACK, "hi": end + WINDOW_SLACK},
    ).fetchall()[0]
    if not n or inside >= MIN_IN_WINDOW * n:
        return start, end
    if notes is not None:
        notes.append(
            f"the manifest's capture window ({start:%Y-%m-%d %H:%M:%S}–{end:%H:%M:%S} UTC) holds "
            f"{inside} of the {n} sample seconds ({lo:%Y-%m-%d %H:%M:%S}–{hi:%Y-%m-%d %H:%M:%S} UTC): "
            "the data's own span is analysed"
        )
    return None, None


# The manifest accepts captures of up to 8 days; a longer grid means broken timestamps.
MAX_GRID = timedelta(days=8)


def _span(
    con: duckdb.DuckDBPyConnection,
    subs: dict[str, str],
    start: datetime | None,
    end: datetime | None,
    samples: list[str] | None = None,
) -> tuple[datetime | None, datetime | None]:
    """The grid's first and last second: ``start``..``end``, else the sources' span;
    at most `MAX_GRID` long. ``samples``: the temporary tables of the sources' sample
    times (``sec``), for the median sample time."""
    if start is None or end is None:
        if not subs:
            return (None, None) if start is None or end is None else (start, end)
        union = " UNION ALL ".join(
            f"SELECT min(ts) AS lo, max(ts) AS hi FROM {s}" for s in subs.values()
        )
        lo, hi = con.sql(f"SELECT min(lo), max(hi) FROM ({union})").fetchall()[0]
        start, end = start or lo, end or hi
    if start is None or end is None:
        return None, None
    lo, hi = con.sql(
        "SELECT date_trunc('second', $lo::TIMESTAMPTZ), date_trunc('second', $hi::TIMESTAMPTZ)",
        params={"lo": start, "hi": end},
    ).fetchall()[0]
    hi = max(lo, hi)
    if hi - lo > MAX_GRID and subs:
        # Hostile or broken clocks (samples years apart): keep the grid bounded, centred
        # on the median sample time, where the real capture is. Over the samples, not
        # their per-second expansion: an exact median holds all its values in memory, and
        # 28 days of 10-minute sar samples expand to 24 M seconds (out of memory at 512 MB).
        tables = samples or []
        union = " UNION ALL ".join(f"SELECT sec AS ts FROM {t}" for t in tables)
        mid = (
            con.sql(f"SELECT quantile_disc(ts, 0.5) FROM ({union})").fetchall()[0][0]
            if tables
            else None
        )
        if mid is not None:
            lo = max(lo, mid - MAX_GRID / 2)
            hi = min(hi, lo + MAX_GRID)
    return lo, hi


def _cpu_count(con: duckdb.DuckDBPyConnection) -> int | None:
    for sql in (
        "SELECT max(cpus) FROM bundle",
        "SELECT count(DISTINCT cpu) FROM mpstat_cpu WHERE cpu >= 0",
        "SELECT count(DISTINCT cpu) FROM sar_cpu WHERE cpu >= 0",
    ):
        try:
            n = con.sql(sql).fetchall()[0][0]
        except duckdb.Error:
            continue
        if n:
            return int(n)
    return None
