"""Hung tasks: the kernel's watchdog saw a task blocked in uninterruptible sleep (D state).

The window runs from when the task was first blocked (report time − blocked seconds) to
the report. The stack in the report (attached as log lines) says what it waited for.

A storm — more than ``storm_reports`` reports — is one finding (`analyzer.detectors._storm`):
counts per task, the span, the longest block, a bounded sample of the report lines. Every
report stays in table ``dmesg`` (``kind = 'hung_task'``).
"""

from __future__ import annotations

from datetime import timedelta

from analyzer.detectors import _storm
from analyzer.detectors._base import Context, hhmmss
from analyzer.detectors._storm import sample_lines, top_values
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "hung_task"
INPUTS = ("dmesg lines classified hung_task",)
THRESHOLDS = {"critical_blocked_s": 600, "default_blocked_s": 120, "storm_reports": 20}
T = THRESHOLDS
REMEDIATION = [
    "Read the stack in the log lines: io_schedule / blk_mq / jbd2 → the disk or filesystem stalled; nfs / rpc / fuse / lustre → the network filesystem server; mutex in a driver → the driver.",
    "On the live host: `cat /proc/<pid>/stack`, `ps -eo pid,stat,wchan:32,comm | awk '$2 ~ /D/'`; check device health (`nvme smart-log`, I/O errors in dmesg) and NFS/Lustre servers.",
    "kernel.hung_task_timeout_secs sets the report threshold (it does not fix the stall).",
]
# One row per report (the same task reported in two files within a minute once).
REPORTS = """SELECT * FROM (SELECT ts, pid, comm, blocked_s, event_id, source_file, line_no, message,
                  row_number() OVER (PARTITION BY pid, comm, date_trunc('minute', ts) ORDER BY source_file LIKE 'series/%' DESC, source_file) AS k
           FROM dmesg WHERE kind = 'hung_task' AND ts IS NOT NULL) WHERE k = 1"""


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("dmesg"):
        return NotEvaluated(NAME, "needs the kernel log (dmesg)")
    n = int(ctx.query("SELECT count(*) AS n FROM (" + REPORTS + ")")["n"][0])
    if n > T["storm_reports"]:
        return [_storm_finding(ctx, n)]
    rows = ctx.query(REPORTS + " ORDER BY ts").to_dicts()
    out = []
    for x in rows:
        blocked = int(x["blocked_s"] or T["default_blocked_s"])
        t = x["ts"]
        event = x["event_id"]
        where = {"event_id": int(event)} if event is not None else {"line_no": int(x["line_no"])}
        out.append(
            Finding(
                key="HUNG_TASK",
                kind=NAME,
                title=f"Task {x['comm']} (pid {x['pid']}) blocked > {blocked} s",
                severity="critical" if blocked >= T["critical_blocked_s"] else "major",
                start=t - timedelta(seconds=blocked),
                end=t + timedelta(seconds=1),
                summary=f"At {hhmmss(t)} UTC the kernel reported {x['comm']} (pid {x['pid']}) blocked in uninterruptible sleep for more than {blocked} s.",
                impact={"blocked_s": blocked},
                evidence=[
                    Evidence("blocked_s", float(blocked), None, "s", f"{x['comm']} pid {x['pid']}")
                ],
                log_lines=ctx.log_lines(x["source_file"], **where, limit=60),
                remediation=REMEDIATION,
            )
        )
    return out


def _storm_finding(ctx: Context, n: int) -> Finding:
    """One finding for the ``n`` (> storm_reports) hung-task reports."""
    facts = ctx.query(
        "SELECT min(ts - to_seconds(coalesce(blocked_s, $default))) AS t0, max(ts) AS t1,"
        " min(ts) AS first, max(coalesce(blocked_s, $default)) AS longest,"
        " count(DISTINCT (pid, comm)) AS tasks FROM (" + REPORTS + ")",
        {"default": int(T["default_blocked_s"])},
    ).row(0, named=True)
    longest = int(facts["longest"])
    tasks = top_values(ctx, "SELECT comm AS name, 1 AS n FROM (" + REPORTS + ")")
    first, t1 = facts["first"], facts["t1"]
    return Finding(
        key="HUNG_TASK",
        kind=NAME,
        title=f"{n:,} hung task reports of {_storm.names(tasks)} (blocked up to > {longest} s)",
        severity="critical" if longest >= T["critical_blocked_s"] else "major",
        start=facts["t0"],
        end=t1 + timedelta(seconds=1),
        summary=f"From {hhmmss(first)} to {hhmmss(t1)} UTC the kernel reported {n:,} times "
        f"that {facts['tasks']:,} task(s) were blocked in uninterruptible sleep, the longest "
        f"for more than {longest} s; per task {_storm.counts(tasks)}.",
        impact={"blocked_s": longest, "reports": n, "tasks": int(facts["tasks"])},
        evidence=[
            Evidence("reports", float(n), None, "count", f"{facts['tasks']:,} task(s)"),
            Evidence("blocked_s", float(longest), None, "s", "longest block reported"),
            *_storm.evidence("task_reports", tasks),
        ],
        log_lines=sample_lines(ctx, REPORTS),
        remediation=REMEDIATION,
        caveats=[_storm.caveat(n, "hung task reports", "table dmesg (kind = 'hung_task')")],
    )
