"""OOM kills: the kernel (or a memory cgroup) killed a process to free memory.

From dmesg ``oom_kill`` lines (victim, pid, memcg, RSS; the whole report is attached as
log lines) and from cgroup ``memory.events`` oom_kill increments that no kernel line
explains (a kill whose log line was lost or rate-limited). The ramp before the kill
(MemAvailable, memory PSI, reclaim over the preceding minute) is part of the evidence.
"""

from __future__ import annotations

from datetime import timedelta

from analyzer.detectors._base import Context, hhmmss, r, second_of, unit_of
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "oom_kill"
INPUTS = (
    "dmesg (oom_kill lines) or cgroup_memory (memory.events oom_kill)",
    "optional: meminfo, PSI memory, /proc/vmstat for the ramp",
)
THRESHOLDS = {"ramp_s": 60, "dedupe_s": 2, "cgroup_match_s": 10}
T = THRESHOLDS
REMEDIATION = [
    "Give the job the memory it needs or shrink it: raise memory.max / k8s limits.memory, or reduce batch size, prefetch and DataLoader workers (each worker holds a copy of the dataset object).",
    "Set memory.high below memory.max so the kernel throttles the cgroup before the OOM killer fires; watch memory.events high/max.",
    "Protect the trainer and sacrifice helpers instead: `echo -500 > /proc/<trainer pid>/oom_score_adj`, or memory.oom.group=1 to kill the whole job cleanly rather than one worker.",
    "Kill earlier and predictably under pressure with systemd-oomd / earlyoom (memory PSI thresholds) instead of a stalled host.",
]


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    have_dmesg, have_cg = ctx.rows("dmesg") > 0, ctx.rows("cgroup_memory") > 0
    if not have_dmesg and not have_cg:
        return NotEvaluated(NAME, "needs the kernel log (dmesg) or cgroup memory.events")
    out: list[Finding] = []
    kills = []
    if have_dmesg:
        kills = ctx.query(
            f"""SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY pid, comm, time_bucket(INTERVAL {int(T["dedupe_s"])} SECOND, ts)
                                                   ORDER BY source_file LIKE 'series/%' DESC, source_file, line_no) AS k
                               FROM dmesg WHERE kind = 'oom_kill' AND ts IS NOT NULL) WHERE k = 1 ORDER BY ts"""
        ).to_dicts()
        for k in kills:
            out.append(_from_dmesg(ctx, k))
    if have_cg:
        out += _from_cgroups(ctx, [k["ts"] for k in kills])
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


def _from_dmesg(ctx: Context, k: dict) -> Finding:
    t = k["ts"]
    rss_kb = sum(k.get(c) or 0 for c in ("anon_rss_kb", "file_rss_kb", "shmem_rss_kb"))
    memcg = k.get("memcg")
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
    ]
    return Finding(
        key="OOM_KILL",
        kind=NAME,
        title=f"OOM killer killed {k.get('comm')} (pid {k.get('pid')})",
        severity="critical",
        start=second_of(t),  # the second of the kill, on the signals grid
        end=second_of(t) + timedelta(seconds=1),
        summary=f"At {hhmmss(t)} UTC the kernel killed {k.get('comm')} (pid {k.get('pid')}, {rss_kb / 1024:.0f} MiB resident) because {scope} ran out of memory.",
        impact={"processes_killed": 1, "rss_freed_mb": r(rss_kb / 1024, 0)},
        evidence=ev,
        log_lines=lines,
        remediation=REMEDIATION,
        caveats=[]
        if ctx.signals.height == 0 or ctx.signals["ts"].min() <= t
        else ["The kill happened before the capture started (kernel log history)."],  # type: ignore[operator]
    )


def _from_cgroups(ctx: Context, dmesg_ts: list) -> list[Finding]:
    df = ctx.query(
        """SELECT cgroup, ts, events_oom_kill - lag(events_oom_kill) OVER (PARTITION BY cgroup ORDER BY ts) AS d
           FROM cgroup_memory WHERE ts IS NOT NULL AND events_oom_kill IS NOT NULL QUALIFY d > 0 ORDER BY ts"""
    )
    out = []
    tol = timedelta(seconds=T["cgroup_match_s"])
    for row in df.iter_rows(named=True):
        if any(abs(row["ts"] - t) <= tol for t in dmesg_ts):
            continue  # the kernel log has it
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
                impact={"processes_killed": int(row["d"])},
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
