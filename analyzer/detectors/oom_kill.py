"""OOM kills: the kernel (or a memory cgroup) killed a process to free memory.

From dmesg ``oom_kill`` lines (victim, pid, memcg, RSS; the whole report is attached as
log lines) and from cgroup ``memory.events`` oom_kill increments that no kernel line
explains (a kill whose log line was lost or rate-limited). The ramp before the kill
(MemAvailable, memory PSI, reclaim over the preceding minute) is part of the evidence.

A storm — more than ``storm_kills`` kills of either source in the capture — is one
finding per source (`analyzer.detectors._storm`): counts per victim command and memory
cgroup, the span, the first and last kill, a bounded sample of log lines. Every kill
stays in the database (table ``dmesg``, ``kind = 'oom_kill'``; ``cgroup_memory``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from analyzer.detectors import _memcg, _storm
from analyzer.detectors._base import Context, hhmmss, r, second_of, unit_of
from analyzer.detectors._storm import sample_lines, top_values
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "oom_kill"
INPUTS = (
    "dmesg (oom_kill lines) or cgroup_memory (memory.events oom_kill)",
    "optional: meminfo, PSI memory, /proc/vmstat for the ramp",
)
THRESHOLDS = {"ramp_s": 60, "dedupe_s": 2, "cgroup_match_s": 10, "storm_kills": 20}
T = THRESHOLDS
REMEDIATION = [
    "Give the job the memory it needs or shrink it: raise memory.max / k8s limits.memory, or reduce batch size, prefetch and DataLoader workers (each worker holds a copy of the dataset object).",
    "Set memory.high below memory.max so the kernel throttles the cgroup before the OOM killer fires; watch memory.events high/max.",
    "Protect the trainer and sacrifice helpers instead: `echo -500 > /proc/<trainer pid>/oom_score_adj`, or memory.oom.group=1 to kill the whole job cleanly rather than one worker.",
    "Kill earlier and predictably under pressure with systemd-oomd / earlyoom (memory PSI thresholds) instead of a stalled host.",
]


# The kernel log's kills, the same kill in two files (series and snapshot) within
# $dedupe seconds once (the series file's line).
KILLS = """SELECT * FROM (SELECT *, row_number() OVER (
               PARTITION BY pid, comm, time_bucket(to_seconds($dedupe), ts)
               ORDER BY source_file LIKE 'series/%' DESC, source_file, line_no) AS k
             FROM dmesg WHERE kind = 'oom_kill' AND ts IS NOT NULL) WHERE k = 1"""
# memory.events oom_kill increments (d kills in a cgroup by ts).
INCREMENTS = """SELECT cgroup, ts, events_oom_kill - lag(events_oom_kill) OVER (PARTITION BY cgroup ORDER BY ts) AS d
                FROM cgroup_memory WHERE ts IS NOT NULL AND events_oom_kill IS NOT NULL QUALIFY d > 0"""
# ... that no kernel log kill explains (none within $tol seconds).
UNEXPLAINED = (
    "SELECT * FROM (" + INCREMENTS + ") AS i WHERE NOT EXISTS (SELECT 1 FROM ("
    + KILLS + ") AS k WHERE k.ts BETWEEN i.ts - to_seconds($tol) AND i.ts + to_seconds($tol))"
)  # fmt: skip


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    have_dmesg, have_cg = ctx.rows("dmesg") > 0, ctx.rows("cgroup_memory") > 0
    if not have_dmesg and not have_cg:
        return NotEvaluated(NAME, "needs the kernel log (dmesg) or cgroup memory.events")
    out: list[Finding] = []
    if have_dmesg:
        params = {"dedupe": int(T["dedupe_s"])}
        n = int(ctx.query("SELECT count(*) AS n FROM (" + KILLS + ")", params)["n"][0])
        if n > T["storm_kills"]:
            out.append(_dmesg_storm(ctx, n))
        else:
            kills = ctx.query(KILLS + " ORDER BY ts", params).to_dicts()
            out += [_from_dmesg(ctx, k) for k in kills]
    if have_cg:
        out += _from_cgroups(ctx, have_dmesg)
    return out


def _ramp(ctx: Context, t) -> list[Evidence]:
    w = (t - timedelta(seconds=T["ramp_s"]), t)
    ev = []
    for col, how in (
        ("mem_available_kb", "min"),
        ("psi_mem_full_pct", "max"),
        ("psi_mem_some_pct", "max"),
        ("pgscan_per_s", "max"),
        ("swap_out_kb_s", "max"),
    ):
        if ctx.has(col):
            v = ctx.stat(col, w, how)
            if v is not None:
                ev.append(
                    Evidence(
                        col,
                        r(v),
                        r(ctx.baseline(col, exclude=[w])),
                        unit_of(col),
                        f"{how} in the {T['ramp_s']} s before the kill",
                    )
                )
    return ev


def _memcg_ramp(ctx: Context, memcg: str | None, t: datetime) -> list[Evidence]:
    """The killed task's memory cgroup before the kill: its limit, peak usage, and the
    limit hits (v1 failcnt / v2 memory.events max + high) in the ramp, from when it first
    hit the limit (``cgroup_memory``; nothing when the cgroup was not sampled)."""
    if memcg is None or not ctx.rows("cgroup_memory"):
        return []
    lo = second_of(t) - timedelta(seconds=T["ramp_s"])
    # up to the first sample after the kill: it counts the hits of the kill's own allocation
    hi = second_of(t) + timedelta(seconds=1 + max(1.0, ctx.interval_s or 1.0))
    sub = _memcg.rows(ctx, memcg, lo, hi)
    if sub.height == 0:
        return []
    mib = float(_memcg.MIB)
    limit, usage, peak = (sub[c].max() for c in ("limit_bytes", "usage_bytes", "peak_bytes"))
    lim = r(limit / mib, 0) if limit else None  # type: ignore[operator]
    hits = sub.filter(pl.col("hits_inc").fill_null(0) > 0)
    ev = [
        Evidence("memcg_limit", lim, None, "MiB", f"memory limit of {memcg}"),
        Evidence("memcg_usage_max", r(usage / mib, 1) if usage is not None else None, lim, "MiB",  # type: ignore[operator]
                 f"max sampled usage of {memcg} in the {T['ramp_s']} s before the kill, vs its limit"),
        Evidence("memcg_peak", r(peak / mib, 1) if peak is not None else None, lim, "MiB",  # type: ignore[operator]
                 "high-water mark (memory.peak / v1 max_usage_in_bytes) by the first sample after the kill"),
    ]  # fmt: skip
    if hits.height:
        first = hits["ts"].min()
        ev.append(
            Evidence(
                "memcg_limit_hits",
                float(hits["hits_inc"].sum()),
                0.0,
                "count",
                f"v1 failcnt / v2 memory.events max + high increase in the {T['ramp_s']} s before the kill "
                f"(to the first sample after it); first in the sample of {hhmmss(first)} UTC, "
                f"{(first - second_of(t)).total_seconds():+.0f} s from the kill",  # type: ignore[operator]
            )
        )
    return [e for e in ev if e.value is not None]


def _from_dmesg(ctx: Context, k: dict) -> Finding:
    t = k["ts"]
    rss_kb = sum(k.get(c) or 0 for c in ("anon_rss_kb", "file_rss_kb", "shmem_rss_kb"))
    memcg = _memcg.cgroup_path(k.get("memcg"))
    scope = (
        f"memory cgroup {memcg}"
        if k.get("oom_constraint") == "CONSTRAINT_MEMCG" and memcg
        else "the host"
    )
    lines = []
    if k.get("event_id") is not None:
        lines = ctx.log_lines(k["source_file"], event_id=int(k["event_id"]), limit=80)
    if not lines:
        lines = ctx.log_lines(k["source_file"], line_no=int(k["line_no"]))
    ev = [
        Evidence(
            "victim",
            float(k["pid"]) if k.get("pid") is not None else None,
            None,
            "pid",
            f"{k.get('comm')} (uid {k.get('uid')})",
        ),
        Evidence("anon_rss_kb", r(k.get("anon_rss_kb"), 0), None, "kB", "victim anonymous RSS"),
        Evidence("total_vm_kb", r(k.get("total_vm_kb"), 0), None, "kB", "victim virtual size"),
        Evidence(
            "memcg",
            None,
            None,
            "",
            f"{memcg or '?'} ({k.get('oom_constraint') or 'constraint unknown'})",
        ),
        *_ramp(ctx, t),
        *_memcg_ramp(ctx, memcg, t),
    ]
    before = _how_long_before(ctx, t)
    return Finding(
        key="OOM_KILL",
        kind=NAME,
        title=f"OOM killer killed {k.get('comm')} (pid {k.get('pid')})"
        + (f", {before}" if before else ""),
        severity="critical",
        start=second_of(t),  # the second of the kill, on the signals grid
        end=second_of(t) + timedelta(seconds=1),
        summary=f"At {hhmmss(t)} UTC{f' ({before}, from the kernel log history)' if before else ''} the kernel killed {k.get('comm')} (pid {k.get('pid')}, {rss_kb / 1024:.0f} MiB resident) because {scope} ran out of memory.",
        impact={
            "processes_killed": 1,
            "rss_freed_mb": r(rss_kb / 1024, 0),
            "memcg": memcg,  # the cgroup whose limit was hit (correlate.py: its pressure)
            "constraint": k.get("oom_constraint"),
        },
        evidence=ev,
        log_lines=lines,
        remediation=REMEDIATION,
        caveats=[]
        if not before
        else ["The kill happened before the capture started (kernel log history)."],
    )


def _how_long_before(ctx: Context, t: datetime) -> str | None:
    """'12 min before the capture' when ``t`` is older than the capture's first second."""
    first = ctx.signals["ts"].min() if ctx.signals.height else None
    if first is None or t >= first:  # type: ignore[operator]
        return None
    s = (first - t).total_seconds()
    if s < 90:
        return f"{s:.0f} s before the capture"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min before the capture"
    if s < 2 * 86400:
        return f"{s / 3600:.0f} h before the capture"
    return f"{s / 86400:.0f} days before the capture"


def _from_cgroups(ctx: Context, have_dmesg: bool) -> list[Finding]:
    if have_dmesg:
        params = {"dedupe": int(T["dedupe_s"]), "tol": int(T["cgroup_match_s"])}
        sql = UNEXPLAINED
    else:
        params, sql = None, INCREMENTS
    n = int(ctx.query("SELECT count(*) AS n FROM (" + sql + ")", params)["n"][0])
    if n > T["storm_kills"]:
        return [_cgroup_storm(ctx, sql, params, n)]
    df = ctx.query(sql + " ORDER BY ts", params)
    out = []
    for row in df.iter_rows(named=True):
        t = row["ts"]
        out.append(
            Finding(
                key="OOM_KILL",
                kind=NAME,
                title=f"OOM kill in cgroup {row['cgroup'] or '/'} ({row['d']} process(es))",
                severity="critical",
                start=t - timedelta(seconds=1),
                end=t,
                summary=f"memory.events of {row['cgroup'] or '/'} counted {row['d']} OOM kill(s) by {hhmmss(t)} UTC; no matching kernel log line was captured.",
                impact={
                    "processes_killed": int(row["d"]),
                    "memcg": _memcg.cgroup_path(row["cgroup"] or "/"),
                    "constraint": "CONSTRAINT_MEMCG",
                },
                evidence=[
                    Evidence(
                        "events_oom_kill",
                        float(row["d"]),
                        0.0,
                        "count",
                        f"increment in {row['cgroup'] or '/'}",
                    ),
                    *_ramp(ctx, t),
                ],
                remediation=REMEDIATION,
                caveats=[
                    "Victim unknown: the kernel log lines of this kill are not in the bundle."
                ],
            )
        )
    return out


def _before_capture(ctx: Context, t: datetime) -> bool:
    """Some of the kernel log is older than the capture's first second."""
    return _how_long_before(ctx, t) is not None


def _dmesg_storm(ctx: Context, n: int) -> Finding:
    """One finding for the ``n`` (> storm_kills) kills of the kernel log."""
    params = {"dedupe": int(T["dedupe_s"])}
    facts = ctx.query(
        "SELECT min(ts) AS t0, max(ts) AS t1, count(DISTINCT memcg) AS cgroups,"
        " count(DISTINCT comm) AS comms,"
        " sum(coalesce(anon_rss_kb, 0) + coalesce(file_rss_kb, 0) + coalesce(shmem_rss_kb, 0)) AS rss_kb"
        " FROM (" + KILLS + ")",
        params,
    ).row(0, named=True)
    t0, t1 = facts["t0"], facts["t1"]
    victims = top_values(ctx, "SELECT comm AS name, 1 AS n FROM (" + KILLS + ")", params)
    cgroups = top_values(ctx, "SELECT memcg AS name, 1 AS n FROM (" + KILLS + ")", params)
    first = ctx.query(KILLS + " ORDER BY ts, source_file, line_no LIMIT 1", params).row(
        0, named=True
    )
    last = ctx.query(KILLS + " ORDER BY ts DESC, source_file, line_no LIMIT 1", params).row(
        0, named=True
    )
    rss_kb = int(facts["rss_kb"] or 0)
    caveats = [_storm.caveat(n, "kills", "table dmesg (kind = 'oom_kill')")]
    if _before_capture(ctx, t0):
        caveats.append("Some kills happened before the capture started (kernel log history).")
    return Finding(
        key="OOM_KILL",
        kind=NAME,
        title=f"{n:,} OOM kills of {_storm.names(victims)}",
        severity="critical",
        start=second_of(t0),
        end=second_of(t1) + timedelta(seconds=1),
        summary=f"From {hhmmss(t0)} to {hhmmss(t1)} UTC the kernel killed {n:,} processes "
        f"({rss_kb / 1024:,.0f} MiB resident in all) because memory ran out; top victims "
        f"{_storm.counts(victims)}; memory cgroups {_storm.counts(cgroups)}; first "
        f"{first['comm']} (pid {first['pid']}) at {hhmmss(t0)}, last {last['comm']} "
        f"(pid {last['pid']}) at {hhmmss(t1)}.",
        impact={
            "processes_killed": n,
            "rss_freed_mb": r(rss_kb / 1024, 0),
            "victim_commands": int(facts["comms"]),
            "memory_cgroups": int(facts["cgroups"]),
        },
        evidence=[
            Evidence("kills", float(n), None, "count", f"{hhmmss(t0)}–{hhmmss(t1)} UTC"),
            *_storm.evidence("victim_kills", victims),
            *_storm.evidence("memcg_kills", cgroups),
            *_ramp(ctx, t0),
        ],
        log_lines=sample_lines(ctx, KILLS, params),
        remediation=REMEDIATION,
        caveats=caveats,
    )


def _cgroup_storm(ctx: Context, sql: str, params: dict[str, int] | None, n: int) -> Finding:
    """One finding for ``n`` (> storm_kills) memory.events increments without a log line."""
    facts = ctx.query(
        "SELECT min(ts) AS t0, max(ts) AS t1, sum(d) AS kills FROM (" + sql + ")", params
    ).row(0, named=True)
    t0, t1, kills = facts["t0"], facts["t1"], int(facts["kills"])
    cgroups = top_values(
        ctx, "SELECT coalesce(nullif(cgroup, ''), '/') AS name, d AS n FROM (" + sql + ")", params
    )
    return Finding(
        key="OOM_KILL",
        kind=NAME,
        title=f"{kills:,} OOM kills in {_storm.names(cgroups)} (memory.events)",
        severity="critical",
        start=t0 - timedelta(seconds=1),
        end=t1,
        summary=f"memory.events counted {kills:,} OOM kills in {n:,} increments from "
        f"{hhmmss(t0)} to {hhmmss(t1)} UTC, per cgroup {_storm.counts(cgroups)}; no "
        "matching kernel log line was captured.",
        impact={"processes_killed": kills},
        evidence=[
            Evidence("events_oom_kill", float(kills), 0.0, "count", f"{n:,} increments"),
            *_storm.evidence("cgroup_kills", cgroups),
            *_ramp(ctx, t0),
        ],
        remediation=REMEDIATION,
        caveats=[
            "Victims unknown: the kernel log lines of these kills are not in the bundle.",
            _storm.caveat(n, "increments", "table cgroup_memory (events_oom_kill)"),
        ],
    )
