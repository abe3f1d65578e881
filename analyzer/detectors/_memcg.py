"""Memory cgroups against their limits, per cgroup and second; host reclaim by counter.

`frame` builds one row per (cgroup, grid second) from ``cgroup_memory`` (usage, peak,
v2 memory.max / memory.high / memory.swap.current, v1 ``failcnt``, v2 ``memory.events``
high + max, oom_kill), ``cgroup_memory_stat`` (v1 ``hierarchical_memory_limit``, page
cache, refaults, major faults, v2 pgsteal, v1 swap) and per-cgroup memory PSI (``psi``
rows of a cgroup directory).
Counters become per-second rates between consecutive samples, spread over the seconds
between them like `analyzer.signals` spreads a sample over its step. Limits missing
from the samples come from the ``cgroup_limits`` table or the limit snapshot
(``host_config`` rows of ``snap/cgroup_limits.*.out``).

Cgroup paths are spelled as the kernel log spells ``task_memcg=`` / ``oom_memcg=``:
below ``/sys/fs/cgroup``, the v1 controller mount removed, a leading ``/``, no trailing
``/``, the root ``/`` (`cgroup_path`; the OOM finding's ``impact["memcg"]`` uses it too).

`reclaim_by_key` is the host's reclaim over a window from every ``pgscan_*`` /
``pgsteal_*`` key of /proc/vmstat: the kernel counts memory-cgroup limit reclaim under
``pgscan_anon``/``pgscan_file`` (and the memcg's own memory.stat) but not under
``pgscan_kswapd``/``pgscan_direct``, so the total is max(kswapd + direct + khugepaged +
proactive, anon + file) and the difference is limit reclaim.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from analyzer.detectors._base import Context
from analyzer.parsers.cgroup import CGROUP_RE

#: a v1 limit at or above this is "no limit" (the kernel prints PAGE_COUNTER_MAX pages)
UNLIMITED_BYTES = 2**62
#: one sample's rate covers at most this many seconds before it (a longer gap stays empty)
MAX_SPREAD_S = 60
PAGE_BYTES = 4096  # x86-64 / most arm64 kernels; refaults and reclaim are counted in pages
MIB = 2**20

# Per (cgroup, second) of cgroup_memory: usage, limits, limit-hit and OOM counters.
_USAGE = """SELECT coalesce(nullif(rtrim(cgroup, '/'), ''), '/') AS cgroup, second_of(ts) AS sec,
       max(epoch(ts)) AS t, max(current_bytes) AS usage, max(peak_bytes) AS peak, max(swap_current_bytes) AS swap_cur,
       max(max_bytes) AS lim, max(high_bytes) AS high,
       max(failcnt) AS failcnt,
       max(coalesce(events_max, 0) + coalesce(events_high, 0)) FILTER (events_max IS NOT NULL OR events_high IS NOT NULL) AS ev,
       max(events_high) AS ev_high, max(events_oom_kill) AS oom_kill
FROM cgroup_memory WHERE ts IS NOT NULL GROUP BY 1, 2"""
# ... of memory.stat: the v1 effective limit, page cache, refaults, major faults, v2 pgsteal.
_STAT = """SELECT coalesce(nullif(rtrim(cgroup, '/'), ''), '/') AS cgroup, second_of(ts) AS sec,
       max(value) FILTER (key = 'hierarchical_memory_limit') AS hlim,
       coalesce(max(value) FILTER (key = 'total_cache'), max(value) FILTER (key = 'cache'), max(value) FILTER (key = 'file')) AS cache,
       coalesce(max(value) FILTER (key = 'workingset_refault_file'), max(value) FILTER (key = 'workingset_refault')) AS rf_file,
       max(value) FILTER (key = 'workingset_refault_anon') AS rf_anon,
       coalesce(max(value) FILTER (key = 'total_pgmajfault'), max(value) FILTER (key = 'pgmajfault')) AS majfaults,
       max(value) FILTER (key = 'pgsteal') AS steal,
       coalesce(max(value) FILTER (key = 'total_swap'), max(value) FILTER (key = 'swap')) AS swap
FROM cgroup_memory_stat WHERE ts IS NOT NULL AND file = 'memory.stat' GROUP BY 1, 2"""
_NO_STAT = """SELECT NULL::VARCHAR AS cgroup, NULL::TIMESTAMPTZ AS sec, NULL::BIGINT AS hlim, NULL::BIGINT AS cache,
       NULL::BIGINT AS rf_file, NULL::BIGINT AS rf_anon, NULL::BIGINT AS majfaults, NULL::BIGINT AS steal, NULL::BIGINT AS swap LIMIT 0"""
# ... of the cgroup's own memory.pressure (cgroup v2; the psi source is its directory).
_PSI = """SELECT coalesce(nullif(rtrim(CASE WHEN source LIKE '/sys/fs/cgroup%' THEN regexp_extract(source, $re, 1) ELSE source END, '/'), ''), '/') AS cgroup,
       second_of(ts) AS sec,
       avg(coalesce(stall_pct, avg10_pct)) FILTER (kind = 'some') AS psi_some,
       avg(coalesce(stall_pct, avg10_pct)) FILTER (kind = 'full') AS psi_full
FROM psi WHERE ts IS NOT NULL AND resource = 'memory' AND source IS NOT NULL AND source <> 'system' GROUP BY 1, 2"""
_NO_PSI = """SELECT NULL::VARCHAR AS cgroup, NULL::TIMESTAMPTZ AS sec, NULL::DOUBLE AS psi_some,
       NULL::DOUBLE AS psi_full, $re AS unused LIMIT 0"""
# Rates between consecutive samples of a cgroup (NULL after a counter reset), then spread
# over the seconds since the previous sample; increments (``*_inc``) only in the sample's
# own second, so that a sum over a window is the counter's increase.
_FRAME = """WITH u AS ({usage}), s AS ({stat}), p AS ({psi}),
j AS (SELECT u.*, s.hlim, s.cache, s.rf_file, s.rf_anon, s.majfaults, s.steal, s.swap, p.psi_some, p.psi_full,
             coalesce(u.failcnt, 0) + coalesce(u.ev, 0) AS hits_c,
             u.failcnt IS NULL AND u.ev IS NULL AS no_hits
      FROM u LEFT JOIN s USING (cgroup, sec) LEFT JOIN p USING (cgroup, sec)),
r AS (SELECT *, lag(sec) OVER w AS prev, t - lag(t) OVER w AS dt,
             CASE WHEN NOT no_hits AND hits_c >= lag(hits_c) OVER w THEN hits_c - lag(hits_c) OVER w END AS hits_inc,
             CASE WHEN ev_high >= lag(ev_high) OVER w THEN ev_high - lag(ev_high) OVER w END AS high_inc,
             CASE WHEN rf_file >= lag(rf_file) OVER w THEN rf_file - lag(rf_file) OVER w END AS rf_file_inc,
             CASE WHEN rf_anon >= lag(rf_anon) OVER w THEN rf_anon - lag(rf_anon) OVER w END AS rf_anon_inc,
             CASE WHEN majfaults >= lag(majfaults) OVER w THEN majfaults - lag(majfaults) OVER w END AS majfault_inc,
             CASE WHEN steal >= lag(steal) OVER w THEN steal - lag(steal) OVER w END AS steal_inc,
             CASE WHEN oom_kill >= lag(oom_kill) OVER w THEN oom_kill - lag(oom_kill) OVER w END AS oom_inc
      FROM j WINDOW w AS (PARTITION BY cgroup ORDER BY sec)),
x AS (SELECT cgroup, sec, unnest(generate_series(
              greatest(coalesce(prev + INTERVAL 1 SECOND, sec), sec - to_seconds($spread - 1)), sec, INTERVAL 1 SECOND)) AS ts,
             * EXCLUDE (cgroup, sec) FROM r)
SELECT cgroup, ts, usage::DOUBLE AS usage_bytes, peak::DOUBLE AS peak_bytes,
       coalesce(lim, CASE WHEN hlim < $unlimited THEN hlim END)::DOUBLE AS limit_bytes,
       CASE WHEN high < $unlimited THEN high END::DOUBLE AS high_bytes, cache::DOUBLE AS cache_bytes,
       coalesce(swap_cur, swap)::DOUBLE AS swap_bytes,
       hits_inc / nullif(dt, 0) AS hits_per_s,
       (coalesce(rf_file_inc, 0) + coalesce(rf_anon_inc, 0)) / nullif(dt, 0) AS refault_per_s,
       majfault_inc / nullif(dt, 0) AS majfault_per_s, steal_inc / nullif(dt, 0) AS steal_per_s,
       high_inc / nullif(dt, 0) AS high_per_s, psi_some, psi_full,
       CASE WHEN ts = sec THEN hits_inc END AS hits_inc, CASE WHEN ts = sec THEN rf_file_inc END AS refault_file_inc,
       CASE WHEN ts = sec THEN rf_anon_inc END AS refault_anon_inc,
       CASE WHEN ts = sec THEN steal_inc END AS steal_inc, CASE WHEN ts = sec THEN oom_inc END AS oom_inc
FROM x ORDER BY cgroup, ts"""


def cgroup_path(name: str | None) -> str | None:
    """A cgroup as the kernel log spells it: ``/a/b`` (no trailing ``/``), root ``/``."""
    if name is None:
        return None
    s = str(name).strip().rstrip("/")
    return s if s.startswith("/") else "/" + s


def frame(ctx: Context) -> pl.DataFrame:
    """Per (cgroup, second): usage, limit, limit hits, refaults, cache, PSI (cached)."""
    if "memcg_frame" in ctx.cache:
        return ctx.cache["memcg_frame"]
    stat = _STAT if ctx.rows("cgroup_memory_stat") else _NO_STAT
    psi = _PSI if ctx.rows("psi") else _NO_PSI
    sql = _FRAME.format(usage=_USAGE, stat=stat, psi=psi)
    df = ctx.query(sql, {"re": CGROUP_RE, "spread": MAX_SPREAD_S, "unlimited": UNLIMITED_BYTES})
    limits = static_limits(ctx)
    if limits.height:
        df = (
            df.join(limits, on="cgroup", how="left")
            .with_columns(
                limit_bytes=pl.coalesce("limit_bytes", "static_max"),
                high_bytes=pl.coalesce("high_bytes", "static_high"),
            )
            .drop("static_max", "static_high")
        )
    df = df.with_columns(
        pl.col("ts").cast(pl.Datetime("us", "UTC")),
        usage_pct=100 * pl.col("usage_bytes") / pl.col("limit_bytes"),
    )
    ctx.cache["memcg_frame"] = df
    return df


def rows(ctx: Context, cgroup: str, lo: datetime, hi: datetime) -> pl.DataFrame:
    """`frame` rows of ``cgroup`` with ``lo <= ts < hi`` (compared as instants: the
    store's and the grid's datetimes may carry different names of UTC)."""
    us = pl.col("ts").dt.epoch("us")
    return frame(ctx).filter((pl.col("cgroup") == cgroup) & (us >= _us(lo)) & (us < _us(hi)))


def _us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000)


_LIMIT_TABLE = """SELECT coalesce(nullif(rtrim(cgroup, '/'), ''), '/') AS cgroup,
       max(value) FILTER (key = 'memory.max_bytes')::DOUBLE AS static_max,
       max(value) FILTER (key = 'memory.high_bytes')::DOUBLE AS static_high
FROM cgroup_limits WHERE NOT coalesce(unlimited, false) AND value < $unlimited GROUP BY 1"""
# "<dir>/memory.max 536870912", "<dir>/memory.limit_in_bytes 536870912" in the snapshot
_LIMIT_SNAP = """WITH l AS (SELECT regexp_extract(raw, '^(\\S+)/(memory\\.max|memory\\.high|memory\\.limit_in_bytes)\\s+(\\d+)\\s*$', ['dir', 'file', 'v']) AS m, ts
                FROM host_config WHERE source = 'cgroup_limits' AND raw IS NOT NULL),
     v AS (SELECT coalesce(nullif(rtrim(regexp_extract(m.dir, $re, 1), '/'), ''), '/') AS cgroup, m.file AS file,
                  TRY_CAST(m.v AS DOUBLE) AS v, ts FROM l WHERE m.file <> '' AND m.dir LIKE '/sys/fs/cgroup%')
SELECT cgroup, arg_max(v, coalesce(epoch(ts), 0)) FILTER (file <> 'memory.high' AND v < $unlimited) AS static_max,
       arg_max(v, coalesce(epoch(ts), 0)) FILTER (file = 'memory.high' AND v < $unlimited) AS static_high
FROM v GROUP BY 1"""


def static_limits(ctx: Context) -> pl.DataFrame:
    """cgroup -> memory.max / memory.high in bytes from ``cgroup_limits`` or the snapshot."""
    frames = []
    if ctx.rows("cgroup_limits"):
        frames.append(ctx.query(_LIMIT_TABLE, {"unlimited": UNLIMITED_BYTES}))
    if ctx.rows("host_config"):
        frames.append(ctx.query(_LIMIT_SNAP, {"re": CGROUP_RE, "unlimited": UNLIMITED_BYTES}))
    if not frames:
        return pl.DataFrame(
            schema={"cgroup": pl.String, "static_max": pl.Float64, "static_high": pl.Float64}
        )
    return (
        pl.concat(frames, how="vertical_relaxed")
        .group_by("cgroup")
        .agg(pl.col("static_max").min(), pl.col("static_high").min())
    )


# Every scan/steal counter's increase over [lo, hi): the last sample before hi minus the
# last before lo (a sample stamped t describes the second it falls in, as on the grid).
_RECLAIM = """SELECT key, arg_max(value, ts) FILTER (ts < $hi) - arg_max(value, ts) FILTER (ts < $lo) AS d
FROM proc_vmstat WHERE node IS NULL AND ts IS NOT NULL AND ts < $hi
  AND (key LIKE 'pgscan%' OR key LIKE 'pgsteal%') AND key <> 'pgscan_direct_throttle'
GROUP BY key"""


def reclaim_by_key(ctx: Context, w: tuple[datetime, datetime]) -> dict[str, Any] | None:
    """Pages scanned / reclaimed over ``w`` by /proc/vmstat key, with the totals.

    ``scan``/``steal``: max(global, by type) where global = kswapd + direct + khugepaged
    + proactive and by type = anon + file; ``limit_steal``: by type − global (reclaim of
    memory cgroups at their limits, which the global keys do not count), and its file /
    anon parts ``limit_steal_file`` / ``limit_steal_anon`` (exact when global reclaim was
    idle, else split like pgsteal_file : pgsteal_anon). None without /proc/vmstat.
    """
    if not ctx.rows("proc_vmstat"):
        return None
    df = ctx.query(_RECLAIM, {"lo": w[0], "hi": w[1]}).filter(pl.col("d").is_not_null())
    if df.height == 0:
        return None
    d = dict(zip(df["key"].to_list(), df["d"].to_list(), strict=True))
    out: dict[str, Any] = {"keys": d, "seconds": (w[1] - w[0]).total_seconds()}
    for kind in ("scan", "steal"):
        pre = f"pg{kind}_"
        typed = [k for k in (pre + "anon", pre + "file") if k in d]
        glob = [k for k in d if k.startswith(pre) and k not in typed]
        by_type = sum(d[k] for k in typed) if typed else None
        by_who = sum(d[k] for k in glob) if glob else None
        out[kind] = max(x for x in (by_type, by_who, 0) if x is not None)
        out[f"{kind}_global"] = by_who
        out[f"{kind}_typed"] = by_type
        out[f"{kind}_keys"] = typed + sorted(glob)
    gs, ts = out["steal_global"], out["steal_typed"]
    out["limit_steal"] = max(ts - gs, 0) if ts is not None and gs is not None else None
    # ... by type: exact while global reclaim is idle, else in proportion to anon : file
    for t in ("file", "anon"):
        part = d.get(f"pgsteal_{t}")
        share = part / ts if part is not None and ts else None
        out[f"limit_steal_{t}"] = (
            out["limit_steal"] * share
            if share is not None and out["limit_steal"] is not None
            else None
        )
    return out


def describe(rec: dict[str, Any], kind: str) -> str:
    """'kswapd 0 + direct 0 + ... = 0; anon 0 + file 58.3 M = 58.3 M pages' for scan/steal."""
    keys = rec["keys"]
    glob = [k for k in rec[f"{kind}_keys"] if not k.endswith(("_anon", "_file"))]
    typed = [k for k in rec[f"{kind}_keys"] if k.endswith(("_anon", "_file"))]
    parts = []
    for group, total in ((glob, rec[f"{kind}_global"]), (typed, rec[f"{kind}_typed"])):
        if group:
            terms = " + ".join(f"{k.split('_', 1)[1]} {_count(keys[k])}" for k in group)
            parts.append(f"{terms} = {_count(total)}")
    return "; ".join(parts) + " pages (/proc/vmstat)"


def _count(x: float | None) -> str:
    if x is None:
        return "?"
    for div, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(x) >= div:
            return f"{x / div:.4g}{unit}"
    return f"{x:.0f}"
