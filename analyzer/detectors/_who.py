"""Who was busy in a window: processes by their share of it, from pidstat or a ps snapshot.

`busy_processes` reads ``pidstat``: per process, its mean %CPU / %wait / kB_wr/s /
kB_rd/s over the window's pidstat *reports*, a report without the process counting 0
(the capture's pidstat prints only the tasks active in an interval, so a mean over the
process's own rows would overstate a process that ran in one second of ten). Units: %CPU
and %wait are percent of one CPU; kB/s. `snapshot_top` is the fallback when pidstat
names nobody: the last ps snapshot (``processes``), whose %CPU is ps's
average over the process's lifetime, not over the window — callers must say so.
"""

from __future__ import annotations

from analyzer.detectors._base import Context
from analyzer.intervals import Window

_SHARES = """
WITH r AS (SELECT * FROM pidstat WHERE tid IS NULL AND since_boot IS NOT TRUE
           AND second_of(ts) >= $lo AND second_of(ts) < $hi),
     k AS (SELECT count(DISTINCT ts) AS reports FROM r)
SELECT pid, any_value(command) AS cmd,
       sum(cpu_pct) / any_value(k.reports) AS pcpu,
       sum(wait_pct) / any_value(k.reports) AS wait,
       sum(kb_wr_s) / any_value(k.reports) AS wr_kb_s,
       sum(kb_rd_s) / any_value(k.reports) AS rd_kb_s,
       mode(cpu) AS on_cpu, count(DISTINCT cpu) AS ncpu, min(cpu) AS min_cpu
FROM r, k GROUP BY pid
ORDER BY coalesce(pcpu, 0) + coalesce(wait, 0) DESC, pid"""


def busy_processes(ctx: Context, w: Window) -> list[dict]:
    """Every process pidstat saw in ``w``, busiest (CPU + wait) first: ``pid``, ``cmd``,
    ``pcpu``, ``wait``, ``wr_kb_s``, ``rd_kb_s`` (means over the window's reports),
    ``on_cpu`` (the CPU it ran on most), ``ncpu`` (CPUs it ran on), ``min_cpu``."""
    if not ctx.rows("pidstat"):
        return []
    return ctx.query(_SHARES, {"lo": w[0], "hi": w[1]}).to_dicts()


def snapshot_top(ctx: Context, n: int = 3) -> list[dict]:
    """The top ``n`` processes by %CPU of the last ps snapshot ranked by CPU: ``pid``,
    ``comm``, ``args``, ``cpu_pct`` (ps: lifetime average), ``ts``, ``snapshot``."""
    if not ctx.rows("processes"):
        return []
    return ctx.query(
        "SELECT pid, comm, args, cpu_pct, ts, snapshot FROM processes "
        "WHERE snapshot IS NOT DISTINCT FROM (SELECT snapshot FROM processes "
        "WHERE cpu_pct IS NOT NULL ORDER BY ts DESC NULLS LAST LIMIT 1) "
        "AND ranking IS DISTINCT FROM 'rss' AND cpu_pct IS NOT NULL "
        "ORDER BY cpu_pct DESC, pid LIMIT $n",
        {"n": int(n)},
    ).to_dicts()


def by_command(
    procs: list[dict], key: str = "pcpu", top: int = 3, floor: float = 1.0
) -> list[dict]:
    """The processes of ``procs`` grouped by command, their ``key`` shares added, biggest
    first: ``command``, ``processes`` (how many), ``pids`` (up to 5), ``share`` — the
    "who" of a finding (``impact["who"]``; its unit is the caller's: % of one CPU, kB/s)."""
    by: dict[str, list[dict]] = {}
    for p in procs:
        if (p.get(key) or 0) >= floor:
            by.setdefault(str(p["cmd"]), []).append(p)
    rows = [
        {
            "command": cmd,
            "processes": len(ps),
            "pids": [int(p["pid"]) for p in ps[:5]],
            "share": sum(p[key] for p in ps),
        }
        for cmd, ps in by.items()
    ]
    return sorted(rows, key=lambda r: -r["share"])[:top]
