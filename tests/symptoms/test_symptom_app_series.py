"""`analyze --app-series FILE`: CSV and JSONL read with polars, every record accounted for,
zones required (analyzer/symptoms/app_series.py)."""

from __future__ import annotations

import doctest
import importlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from analyzer.symptoms import app_series
from analyzer.symptoms.app_series import SeriesError


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_records_with_zones_and_epochs_and_bad_rows_counted_with_reasons(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, "lt.csv", "\n".join([
        "timestamp,latency_ms,status,url",
        "2026-11-29T14:00:00.120Z,182,200,/a",
        "2026-11-29 15:00:00.480+01:00,175,200,/b",  # the same hour, another zone
        "1796220001.5,2410,200,/c",  # epoch seconds in the same column
        "",
        "yesterday,1,200,/d",
        "2026-11-29T14:00:02Z,,200,/e",
        "1796220003,n/a,500,/f",
    ]) + "\n")  # fmt: skip
    s = app_series.read(path)
    assert s.frame["value"].to_list() == [182.0, 175.0, 2410.0]
    assert s.frame["ts"].to_list() == [
        datetime(2026, 11, 29, 14, 0, 0, 120000, tzinfo=UTC),
        datetime(2026, 11, 29, 14, 0, 0, 480000, tzinfo=UTC),
        datetime(2026, 12, 2, 14, 0, 1, 500000, tzinfo=UTC),
    ]
    assert set(s.frame["series"]) == {"latency_ms"}  # status is a code, url is text
    cov = s.coverage
    assert (cov.total, cov.parsed) == (8, 3)
    assert cov.structure == {"header": 1, "blank record": 1}
    assert cov.skipped == {"time unparsable": 1, "no numeric value": 2}
    row = app_series.collectors_row(s)
    assert row["status"] == "partial" and row["collector"] == "app_series" and row["tool"] == "csv"
    assert json.loads(row["skip_reasons"])["skipped: no numeric value"] == 2
    assert "not numeric, ignored: url" in row["notes"]


def test_jsonl_lines_that_are_not_objects_or_lack_a_time_are_skipped(tmp_path: Path) -> None:
    path = _write(tmp_path, "k6.jsonl", "\n".join([
        '{"time": 1796220000500, "metric_name": "http_req_duration", "metric_value": 12.5}',
        '{"time": 1796220000900, "metric_name": "http_req_waiting", "metric_value": "10"}',
        "not json",
        "[1, 2]",
        '{"metric_name": "http_req_duration", "metric_value": 3}',
        "",
        '{"time": 1796220001000, "metric_name": "http_req_duration", "metric_value": null}',
    ]) + "\n")  # fmt: skip
    s = app_series.read(path)
    assert s.tool == "jsonl"
    assert s.frame.select("series", "value").rows() == [
        ("http_req_duration", 12.5),
        ("http_req_waiting", 10.0),
    ]
    assert s.frame["ts"][0] == datetime(2026, 12, 2, 14, 0, 0, 500000, tzinfo=UTC)  # epoch ms
    assert s.coverage.skipped == {"not a JSON object": 2, "no time": 1, "no numeric value": 1}
    assert s.coverage.structure == {"blank line": 1}
    assert "numbers read as epoch milliseconds" in " ".join(s.coverage.notes)


def test_a_time_without_a_zone_is_an_error_unless_tz_names_one(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "grafana.csv", "Time,p99_ms\n2026-11-29 15:00:00,180\n2026-03-29 02:30:00,200\n"
    )
    with pytest.raises(SeriesError, match=r"times without a zone .* give --tz ZONE"):
        app_series.read(path)
    s = app_series.read(path, tz="Europe/Berlin")
    assert s.frame["ts"].to_list() == [datetime(2026, 11, 29, 14, 0, tzinfo=UTC)]
    assert s.coverage.skipped == {"time in a DST gap of Europe/Berlin": 1}
    with pytest.raises(SeriesError, match="--tz Mars/Olympus"):
        app_series.read(path, tz="Mars/Olympus")


def test_unusable_files_say_why(tmp_path: Path) -> None:
    with pytest.raises(SeriesError, match="no such file"):
        app_series.read(tmp_path / "missing.csv")
    with pytest.raises(SeriesError, match="no time column"):
        app_series.read(_write(tmp_path, "a.csv", "when,latency_ms\n1,2\n"))
    with pytest.raises(SeriesError, match="no numeric value column"):
        app_series.read(_write(tmp_path, "b.csv", "ts,url\n1796220000,/a\n"))


def test_the_file_is_opened_by_its_exact_name_not_as_a_glob(tmp_path: Path) -> None:
    _write(tmp_path, "x1.csv", "ts,latency_ms\n1796220000,999\n")
    path = _write(tmp_path, "x[1].csv", "ts,latency_ms\n1796220000,5\n")
    assert app_series.read(path).frame["value"].to_list() == [5.0]


def test_docstring_examples_hold() -> None:
    for name in ("analyzer.symptoms.series", "analyzer.symptoms.words"):
        assert doctest.testmod(importlib.import_module(name)).failed == 0
