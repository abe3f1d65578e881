"""Who was busy in a window: processes by their share of it, from pidstat or a ps snapshot.

`busy_processes` reads ``pidstat``: per process, its mean %CPU / %wait / kB_wr/s /
kB_rd/s over the window's pidstat *reports*, a report without the process counting 0
(the capture's pidstat prints only the tasks active in an interval, so a mean over the
process's own rows would overstate a process that ran in one second of ten). Units: %CPU
and %wait are percent of one CPU; kB/s. `snapshot_top` is the fallback when pidstat
names nobody: the last ps snapshot (``processes``), whose %CPU is ps's
average over the process's lifetime, not over the window — callers must say so.

`with_identity` adds each process's cgroup and what it names (container, runtime, pod,
systemd unit) from ``process_cgroups`` (the capture's proc_cgroup sampler): the PID's
last row before the window's end, else its first row after it. `by_command` then groups
by command *and* cgroup: the same command in two containers is two "who"s.
"""

from __future__ import annotations

from analyzer.detectors._base import Context
from analyzer.intervals import Window

_SHARES = """
WITH r AS (SELECT * FROM pidstat WHERE tid IS NULL AND since_boot IS NOT TRUE
           AND second_of(ts) >= $lo AND second_of(ts) < $hi),
     k AS (SELECT count(DISTINCT ts) AS reports FROM r)
SELECT pid, arg_max(command, ts) AS cmd,
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


_MEMORY = """
WITH r AS (SELECT pid, command, ts, rss_kb, majflt_s FROM pidstat
           WHERE tid IS NULL AND since_boot IS NOT TRUE AND rss_kb IS NOT NULL
             AND second_of(ts) >= $lo - INTERVAL 30 SECOND AND second_of(ts) < $hi),
     a AS (SELECT pid, arg_max(command, ts) AS cmd,
                  arg_max(rss_kb, ts) FILTER (WHERE second_of(ts) < $lo) AS before_kb,
                  arg_min(rss_kb, ts) FILTER (WHERE second_of(ts) >= $lo) AS first_kb,
                  max(rss_kb) FILTER (WHERE second_of(ts) >= $lo) AS peak_kb,
                  sum(majflt_s) FILTER (WHERE second_of(ts) >= $lo) AS majflt_s_sum
           FROM r GROUP BY pid)
SELECT pid, cmd, (peak_kb - coalesce(before_kb, first_kb)) / 1024.0 AS grown_mb,
       peak_kb / 1024.0 AS rss_mb, coalesce(majflt_s_sum, 0) * $iv AS majflt
FROM a WHERE peak_kb IS NOT NULL
ORDER BY grown_mb DESC, majflt DESC, pid"""


def memory_users(ctx: Context, w: Window) -> list[dict]:
    """Every process pidstat saw in ``w`` with its memory: ``pid``, ``cmd``, ``grown_mb``
    (its peak RSS in ``w`` minus its RSS in its last report up to 30 s before ``w``, else
    in its first report inside ``w``), ``rss_mb`` (peak), ``majflt`` (major faults in
    ``w``: pidstat's majflt/s × the interval, summed over its reports). pidstat prints a
    task in an interval only when it was active (faulted, ran), so an idle process, whose
    RSS cannot grow, is never named."""
    if not ctx.rows("pidstat"):
        return []
    params = {"lo": w[0], "hi": w[1], "iv": float(ctx.interval_s or 1.0)}
    return ctx.query(_MEMORY, params).to_dicts()


IDENTITY = ("cgroup", "memory_cgroup", "container_id", "runtime", "pod_uid", "unit")
NAMES = ("container_name", "pod_name", "pod_namespace")  # from the runtime's CLI (containers)

_IDENTITY = """
SELECT pid, cgroup, memory_cgroup, container_id, runtime, pod_uid, unit FROM (
    SELECT *, row_number() OVER (
        PARTITION BY pid
        ORDER BY second_of(ts) < $hi DESC,
                 CASE WHEN second_of(ts) < $hi THEN -epoch(ts) ELSE epoch(ts) END) AS n
    FROM process_cgroups WHERE list_contains($pids, pid))
WHERE n = 1"""
_NAMED = """
SELECT i.*, c.container_name, c.pod_name, c.pod_namespace FROM ({identity}) i
LEFT JOIN (SELECT container_id, max(name) AS container_name, max(pod_name) AS pod_name,
                  max(pod_namespace) AS pod_namespace
           FROM containers GROUP BY container_id) c USING (container_id)"""


def with_identity(ctx: Context, procs: list[dict], w: Window) -> list[dict]:
    """``procs`` (dicts with ``pid``) with the `IDENTITY` keys added (None when the bundle
    has no proc_cgroup sampler or never saw the PID)."""
    ids: dict[int, dict] = {}
    pids = sorted({int(p["pid"]) for p in procs if p.get("pid") is not None})
    if pids and ctx.rows("process_cgroups"):
        sql = _NAMED.format(identity=_IDENTITY) if ctx.rows("containers") else _IDENTITY
        rows = ctx.query(sql, {"pids": pids, "hi": w[1]}).to_dicts()
        ids = {int(r["pid"]): r for r in rows}
    keys = IDENTITY + NAMES
    return [
        p | {k: (ids.get(int(p["pid"])) or {}).get(k) for k in keys}
        if p.get("pid") is not None
        else p | dict.fromkeys(keys)
        for p in procs
    ]


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
    """The processes of ``procs`` grouped by command (and cgroup, when `with_identity`
    added it), their ``key`` shares added, biggest first: ``command``, ``processes`` (how
    many), ``pids`` (up to 5), ``share``, and the group's `IDENTITY` keys when known —
    the "who" of a finding (``impact["who"]``; its unit is the caller's: % of one CPU,
    kB/s)."""
    by: dict[tuple[str, str | None], list[dict]] = {}
    for p in procs:
        if (p.get(key) or 0) >= floor:
            by.setdefault((str(p["cmd"]), p.get("cgroup")), []).append(p)
    rows = []
    for (cmd, _cg), ps in by.items():
        row = {
            "command": cmd,
            "processes": len(ps),
            "pids": [int(p["pid"]) for p in ps[:5]],
            "share": sum(p[key] for p in ps),
        }
        if any(p.get("cgroup") is not None for p in ps):
            row |= {k: ps[0].get(k) for k in IDENTITY + NAMES if ps[0].get(k) is not None}
            if (where := place(row)) is not None:
                row["where"] = where
        rows.append(row)
    return sorted(rows, key=lambda r: -r["share"])[:top]


def place(g: dict) -> str | None:
    """Where a group runs, in words: 'container trainer (pod ml/train-0, containerd)' (names
    from the runtime's CLI), 'container 3f2a9c1b7d04 (containerd, pod 8d5e…)' (from the
    cgroup path), 'nginx.service', 'cgroup /train'; None for the root cgroup or unknown."""
    if g.get("container_name"):
        pod = g.get("pod_name") and "/".join(
            x for x in (g.get("pod_namespace"), g["pod_name"]) if x
        )
        extra = [x for x in (pod and f"pod {pod}", g.get("runtime")) if x]
        return f"container {g['container_name']}" + (f" ({', '.join(extra)})" if extra else "")
    if g.get("container_id"):
        extra = [x for x in (g.get("runtime"), g.get("pod_uid") and f"pod {g['pod_uid']}") if x]
        return f"container {g['container_id'][:12]}" + (f" ({', '.join(extra)})" if extra else "")
    if g.get("unit"):
        return str(g["unit"])
    cg = g.get("cgroup")
    return f"cgroup {cg}" if cg and cg != "/" else None
