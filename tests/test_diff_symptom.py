"""`hindsight diff` leads with the application's symptom (issue #18, analyzer/diff_symptom.py).

Two real captures of the library (samples/real/): ``cpu-throttle`` (three cgroups under a
CFS quota, throttled at known times) as *before*, ``quiet-1`` (no quota) as *after*, each
analysed with an ``--app-series`` CSV of per-request latencies written here inside the
capture's span: before, the requests of a second during an injected throttling incident
(truth file) take 300 and 500 ms, the others 20 and 40 ms; after, 20/40 ms and 10/30 ms
in alternate seconds. The expected numbers are computed below from those records, by the
rules of docs/symptoms.md (a request counts in the second its stamp falls in; per-second
p99/p50 by linear interpolation) and docs/multi.md (seconds since the first second of
``signals``, the shorter capture's length; p50/p99 over seconds by linear interpolation).
"""

from __future__ import annotations

import doctest
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pytest

from analyzer import diff_symptom, pipeline
from analyzer.diff import run_diff
from analyzer.diff_symptom import match, mechanism_words
from analyzer.symptoms.words import fmt as fmt_value
from reports.render import DIFF

REAL = Path(__file__).resolve().parent.parent / "samples" / "real"
pytestmark = pytest.mark.skipif(
    not (REAL / "cpu-throttle.tgz").is_file() or not (REAL / "quiet-1.tgz").is_file(),
    reason="samples/real bundles not present",
)


def _analyze(bundle: Path, db: Path, *csvs: Path) -> None:
    """``analyze BUNDLE --db DB --app-series CSV...`` (the pipeline without the host report,
    which this test does not read)."""
    pipeline.run(bundle, pipeline.Options(db=db, app_series=list(csvs)))


def _span(db: Path) -> tuple[float, int]:
    """(epoch of the first second of signals, seconds of the grid) of an analysed store."""
    with duckdb.connect(str(db), read_only=True) as con:
        t0, t1 = con.sql("SELECT epoch(min(ts)), epoch(max(ts)) FROM signals").fetchall()[0]
    return float(t0), int(t1 - t0) + 1


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, polars' 'linear')."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def expected(records: list[tuple[float, float]], t0: float, aligned: int) -> dict[str, dict]:
    """Per stat (p99, p50 per second): n, mean, p50, p99 over the aligned seconds."""
    per_second: dict[int, list[float]] = defaultdict(list)
    for ts, value in records:
        k = math.floor(ts) - int(t0)  # the second the request completed in
        if 0 <= k < aligned:
            per_second[k].append(value)
    out = {}
    for stat, q in (("p99", 0.99), ("p50", 0.5)):
        seconds = [quantile(v, q) for _, v in sorted(per_second.items())]
        out[stat] = {
            "n": len(seconds),
            "mean": sum(seconds) / len(seconds),
            "p50": quantile(seconds, 0.5),
            "p99": quantile(seconds, 0.99),
        }
    return out


def _write_csv(path: Path, records: list[tuple[float, float]], column: str = "latency_ms") -> Path:
    path.write_text(
        f"timestamp,{column}\n" + "".join(f"{ts:.2f},{v:g}\n" for ts, v in records),
        encoding="utf-8",
    )
    return path


def _rate(sides: dict[str, tuple[list[tuple[float, float]], float]], aligned: int) -> dict:
    """A once-a-second series is taken as it is: the value of the second it is stamped in."""
    out = {}
    for side, (records, t0) in sides.items():
        values = [v for ts, v in records if 0 <= math.floor(ts) - int(t0) < aligned]
        out[side] = {"n": len(values), "mean": sum(values) / len(values)}
    return out


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("diff-symptom")
    plain_b, plain_a = root / "ct-plain.duckdb", root / "q1-plain.duckdb"
    _analyze(REAL / "cpu-throttle.tgz", plain_b)
    _analyze(REAL / "quiet-1.tgz", plain_a)
    (t0b, nb), (t0a, na) = _span(plain_b), _span(plain_a)
    truth = json.loads((REAL / "cpu-throttle.truth.json").read_text())
    incidents = [(i["start"], i["end"]) for i in truth["incidents"]]
    before: list[tuple[float, float]] = []
    rps_b: list[tuple[float, float]] = []  # requests/s, once a second: 50, 10 when slow
    for k in range(nb):
        sec = t0b + k
        slow = any(s <= sec + 0.5 < e for s, e in incidents)
        before += [(sec + 0.25, 300.0 if slow else 20.0), (sec + 0.75, 500.0 if slow else 40.0)]
        rps_b.append((sec + 0.5, 10.0 if slow else 50.0))
    after: list[tuple[float, float]] = []
    rps_a: list[tuple[float, float]] = []
    for k in range(na):
        sec = t0a + k
        after += [(sec + 0.25, 20.0 if k % 2 else 10.0), (sec + 0.75, 40.0 if k % 2 else 30.0)]
        rps_a.append((sec + 0.5, 48.0 if k % 2 else 52.0))
    db_b, db_a = root / "ct.duckdb", root / "q1.duckdb"
    rps = "requests_per_s"
    _analyze(
        REAL / "cpu-throttle.tgz", db_b, _write_csv(root / "ct-latency.csv", before),
        _write_csv(root / "ct-rate.csv", rps_b, rps),
    )  # fmt: skip
    _analyze(
        REAL / "quiet-1.tgz", db_a, _write_csv(root / "q1-latency.csv", after),
        _write_csv(root / "q1-rate.csv", rps_a, rps),
    )  # fmt: skip
    out = root / "out"
    out.mkdir()
    result = run_diff(
        db_b, db_a, html=out / "diff.html", md=out / "diff.md", json_path=out / "diff.json",
        renderers=DIFF,
    )  # fmt: skip
    aligned = min(nb, na)
    return {
        "root": root, "result": result, "aligned": aligned,
        "db_b": db_b, "db_a": db_a, "plain_b": plain_b, "plain_a": plain_a, "t0b": t0b,
        "want_b": expected(before, t0b, aligned), "want_a": expected(after, t0a, aligned),
        "want_rate": _rate({"before": (rps_b, t0b), "after": (rps_a, t0a)}, aligned),
        "md": (out / "diff.md").read_text(), "html": (out / "diff.html").read_text(),
        "doc": json.loads((out / "diff.json").read_text()),
    }  # fmt: skip


def _pair(result_or_doc: Any, stat: str) -> dict:
    sym = result_or_doc["symptoms"] if isinstance(result_or_doc, dict) else result_or_doc.symptoms
    return next(m for m in sym["matched"] if m["stat"] == stat)


def test_p99_and_p50_per_second_distributions_match_the_records_written(case) -> None:  # type: ignore[no-untyped-def]
    r = case["result"]
    assert r.aligned_s == case["aligned"]
    assert case["want_b"]["p99"]["n"] == case["aligned"]  # every second has two requests
    for stat in ("p99", "p50"):
        m = _pair(r, stat)
        assert (m["family"], m["labels"], m["match"]) == ("latency_ms", None, "exact")
        for side, want in (("before", case["want_b"][stat]), ("after", case["want_a"][stat])):
            got = m[side]
            assert got["n"] == want["n"], (stat, side)
            for k in ("mean", "p50", "p99"):
                assert got[k] == pytest.approx(want[k], rel=1e-9), (stat, side, k)
        for k in ("mean", "p50", "p99"):
            want_pct = (case["want_a"][stat][k] / case["want_b"][stat][k] - 1) * 100
            assert m["change_pct"][k] == pytest.approx(want_pct, rel=1e-9)
        assert m["better"] is True and m["verdict"] == "better"
    # by hand: slow seconds hold 300/500 ms -> per-second p99 = 300 + 0.99 × 200 = 498
    assert _pair(r, "p99")["before"]["p99"] == pytest.approx(498.0)
    assert _pair(r, "p99")["after"]["p99"] == pytest.approx(39.8)  # 20 + 0.99 × 20
    assert r.symptoms["only_before"] == [] and r.symptoms["only_after"] == []
    assert _pair(r, "p99")["before"]["windows"] == 3  # the three incidents start in the span


def test_throughput_is_judged_by_its_mean_and_lower_is_worse(case) -> None:  # type: ignore[no-untyped-def]
    r = case["result"]
    m = _pair(r, "value")
    assert (m["family"], m["kind"], m["worse"], m["lead_stat"]) == (
        "requests_per_s", "throughput", "down", "mean",
    )  # fmt: skip
    want = case["want_rate"]
    for side in ("before", "after"):
        assert m[side]["n"] == want[side]["n"] == case["aligned"]
        assert m[side]["mean"] == pytest.approx(want[side]["mean"], rel=1e-9)
    assert m["change_pct"]["mean"] == pytest.approx(
        (want["after"]["mean"] / want["before"]["mean"] - 1) * 100, rel=1e-9
    )
    # 10/s in fewer than half the seconds
    assert m["before"]["p50"] == 50.0 and m["before"]["p95"] == 50.0
    assert m["better"] is True and m["verdict"] == "better"  # more requests per second
    assert r.symptoms["matched"][r.symptoms["lead"]]["stat"] == "p99"  # latency leads


def _causes(db: Path, t0: float, aligned: int) -> dict[tuple[str, str], int]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.sql(
            """SELECT e.mechanism_group, e.candidate, count(DISTINCT e.window_id)
               FROM symptom_explanations e JOIN symptom_windows w USING (window_id)
               JOIN symptoms s ON s.symptom_id = e.symptom_id
               WHERE e.role = 'cause' AND s.stat = 'p99' AND s.family = 'latency_ms'
                 AND epoch(w.start_ts) >= $t0 AND epoch(w.start_ts) < $t0 + $n
               GROUP BY 1, 2""",
            params={"t0": t0, "n": aligned},
        ).fetchall()
    return {(g, c): int(n) for g, c, n in rows}


def test_the_causes_before_are_gone_after_with_their_window_counts(case) -> None:  # type: ignore[no-untyped-def]
    m = _pair(case["result"], "p99")
    want = _causes(case["db_b"], case["t0b"], case["aligned"])
    assert ("cpu_quota", "CPU_THROTTLE") in want  # the injected incidents explain it
    got = {(e["mechanism_group"], e["candidate"]): e for e in m["explanations"]}
    assert {k: e["before_windows"] for k, e in got.items()} == want
    assert all(e["status"] == "gone" and e["after_windows"] == 0 for e in got.values())
    # the related configuration: the quotas that are gone, the limited ones first
    quota = next(x for x in m["related_config"] if x["mechanism_group"] == "cpu_quota")
    changes = {c["key"]: c for c in case["result"].config["changes"]}
    strong = "cpu.cfs_quota_us quota_us (cpu/hs-real-thr-strong)"
    assert strong in quota["keys"] and changes[strong]["before"] == "20000"
    assert changes[strong]["change"] == "removed"
    assert all("cfs_" in k for k in quota["keys"])
    assert quota["keys"][0].startswith("cpu.cfs_quota_us")


def test_headline_leads_with_the_p99_change_and_the_quota_change(case) -> None:  # type: ignore[no-untyped-def]
    r = case["result"]
    b, a = case["want_b"]["p99"]["p99"], case["want_a"]["p99"]["p99"]
    pct = f"{(a / b - 1) * 100:+.0f} %".replace("-", "−")
    lead = f"after: P99 of latency_ms {fmt_value(b, 'ms')} → {fmt_value(a, 'ms')} ({pct}); "
    assert lead == "after: P99 of latency_ms 498 ms → 39.8 ms (−92 %); "
    assert r.headline.startswith(lead)
    first_quota = _pair(r, "p99")["related_config"][0]["keys"][0]
    assert f"; `{first_quota}` 55000 removed (+" in r.headline
    groups = {g for g, _ in _causes(case["db_b"], case["t0b"], case["aligned"])}
    gone = re.search(r"; cause gone: ([^;]+);", r.headline)
    assert gone is not None and "throttling" in gone[1].split(", ")
    assert set(gone[1].split(", ")) == {mechanism_words(g) for g in groups}
    assert "throttling gone" in r.headline  # the findings' part still follows
    assert "`cpu quota` added" not in r.headline  # an unlimited quota appearing is no limit


def test_markdown_starts_with_the_symptom_then_the_configuration_changes(case) -> None:  # type: ignore[no-untyped-def]
    md = case["md"]
    sections = re.findall(r"^## (.+)$", md, flags=re.M)
    assert sections[:3] == [
        "Symptom (per-second values over the aligned span)",
        "Host configuration changes",
        "Signals (per-second values over the aligned span)",
    ]
    assert md.count("## Host configuration changes") == 1  # moved, not repeated
    assert md.index("### P99 of latency\\_ms") < md.index("### P50 of latency\\_ms")
    wb, wa = case["want_b"]["p99"], case["want_a"]["p99"]
    assert f"| before | {wb['n']} | 39.8 | 498 | {wb['mean']:.0f} | 3 |" in md
    assert f"| after | {wa['n']} | 29.8 | 39.8 | {wa['mean']:.1f} | 0 |" in md
    n = _causes(case["db_b"], case["t0b"], case["aligned"])[("cpu_quota", "CPU_THROTTLE")]
    assert f"| cpu\\_quota (throttling) | CPU\\_THROTTLE (finding) | {n} → 0 | gone |" in md
    assert "- cpu.cfs\\_quota\\_us quota\\_us (cpu/hs-real-thr-strong): 20000 → – (removed)" in md


def test_html_page_has_the_symptom_section_its_chart_and_the_configuration_under_it(case) -> None:  # type: ignore[no-untyped-def]
    html = case["html"]
    order = re.findall(r'<section id="(\w+)"', html)
    assert order == ["symptom", "config", "signals", "charts", "findings"]
    assert "P99 of latency_ms 498 ms → 39.8 ms (−92 %)" in html
    i = next(i for i, m in enumerate(case["result"].symptoms["matched"]) if m["stat"] == "p99")
    assert f'<div class="chart" id="s-{i}" data-panel="s-{i}">' in html
    figures = json.loads(
        re.search(r'<script type="application/json" id="hs-figures">(.*?)</script>', html, re.S)[1]
    )["figures"]
    traces = {t["name"]: t for t in figures[f"s-{i}"]["data"]}
    assert set(traces) == {"before", "after"}
    assert max(traces["before"]["y"]) == pytest.approx(498.0)
    assert max(traces["after"]["y"]) == pytest.approx(39.8)
    assert traces["after"]["x"][0] == 0 and max(traces["after"]["x"]) == case["aligned"] - 1
    assert '<td class="st-gone">gone</td>' in html


def test_json_has_the_symptom_part_without_chart_series(case) -> None:  # type: ignore[no-untyped-def]
    doc = case["doc"]
    sym = doc["symptoms"]
    assert sym["present"] == {"before": True, "after": True}
    assert "series" not in sym
    m = sym["matched"][sym["lead"]]
    assert (m["stat"], m["lead_stat"], m["kind"]) == ("p99", "p99", "latency")
    assert m["before"]["p99"] == pytest.approx(case["want_b"]["p99"]["p99"])
    assert m["after"]["mean"] == pytest.approx(case["want_a"]["p99"]["mean"])
    assert m["before"]["source"].endswith("ct-latency.csv")
    assert {"signals", "histograms", "findings", "config", "notes", "headline"} <= set(doc)


def test_a_note_and_no_symptom_part_when_only_one_side_has_a_symptom(case) -> None:  # type: ignore[no-untyped-def]
    one = run_diff(case["db_b"], case["plain_a"])
    assert one.symptoms["present"] == {"before": True, "after": False}
    assert one.symptoms["matched"] == [] and one.symptoms["lead"] is None
    assert any(n.startswith("after: no application symptom") for n in one.notes)
    assert not one.headline.startswith("after: P99")
    md = DIFF.markdown(one)  # type: ignore[misc]
    assert "## Symptom" not in md and "- note: after: no application symptom" in md
    assert '<section id="symptom">' not in DIFF.html(one)  # type: ignore[misc]
    other = run_diff(case["plain_a"], case["db_b"])
    assert any(n.startswith("before: no application symptom") for n in other.notes)
    neither = run_diff(case["plain_b"], case["plain_a"])
    assert neither.symptoms["present"] == {"before": False, "after": False}
    assert not any("application symptom" in n for n in neither.notes)


def test_matching_by_family_labels_and_stat_then_without_instance_labels() -> None:
    b = [
        {"symptom_id": 1, "family": "lat", "labels": 'instance="a:1",model="x"', "stat": "p99"},
        {"symptom_id": 2, "family": "lat", "labels": 'model="y"', "stat": "p99"},
        {"symptom_id": 3, "family": "lat", "labels": None, "stat": "p50"},
    ]
    a = [
        {"symptom_id": 5, "family": "lat", "labels": 'model="z"', "stat": "p99"},  # another model
        {"symptom_id": 6, "family": "lat", "labels": 'instance="b:1",model="x"', "stat": "p99"},
        {"symptom_id": 7, "family": "lat", "labels": None, "stat": "p50"},
    ]
    pairs, only_b, only_a = match(b, a)
    assert [(x["symptom_id"], y["symptom_id"], how) for x, y, how in pairs] == [
        (3, 7, "exact"),
        (1, 6, "labels ignored: instance"),
    ]
    assert [r["symptom_id"] for r in only_b] == [2] and [r["symptom_id"] for r in only_a] == [5]


def test_module_doctests() -> None:
    result = doctest.testmod(diff_symptom)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.slow
def test_html_page_draws_the_symptom_chart_in_a_browser(case, chromium) -> None:  # type: ignore[no-untyped-def]
    page = case["root"] / "out" / "diff.html"
    with chromium.open(page, width=1400, height=900) as (tab, load):
        assert load.rendered and load.errors == [], load.errors
        lines = tab.evaluate(
            "document.querySelectorAll('#symptom .js-plotly-plot .scatterlayer .trace').length"
        )
    assert lines >= 4  # two symptoms, before and after each
