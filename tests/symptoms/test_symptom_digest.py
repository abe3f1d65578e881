"""The symptom in the terminal summary and in ``analyze --json``: read back from the
symptom tables of a real capture (cpu-throttle) with a made-up latency series."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from analyzer.pipeline import Options, run
from analyzer.summary import format_summary
from tests.symptoms.symptom_data import THROTTLE_BUNDLE, latency_csv


def test_json_and_summary_carry_the_symptom_windows_and_their_explanations(tmp_path: Path) -> None:
    options = Options(db=tmp_path / "s.duckdb", json_path=tmp_path / "s.json")
    options.app_series = [latency_csv(tmp_path / "latency.csv")]
    result = run(THROTTLE_BUNDLE, options)
    doc = json.loads((tmp_path / "s.json").read_text())
    (sym,) = doc["symptoms"]
    with duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True) as con:
        windows = con.sql("SELECT window_id, level FROM symptom_windows ORDER BY 1").fetchall()
        first = con.sql(
            "SELECT window_id, candidate FROM symptom_explanations WHERE rank = 1 ORDER BY 1"
        ).fetchall()
        shown = con.sql("SELECT count(*) FROM symptom_explanations WHERE role <> 'weak'").fetchall()
    assert sym["stat"] == "p99" and sym["unit"] == "ms"
    assert [(w["id"], w["level"]) for w in sym["windows"]] == windows
    assert [(w["id"], w["explanations"][0]["candidate"]) for w in sym["windows"]] == first
    assert sum(len(w["explanations"]) for w in sym["windows"]) == shown[0][0]
    assert all(e["role"] != "weak" for w in sym["windows"] for e in w["explanations"])
    text = format_summary(result)
    assert text.index("  symptom   p99 of latency_ms (latency.csv): 3 windows") < text.index(
        "  findings"
    )
    assert text.count(" UTC ") >= 3


def test_without_an_application_series_json_symptoms_is_empty(tmp_path: Path) -> None:
    result = run(THROTTLE_BUNDLE, Options(json_path=tmp_path / "s.json"))
    assert json.loads((tmp_path / "s.json").read_text())["symptoms"] == []
    assert "symptom" not in format_summary(result)
