"""Tests of analyzer/parsers/app_metrics.py against tests/fixtures/app_metrics.

Golden: every ``<fixture>.expected.json`` beside a fixture holds the expected row count
of each table, the coverage, and exact values read by hand from the fixture text (the
local capture's quantiles computed by hand from its bucket counts, see the JSON). The
vendor pages are real (PROVENANCE.md); the small inline pages below are constructed to
check the derivation rules (reset, histogram_quantile edge cases, Triton's pairs) with
numbers that can be worked out on paper.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from blockwise import assert_same_as_one_block
from golden import check, fixture_of

from analyzer.errors import ParseError
from analyzer.parsers import app_metrics
from analyzer.parsers.base import ParseContext, ParseResult
from analyzer.sniff import MIN_CONFIDENCE

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "app_metrics"
GOLDEN = sorted(FIX.glob("*.expected.json"))


def _parse(path: Path, sink=None) -> ParseResult:
    res = app_metrics.parse(path, ParseContext(file_name=path.name, sink=sink))
    res.coverage.check()
    return res


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_fixture_matches_its_expected_rows_coverage_and_values(golden: Path) -> None:
    path = fixture_of(golden)
    assert app_metrics.sniff(path.read_text()[:65536], path.name) >= MIN_CONFIDENCE
    check(_parse(path), golden)


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_streaming_through_a_sink_gives_the_same_rows(golden: Path) -> None:
    path = fixture_of(golden)
    kept = _parse(path).tables
    sent: dict[str, list[pl.DataFrame]] = {}
    res = _parse(path, sink=lambda name, df: sent.setdefault(name, []).append(df))
    assert res.tables == {}
    assert set(sent) == set(app_metrics.TABLES)
    for name, frames in sent.items():
        assert pl.concat(frames).equals(kept[name]), name


def _scrapes(
    tmp: Path, *pages: tuple[float, str], end: str = "rc=0 bytes=1 truncated=0 dur_ms=1.0"
) -> Path:
    out = []
    for t, page in pages:
        out += [f"# hindsight-scrape begin {t} http://h:1/metrics", page.rstrip("\n")]
        out.append(f"# hindsight-scrape end {t + 0.01:.2f} {end}")
    p = tmp / "app_metrics_1.out"
    p.write_text("\n".join(out) + "\n")
    return p


HIST = """# TYPE lat_seconds histogram
lat_seconds_bucket{le="0.1"} %d
lat_seconds_bucket{le="0.2"} %d
lat_seconds_bucket{le="0.4"} %d
lat_seconds_bucket{le="+Inf"} %d
lat_seconds_count %d
lat_seconds_sum %f
"""


def test_histogram_quantiles_interpolate_inside_the_bucket_like_prometheus(tmp_path: Path) -> None:
    # interval deltas: le 0.1: 50, 0.2: 90, 0.4: 100, +Inf: 100 (cumulative)
    p = _scrapes(
        tmp_path,
        (100.0, HIST % (10, 10, 10, 10, 10, 1.0)),
        (101.0, HIST % (60, 100, 110, 110, 110, 13.0)),
    )
    q = _parse(p).tables["app_metric_quantile"].row(0, named=True)
    assert q["count"] == 100 and math.isclose(q["mean"], 0.12)
    assert math.isclose(q["p50"], 0.1)  # rank 50 ends bucket (0, 0.1]: 0 + 0.1 * 50/50
    assert math.isclose(q["p90"], 0.2)  # rank 90 = end of (0.1, 0.2]
    assert math.isclose(q["p99"], 0.2 + 0.2 * 9 / 10)  # rank 99 in (0.2, 0.4]: 9 of its 10
    assert math.isclose(q["p99_ms"], 380.0) and q["unit"] == "s"


def test_rank_in_the_inf_bucket_gives_the_highest_finite_bound(tmp_path: Path) -> None:
    p = _scrapes(
        tmp_path, (100.0, HIST % (0, 0, 0, 0, 0, 0)), (101.0, HIST % (0, 0, 1, 10, 10, 50.0))
    )
    q = _parse(p).tables["app_metric_quantile"].row(0, named=True)
    assert q["p50"] == 0.4 and q["p99"] == 0.4


def test_no_observation_or_no_inf_bucket_gives_null_quantiles(tmp_path: Path) -> None:
    page = HIST % (5, 5, 5, 5, 5, 1.0)
    p = _scrapes(tmp_path, (100.0, page), (101.0, page))
    q = _parse(p).tables["app_metric_quantile"].row(0, named=True)
    assert q["count"] == 0 and q["p50"] is None and q["mean"] is None
    no_inf = "\n".join(ln for ln in page.splitlines() if "+Inf" not in ln)
    p = _scrapes(tmp_path, (100.0, no_inf), (101.0, no_inf.replace(" 5", " 7")))
    q = _parse(p).tables["app_metric_quantile"].row(0, named=True)
    assert q["p50"] is None and q["p99"] is None and q["count"] == 2


def test_a_counter_that_goes_down_restarts_from_zero(tmp_path: Path) -> None:
    page = '# TYPE req counter\nreq_total{a="1"} %d\n'
    p = _scrapes(tmp_path, (100.0, page % 500), (101.0, page % 520), (103.0, page % 7))
    r = _parse(p).tables["app_metric_rate"]
    assert r.select("delta", "dt_s", "rate_per_s", "reset").rows() == [
        (20.0, 1.0, 20.0, False),
        (7.0, 2.0, 3.5, True),
    ]


def test_triton_duration_counters_give_a_mean_latency_per_interval(tmp_path: Path) -> None:
    page = (
        "# TYPE nv_inference_request_success counter\n"
        'nv_inference_request_success{model="densenet_onnx",version="1"} %d\n'
        "# TYPE nv_inference_request_duration_us counter\n"
        'nv_inference_request_duration_us{model="densenet_onnx",version="1"} %d\n'
        "# TYPE nv_inference_queue_duration_us counter\n"
        'nv_inference_queue_duration_us{model="densenet_onnx",version="1"} %d\n'
    )
    p = _scrapes(tmp_path, (100.0, page % (3, 1327965, 145)), (102.0, page % (13, 1427965, 1145)))
    q = _parse(p).tables["app_metric_quantile"].sort("family")
    assert q.select("family", "type", "count", "mean", "mean_ms", "rate_per_s").rows() == [
        ("nv_inference_queue_duration_us", "counter_pair", 10.0, 100.0, 0.1, 5.0),
        ("nv_inference_request_duration_us", "counter_pair", 10.0, 10000.0, 10.0, 5.0),
    ]


def test_summary_quantiles_are_taken_as_exposed(tmp_path: Path) -> None:
    page = (
        "# TYPE nv_inference_queue_summary_us summary\n"
        'nv_inference_queue_summary_us_count{model="m"} %d\n'
        'nv_inference_queue_summary_us_sum{model="m"} %d\n'
        'nv_inference_queue_summary_us{model="m",quantile="0.5"} 55\n'
        'nv_inference_queue_summary_us{model="m",quantile="0.9"} 97\n'
        'nv_inference_queue_summary_us{model="m",quantile="0.99"} 101\n'
    )
    p = _scrapes(tmp_path, (100.0, page % (100, 5000)), (101.0, page % (161, 11110)))
    q = _parse(p).tables["app_metric_quantile"].row(0, named=True)
    assert (q["count"], q["p50"], q["p90"], q["p99"], q["unit"]) == (61, 55, 97, 101, "us")
    assert math.isclose(q["mean"], 6110 / 61) and math.isclose(q["p99_ms"], 0.101)


def test_a_bad_scrape_costs_only_itself(tmp_path: Path) -> None:
    good = "# TYPE g gauge\ng 1\n"
    p = _scrapes(tmp_path, (100.0, good), (101.0, "g 1\nthis is not a sample\n"), (102.0, good))
    res = _parse(p)
    scrapes = res.tables["app_scrape"]
    assert scrapes.get_column("status").to_list() == ["ok", "unparsable", "ok"]
    assert res.tables["app_metric_sample"].height == 2
    assert res.coverage.skipped == {"page not accepted by prometheus_client's parsers": 2}


def test_failed_cut_and_stray_blocks_are_accounted_for(tmp_path: Path) -> None:
    p = tmp_path / "app_metrics_1.out"
    p.write_text(
        "stray line before any scrape\n"
        "# hindsight-scrape begin 100.0 http://h:1/metrics\n"
        "# hindsight-scrape end 100.8 rc=28 bytes=0 truncated=0 dur_ms=800.0 error=curl: (28) Operation timed out\n"
        "# hindsight-scrape begin 101.0 http://h:1/metrics\n"
        "# TYPE g gauge\ng 1\n"
    )
    res = _parse(p)
    s = res.tables["app_scrape"]
    assert s.select("status", "rc", "reason").rows() == [
        ("failed", 28, "curl: (28) Operation timed out"),
        ("cut", None, "no end marker: the capture stopped while writing it"),
    ]
    assert res.coverage.skipped == {
        "line outside a scrape block": 1,
        "scrape cut short (no end marker)": 2,
    }


def test_text_that_is_no_exposition_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "x.txt"
    p.write_text("hello\nworld\n")
    assert app_metrics.sniff(p.read_text(), p.name) == 0.0
    with pytest.raises(ParseError):
        _parse(p)


MIXED = (
    "stray line before any scrape\n"
    "# hindsight-scrape begin 100.0 http://h:1/metrics\n"
    "# TYPE g gauge\ng 1\n\n"
    "# hindsight-scrape end 100.1 rc=0 bytes=9 truncated=0 dur_ms=1.0\n"
    "stray line between scrapes\n"
    "# hindsight-scrape end 100.2 rc=0 bytes=9 truncated=0 dur_ms=1.0\n"
    "# hindsight-scrape begin 101.0 http://h:1/metrics\n"
    "# hindsight-scrape end 101.8 rc=28 bytes=0 truncated=0 dur_ms=800.0 error=timed out\n"
    "# hindsight-scrape begin 102.0 http://h:1/metrics\n"
    "# TYPE g gauge\ng 2\n"
    "# hindsight-scrape begin 103.0 http://h:1/metrics\n"
    "# TYPE c counter\nc_total 5\n# EOF\n"
    "# hindsight-scrape end 103.1 rc=0 bytes=9 truncated=1 dur_ms=1.0\n"
    "# hindsight-scrape begin 104.0 http://h:1/metrics\n"
    "# TYPE g gauge\ng 3\n"
)


@pytest.mark.parametrize(
    "name", ["local-capture__service-restart.out", "datadog-triton__densenet.prom", "mixed"]
)
def test_tables_do_not_depend_on_the_block_size(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, chunks = FIX / name, (5000,)
    if name == "mixed":
        path, chunks = tmp_path / "app_metrics_1.out", (40, 300)
        path.write_text(MIXED)
    assert_same_as_one_block(app_metrics, path, chunks, monkeypatch)


def test_a_page_over_the_size_cap_is_counted_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "app_metrics_1.out"
    p.write_text(MIXED)
    monkeypatch.setattr(app_metrics, "MAX_PAGE_BYTES", 30)
    res = _parse(p)
    big = res.tables["app_scrape"].filter(pl.col("reason") == "page too large to parse")
    assert big.get_column("ts").dt.epoch("s").to_list() == [103]
    assert res.coverage.skipped["page larger than 0 MiB"] == 3
    assert_same_as_one_block(app_metrics, p, (40, 300), monkeypatch)
