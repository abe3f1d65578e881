"""analyse(): chains with direction and rank, tables written, JSON output valid against its schema."""

import json
from pathlib import Path

import jsonschema
import polars as pl
from detector_data import between, disk, gpu, series, store_with, t

from analyzer.analysis import analyse
from analyzer.correlate import correlate
from analyzer.findings import Finding
from analyzer.pipeline import Result, write_json
from analyzer.store import STORE_TABLES

SCHEMA = (
    Path(__file__).resolve().parents[2]
    / "docs"
    / "json-schema"
    / "hindsight-analysis-v1.schema.json"
)
N = 400
BURSTS = [(s, s + 10) for s in range(30, 300, 60)]
RAMP = [(330, 360)]


def _incident_store():
    psi = pl.concat([
        series(N, source="system", resource="memory", kind="some", avg10_pct=0.0, stall_pct=lambda i: 50.0 if between(i, RAMP) else 0.0),
        series(N, source="system", resource="memory", kind="full", avg10_pct=0.0, stall_pct=lambda i: 20.0 if between(i, RAMP) else 0.0),
    ])  # fmt: skip
    oom = pl.DataFrame([{"ts": t(361), "kind": "oom_kill", "event_id": 1, "line_no": 7, "pid": 4242, "comm": "python", "memcg": "/train.slice",
                         "oom_constraint": "CONSTRAINT_MEMCG", "anon_rss_kb": 1_000_000, "message": "Out of memory: Killed process 4242 (python)"}])  # fmt: skip
    return store_with(
        n=N,
        iostat_device=disk(
            N,
            wkb=lambda i: 400_000.0 if between(i, BURSTS) else 2000.0,
            w_await=lambda i: 80.0 if between(i, BURSTS) else 1.0,
        ),
        gpu_dmon=gpu(N, util=lambda i: 10.0 if between(i, BURSTS) else 95.0),
        vmstat=series(
            N,
            r=2,
            b=0,
            us_pct=80.0,
            sy_pct=10.0,
            id_pct=9.5,
            wa_pct=0.5,
            st_pct=0.0,
            since_boot=False,
        ),
        psi=psi,
        dmesg=oom.with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC"))),
    )


def test_analyse_links_causes_to_effects_ranks_incidents_and_writes_the_tables() -> None:
    store = _incident_store()
    a = analyse(store, debug=True)
    kinds = [f.kind for f in a.findings]
    assert kinds.count("checkpoint_stall") == len(BURSTS) and kinds.count("gpu_starvation") == len(
        BURSTS
    )
    assert "oom_kill" in kinds and "memory_pressure" in kinds
    top = a.chains[0]  # critical OOM ranks first
    assert a.findings[top.cause].kind == "memory_pressure" and top.severity == "critical"
    assert {a.findings[i].kind for i in top.members} == {"memory_pressure", "oom_kill"}
    ck = next(c for c in a.chains if a.findings[c.cause].kind == "checkpoint_stall")
    assert (
        len(ck.members) == 2 * len(BURSTS)
        and ck.occurrences == len(BURSTS)
        and 59 <= (ck.period_s or 0) <= 61
    )
    per_kind = sum(
        a.findings[i].gpu_seconds_lost or 0
        for i in ck.members
        if a.findings[i].kind == "gpu_starvation"
    )
    assert ck.gpu_seconds_lost == round(per_kind, 1)  # not the sum over both kinds
    assert "every 60 s" in ck.title and "gpu starvation" in ck.title
    names = {r[0] for r in store.con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    for name in (
        "signals",
        "signal_sources",
        "findings",
        "finding_evidence",
        "finding_log_lines",
        "chains",
        "detector_status",
    ):
        assert name in names
        cols = [r[0] for r in store.con.sql(f'DESCRIBE "{name}"').fetchall()]
        assert cols == [c.name for c in STORE_TABLES[name].columns], name
    assert (
        store.con.sql("SELECT count(*) FROM findings WHERE chain_id IS NULL").fetchall()[0][0] == 0
    )
    assert store.con.sql("SELECT count(*) FROM detector_status").fetchall()[0][0] == 14
    assert store.con.sql("SELECT text FROM finding_log_lines").fetchall() == [
        ("Out of memory: Killed process 4242 (python)",)
    ]
    store.close()


def test_json_output_validates_against_the_published_schema(tmp_path: Path) -> None:
    store = _incident_store()
    a = analyse(store, debug=True)
    store.close()
    result = Result(
        {"name": "t", "start_utc": t(0)},
        [{"file": "series/vmstat.out", "status": "parsed"}],
        {"vmstat": N},
        a.finding_dicts(),
        None,
        None,
    )
    result.chains, result.detectors = a.chain_dicts(), a.status
    out = tmp_path / "a.json"
    write_json(result, out)
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert (
        doc["chains"][0]["severity"] == "critical" and doc["findings"][0]["chain_id"] == 1
    )  # the top incident's cause first
    assert {d["detector"] for d in doc["detectors_not_evaluated"]} >= {"cpu_throttle", "net_errors"}


def test_quiet_capture_has_nothing_above_info() -> None:
    store = store_with(n=N, iostat_device=disk(N, wkb=2000.0), gpu_dmon=gpu(N, util=95.0),
                       vmstat=series(N, r=2, b=0, us_pct=50.0, sy_pct=5.0, id_pct=45.0, wa_pct=0.0, st_pct=0.0, since_boot=False, si_kb_s=0.0, so_kb_s=0.0))  # fmt: skip
    a = analyse(store, debug=True)
    store.close()
    assert [f for f in a.findings if f.severity != "info"] == []
    assert not any(s["reason"] and s["reason"].startswith("internal error") for s in a.status)


def _f(kind: str, a: int, b: int, sev: str = "minor", lost: float | None = None) -> Finding:
    return Finding(
        key=kind.upper(),
        kind=kind,
        title=kind,
        severity=sev,
        start=t(a),
        end=t(b),
        summary=kind,
        impact={} if lost is None else {"gpu_seconds_lost": lost},
    )


def test_correlate_follows_rule_direction_and_leaves_unrelated_findings_alone() -> None:
    fs = [
        _f("gpu_starvation", 12, 20, lost=10),
        _f("cpu_throttle", 10, 30),
        _f("net_errors", 100, 110),
        _f("oom_kill", 200, 201, "critical"),
    ]
    chains = correlate(fs)
    assert len(chains) == 3
    assert fs[chains[0].cause].kind == "oom_kill"  # critical first
    tc = next(c for c in chains if len(c.members) == 2)
    assert fs[tc.cause].kind == "cpu_throttle" and tc.gpu_seconds_lost == 10
    assert "cpu throttle" not in tc.title and "gpu starvation" in tc.title


def test_effect_after_the_allowed_lag_is_not_linked() -> None:
    fs = [_f("memory_pressure", 0, 10), _f("oom_kill", 71, 72, "critical")]  # 61 s after the window
    assert len(correlate(fs)) == 2
    fs = [_f("memory_pressure", 0, 10), _f("oom_kill", 69, 70, "critical")]
    assert len(correlate(fs)) == 1
