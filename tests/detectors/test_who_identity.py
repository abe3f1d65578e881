"""Where "who" ran (analyzer/detectors/_who.py): the cgroup sampler's rows and the
runtime's container list, parsed from their fixtures (tests/fixtures/proc_cgroup,
tests/fixtures/containers), joined to busy processes of a real DuckDB pidstat table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from analyzer.detectors._base import Context
from analyzer.detectors._who import busy_processes, by_command, with_identity
from analyzer.parsers import base, containers, proc_cgroup
from analyzer.parsers.pidstat import TABLES as PIDSTAT
from analyzer.sql import ident

FIX = Path(__file__).resolve().parents[1] / "fixtures"
T0 = datetime.fromtimestamp(1796184300, UTC)  # the cgroup fixture's first pass


def _table(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    con.register("f", frame.to_arrow())
    con.execute(f"CREATE TABLE {ident(name)} AS SELECT * FROM f")
    con.unregister("f")


def _ctx(with_names: bool) -> Context:
    con = duckdb.connect()
    rows = [
        {"ts": T0 + timedelta(seconds=s), "pid": pid, "command": cmd, "cpu_pct": pct}
        for s in range(10)
        for pid, cmd, pct in ((5120, "python3", 180.0), (7002, "nginx", 40.0), (9, "idle", 0.0))
    ]
    _table(con, "pidstat", PIDSTAT["pidstat"].conform(pl.DataFrame(rows)).collect())
    ctx = base.ParseContext(file_name="x")
    cg = proc_cgroup.parse(FIX / "proc_cgroup" / "public-issues__containers.out", ctx)
    _table(con, "process_cgroups", cg.tables["process_cgroups"])
    if with_names:
        c = containers.parse(FIX / "containers" / "written__docker-ps.end.out", ctx)
        _table(con, "containers", c.tables["containers"])
    return Context(con, pl.DataFrame({"ts": [T0]}))


def _who(ctx: Context) -> dict[str, dict]:
    w = (T0, T0 + timedelta(seconds=10))
    return {g["command"]: g for g in by_command(with_identity(ctx, busy_processes(ctx, w), w))}


def test_who_says_the_container_pod_and_runtime_from_the_cli_and_the_unit() -> None:
    who = _who(_ctx(with_names=True))
    py = who["python3"]
    assert py["container_id"].startswith("d0b3604b67ac") and py["runtime"] == "docker"
    assert py["where"] == (
        "container k8s_trainer_train-0_ml_7d4424e6-bb13-42f4-a47a-45a4828bf54d_0 "
        "(pod ml/train-0, docker)"
    )
    assert (
        who["nginx"]["where"] == "my app.service"
    )  # its last cgroup before the window's end (moved at +5 s)
    assert "idle" not in who  # 0 % CPU: never named


def test_without_the_runtime_cli_the_container_is_named_from_its_cgroup_path() -> None:
    py = _who(_ctx(with_names=False))["python3"]
    assert (
        py["where"] == "container d0b3604b67ac (docker, pod 7d4424e6-bb13-42f4-a47a-45a4828bf54d)"
    )
    assert "container_name" not in py
