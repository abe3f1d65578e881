"""Who was busy in a window (analyzer/detectors/_who.py), from a real DuckDB pidstat table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import polars as pl

from analyzer.detectors import cpu_contention
from analyzer.detectors._base import Context
from analyzer.detectors._who import busy_processes, snapshot_top
from analyzer.parsers.pidstat import TABLES as PIDSTAT
from analyzer.parsers.processes import TABLES as PROCESSES

T0 = datetime(2026, 12, 2, 1, 0, 0, tzinfo=UTC)


def _ctx(pidstat_rows: list[dict], ps_rows: list[dict] | None = None) -> Context:
    con = duckdb.connect()
    frame = PIDSTAT["pidstat"].conform(pl.DataFrame(pidstat_rows)).collect()
    con.register("p", frame.to_arrow())
    con.execute("CREATE TABLE pidstat AS SELECT * FROM p")
    if ps_rows is not None:
        ps = PROCESSES["processes"].conform(pl.DataFrame(ps_rows)).collect()
        con.register("q", ps.to_arrow())
        con.execute("CREATE TABLE processes AS SELECT * FROM q")
    return Context(con, pl.DataFrame({"ts": [T0]}))


def _row(s: int, pid: int, cmd: str, cpu: float, wait: float = 0.0, on: int = 0) -> dict:
    return {"ts": T0 + timedelta(seconds=s), "pid": pid, "command": cmd, "cpu_pct": cpu,
            "wait_pct": wait, "cpu": on}  # fmt: skip


def test_a_process_active_in_one_report_of_ten_has_a_tenth_of_its_cpu() -> None:
    # pidstat without -p: the idle background task prints every second, the burst once
    rows = [_row(s, 1, "daemon", 2.0) for s in range(10)] + [_row(4, 7, "burst", 90.0)]
    got = {p["cmd"]: p for p in busy_processes(_ctx(rows), (T0, T0 + timedelta(seconds=10)))}
    assert abs(got["burst"]["pcpu"] - 9.0) < 1e-9  # 90 % in 1 of 10 reports
    assert abs(got["daemon"]["pcpu"] - 2.0) < 1e-9
    assert list(got) == ["burst", "daemon"]  # busiest first


def test_the_workers_of_one_command_are_named_once_with_their_shares_added() -> None:
    rows = [_row(s, 10 + k, "stress-ng-cpu", 25.0, on=k % 2) for s in range(4) for k in range(4)]
    rows += [_row(s, 3, "python", 93.0) for s in range(4)]
    procs = busy_processes(_ctx(rows), (T0, T0 + timedelta(seconds=4)))
    assert cpu_contention._who(procs) == "stress-ng-cpu ×4 (100%), python (93%)"


def test_without_a_busy_pidstat_process_the_ps_snapshot_is_named_and_labelled() -> None:
    idle = [_row(s, 1, "process_api", 0.0) for s in range(5)]
    ps = [
        {"ts": T0, "snapshot": "end", "ranking": "cpu", "rank": 1, "pid": 2898,
         "comm": "python3", "args": "python3 workload.py", "cpu_pct": 327.0},
        {"ts": T0, "snapshot": "end", "ranking": "cpu", "rank": 2, "pid": 1,
         "comm": "process_api", "args": "/process_api", "cpu_pct": 0.5},
    ]  # fmt: skip
    ctx = _ctx(idle, ps)
    assert [p for p in busy_processes(ctx, (T0, T0 + timedelta(seconds=5))) if p["pcpu"] >= 1] == []
    top = snapshot_top(ctx, 1)
    assert top[0]["pid"] == 2898 and top[0]["cpu_pct"] == 327.0
