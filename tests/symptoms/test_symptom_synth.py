"""Symptom first on generated bundles (`hindsight synth`, docs/synth.md) with an
`--app-series` file whose symptom rises inside the injected incident: the whole pipeline,
real parsers and detectors. A regression check of the method on known answers, not an
accuracy claim (those need real captures: issue #18's test service)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.pipeline import Options, run
from analyzer.sql import ident
from analyzer.symptoms.schema import TABLES
from analyzer.synth import Spec, generate, parse_incident

SECONDS = 300


def _truth(bundle: Path) -> dict:
    return json.loads(
        bundle.with_name(bundle.name.removesuffix(".tgz") + ".ground-truth.json").read_text()
    )


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _requests(path: Path, start: datetime, slow: list[tuple[datetime, datetime]]) -> Path:
    """10 requests per second for the whole capture: ~180 ms, ~2.4 s inside ``slow``."""
    i = pl.int_range(0, SECONDS * 10, eager=True)
    ts = pl.Series([start + timedelta(milliseconds=100 * k) for k in range(SECONDS * 10)])
    in_slow = pl.Series([any(a <= x < b for a, b in slow) for x in ts])
    latency = pl.when(in_slow).then(2400 + (i * 53) % 201 - 100).otherwise(180 + (i * 37) % 31 - 15)
    frame = pl.DataFrame({"ts": ts, "i": i, "slow": in_slow}).with_columns(latency_ms=latency)
    frame.select(
        timestamp=pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"), latency_ms="latency_ms"
    ).write_csv(path)
    return path


@pytest.fixture(scope="module")
def throttled(tmp_path_factory: pytest.TempPathFactory) -> tuple[duckdb.DuckDBPyConnection, dict]:
    """CPU quota throttling 100–160 s (P99 rises with it), then an I/O saturation from
    125 s that starts while the symptom already lasts (a mechanism, but later)."""
    d = tmp_path_factory.mktemp("sym-throttle")
    incidents = [parse_incident("cpu_throttle@100+60"), parse_incident("io_saturation@125+40")]
    bundle = generate(Spec(seconds=SECONDS, seed=3, incidents=incidents), d / "thr.tgz")
    truth = _truth(bundle)
    cause = truth["incidents"][0]
    csv = _requests(
        d / "lt.csv",
        _when(truth["start_utc"]),
        [(_when(cause["start_utc"]), _when(cause["end_utc"]))],
    )
    res = run(bundle, Options(db=d / "thr.duckdb", app_series=[csv]))
    assert [c["status"] for c in res.collectors if c["collector"] == "app_series"] == ["parsed"]
    return duckdb.connect(str(d / "thr.duckdb"), read_only=True), truth


def test_the_symptom_tables_have_the_declared_columns(throttled) -> None:
    con, _ = throttled
    for name, table in TABLES.items():
        cols = [r[0] for r in con.sql(f"DESCRIBE {ident(name)}").fetchall()]
        assert cols == [c.name for c in table.columns], name


def test_throttling_is_ranked_first_and_the_later_io_is_not_a_cause(throttled) -> None:
    con, truth = throttled
    cause = truth["incidents"][0]
    wins = con.sql("SELECT start_ts, end_ts, level FROM symptom_windows").fetchall()
    assert [(a, b) for a, b, _ in wins] == [(_when(cause["start_utc"]), _when(cause["end_utc"]))]
    ranked = con.sql(
        "SELECT candidate, role, mechanism_group, why_not FROM symptom_explanations ORDER BY rank"
    ).fetchall()
    assert ranked[0][:3] == ("throttled_pct", "cause", "cpu_quota")
    causes = {c for c, role, *_ in ranked if role == "cause"}
    assert {"throttled_pct", "throttled_ms_per_s", "CPU_THROTTLE"} <= causes
    io = {c: (role, why) for c, role, group, why in ranked if group == "io"}
    assert io and all(role != "cause" for role, _ in io.values())  # IO_SATURATION began at 125 s
    assert io["IO_SATURATION"][0] == "weak"  # active in only 25 of the 60 s
    gpu = next(r for r in ranked if r[0] == "gpu_util_mean_pct")
    assert gpu[1] == "concurrent" and gpu[3] == "no known mechanism links it to this symptom"
    sentence = con.sql("SELECT sentence FROM symptom_explanations WHERE rank = 1").fetchall()[0][0]
    assert "rose from 193 ms to 2.5 s at 14:01:40–14:02:40 UTC (60 s)" in sentence
    assert "(cgroup /train.slice) at 60 % (baseline 0 %); throttling leads by 0 s" in sentence
    assert "P99 rose in 1 of 1 stretches" in sentence


def test_periodic_checkpoints_explain_every_step_time_window(tmp_path: Path) -> None:
    bundle = generate(
        Spec(seconds=400, seed=5, incidents=[parse_incident("checkpoint_stall@60+300")]),
        tmp_path / "ck.tgz",
    )
    truth = _truth(bundle)
    bursts = [(_when(e["start_utc"]), _when(e["end_utc"])) for e in truth["incidents"][0]["events"]]
    t0, rows, at = _when(truth["start_utc"]), [], 0.0
    while at < 400:  # 500 ms steps, 4 s while a checkpoint is written (one line per step)
        slow = any(a <= t0 + timedelta(seconds=at) < b for a, b in bursts)
        step = 4000.0 if slow else 500.0 + (len(rows) * 7) % 21 - 10
        at += step / 1000
        rows.append(((t0 + timedelta(seconds=at)).timestamp(), step))
    csv = tmp_path / "steps.csv"
    pl.DataFrame(rows, schema=["ts", "step_time_ms"], orient="row").write_csv(csv)
    run(bundle, Options(db=tmp_path / "ck.duckdb", app_series=[csv]))
    con = duckdb.connect(str(tmp_path / "ck.duckdb"), read_only=True)
    kind = con.sql("SELECT kind FROM symptoms WHERE windows > 0").fetchall()
    assert kind == [("step_time",)]
    wins = con.sql("SELECT window_id, start_ts FROM symptom_windows ORDER BY 1").fetchall()
    assert len(wins) == len(bursts) == 5
    for (wid, start), (a, _end) in zip(wins, bursts, strict=True):
        assert a - timedelta(seconds=1) <= start <= a + timedelta(seconds=2), (wid, start, a)
    top = con.sql(
        "SELECT mechanism_group, role, stretches, stretches_with_symptom FROM symptom_explanations WHERE rank = 1"
    ).fetchall()
    assert top == [("io", "cause", 5, 5)] * 5
    stall = con.sql(
        "SELECT DISTINCT role FROM symptom_explanations WHERE candidate = 'CHECKPOINT_STALL'"
    ).fetchall()
    assert stall == [("cause",)]
    causes = con.sql(
        "SELECT DISTINCT mechanism_group FROM symptom_explanations WHERE role = 'cause'"
    ).fetchall()
    assert causes == [("io",)]


def test_analyze_refuses_a_series_with_naive_times_without_tz(tmp_path: Path) -> None:
    naive = tmp_path / "naive.csv"
    naive.write_text("time,p99_ms\n2026-11-29 14:00:00,180\n", encoding="utf-8")
    bundle = tmp_path / "bundle"  # never opened: the series is read first
    bundle.mkdir()
    out = tmp_path / "r.html"
    args = ["analyze", str(bundle), "--app-series", str(naive), "-o", str(out), "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "times without a zone" in result.output and "--tz" in result.output
    assert not out.exists()


def test_tz_reads_naive_times_in_that_zone(tmp_path: Path) -> None:
    from analyzer.symptoms.app_series import read

    naive = tmp_path / "naive.csv"
    naive.write_text("time,p99_ms\n2026-11-29 09:00:00,180\n", encoding="utf-8")
    s = read(naive, tz="America/New_York")
    assert s.frame["ts"].to_list() == [datetime(2026, 11, 29, 14, 0, tzinfo=UTC)]
