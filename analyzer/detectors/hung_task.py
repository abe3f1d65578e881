"""Hung tasks: the kernel's watchdog saw a task blocked in uninterruptible sleep (D state).

The window runs from when the task was first blocked (report time − blocked seconds) to
the report. The stack in the report (attached as log lines) says what it waited for.
"""

from __future__ import annotations

from datetime import timedelta

from analyzer.detectors._base import Context, hhmmss
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "hung_task"
INPUTS = ("dmesg lines classified hung_task",)
THRESHOLDS = {"critical_blocked_s": 600, "default_blocked_s": 120}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("dmesg"):
        return NotEvaluated(NAME, "needs the kernel log (dmesg)")
    rows = ctx.query(
        """SELECT * FROM (SELECT ts, pid, comm, blocked_s, event_id, source_file, line_no, message,
                  row_number() OVER (PARTITION BY pid, comm, date_trunc('minute', ts) ORDER BY source_file LIKE 'series/%' DESC, source_file) AS k
           FROM dmesg WHERE kind = 'hung_task' AND ts IS NOT NULL) WHERE k = 1 ORDER BY ts"""
    ).to_dicts()
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
                remediation=[
                    "Read the stack in the log lines: io_schedule / blk_mq / jbd2 → the disk or filesystem stalled; nfs / rpc / fuse / lustre → the network filesystem server; mutex in a driver → the driver.",
                    "On the live host: `cat /proc/<pid>/stack`, `ps -eo pid,stat,wchan:32,comm | awk '$2 ~ /D/'`; check device health (`nvme smart-log`, I/O errors in dmesg) and NFS/Lustre servers.",
                    "kernel.hung_task_timeout_secs sets the report threshold (it does not fix the stall).",
                ],
            )
        )
    return out
