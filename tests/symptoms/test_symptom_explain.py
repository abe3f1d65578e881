"""What explains a symptom window, on stores where the cause is known: the injected cause
ranks first with the numbers docs/symptoms.md derives by hand; a signal that moves later,
or without a mechanism, is concurrent and never a cause; a symptom nothing explains gets
no explanation (analyzer/symptoms/explain.py)."""

from __future__ import annotations

from symptom_data import VLLM, analysed, cgroup, disk, gpu, quantiles, rows, t, vmstat, within

N = 600
STARTS = [20 + 35 * k for k in range(16)]  # 16 throttled stretches of 10 s
QUIET = {3, 9}  # after these two, P99 stays at its baseline
THROTTLED = [(s, s + 10) for s in STARTS]
SLOW = [(s + 1, s + 11) for k, s in enumerate(STARTS) if k not in QUIET]  # lags by 1 s
LATE_WRITES = [(a + 4, a + 14) for a, _ in SLOW]  # starts 4 s into each symptom window


def _throttled_store():
    return analysed(
        N,
        vmstat=vmstat(N),
        cgroup_cpu=cgroup(N, lambda i: 60.0 if within(i, THROTTLED) else 0.0),
        iostat_device=disk(N, lambda i: 400_000.0 if within(i, LATE_WRITES) else 2000.0),
        gpu_dmon=gpu(N, lambda i: 40.0 if within(i, THROTTLED) else 95.0),
        app_metric_quantile=quantiles(N, lambda i: 2400.0 if within(i, SLOW) else 180.0),
    )


def test_quota_throttling_explains_14_of_16_windows_and_leads_by_1_s() -> None:
    store, _ = _throttled_store()
    wins = rows(store, "SELECT * FROM symptom_windows ORDER BY window_id")
    p99 = rows(store, "SELECT * FROM symptoms WHERE stat = 'p99'")[0]
    assert p99["family"] == VLLM and p99["baseline"] == 180.0 and p99["windows"] == 14
    assert [(w["start_ts"], w["end_ts"]) for w in wins] == [(t(a), t(b)) for a, b in SLOW]
    assert all(w["dur_s"] == 10 and w["level"] == 2400.0 for w in wins)
    top = rows(store, "SELECT * FROM symptom_explanations WHERE rank = 1 ORDER BY window_id")
    assert len(top) == 14 and {r["candidate"] for r in top} == {"throttled_pct"}
    assert {r["role"] for r in top} == {"cause"} and {r["mechanism_group"] for r in top} == {
        "cpu_quota"
    }
    r = top[0]
    assert (r["lag_s"], r["stretches"], r["stretches_with_symptom"], r["entity"]) == (
        1,
        16,
        14,
        "/serve",
    )
    assert (r["cooccurrence"], r["excess"], r["specificity"]) == (1.0, 12.0, 0.875)
    assert round(r["strength"], 3) == 0.923 and round(r["score"], 3) == 0.808
    assert r["sentence"].startswith(
        f'P99 of {VLLM}{{model_name="m"}} rose from 180 ms to 2.4 s at 14:00:21–14:00:31 UTC '
        "(10 s) with the share of CFS periods throttled (cgroup /serve) at 60 % (baseline 0 %); "
        "throttling leads by 1 s. P99 rose in 14 of 16 stretches with the share of CFS periods "
        "throttled ≥ 5 %. Mechanism: CFS quota throttling"
    )


def test_a_signal_that_starts_later_or_has_no_mechanism_is_concurrent_never_a_cause() -> None:
    store, _ = _throttled_store()
    causes = rows(
        store, "SELECT DISTINCT mechanism_group FROM symptom_explanations WHERE role = 'cause'"
    )
    assert causes == [{"mechanism_group": "cpu_quota"}]
    writes = rows(store, "SELECT * FROM symptom_explanations WHERE candidate = 'disk_write_kb_s'")
    assert len(writes) == 14 and {w["role"] for w in writes} == {"concurrent"}
    assert all(w["rank"] > 1 and not w["starts_first"] for w in writes)
    assert all("it follows the symptom" in w["why_not"] for w in writes)
    assert all(w["mechanism_group"] == "io" for w in writes)  # a mechanism, but it came later
    util = rows(store, "SELECT * FROM symptom_explanations WHERE candidate = 'gpu_util_mean_pct'")
    assert {u["role"] for u in util} == {"concurrent"} and all(u["rank"] > 3 for u in util)
    assert all(u["why_not"] == "no known mechanism links it to this symptom" for u in util)
    assert util[0]["sentence"].endswith(
        "with GPU utilisation at 40 % (baseline 95 %), but it is not shown as a cause: "
        "no known mechanism links it to this symptom."
    )
    # a cause outranks a concurrent signal even when the concurrent one scores higher
    first = rows(
        store, "SELECT role, score FROM symptom_explanations WHERE window_id = 1 ORDER BY rank"
    )
    assert first[0]["role"] == "cause"


def test_a_symptom_nothing_moves_with_has_no_explanation() -> None:
    slow = [(100, 120), (300, 330)]
    store, _ = analysed(
        N,
        vmstat=vmstat(N),
        cgroup_cpu=cgroup(N, lambda i: 0.0),
        app_metric_quantile=quantiles(N, lambda i: 2400.0 if within(i, slow) else 180.0),
    )
    assert rows(store, "SELECT count(*) AS n FROM symptom_windows")[0]["n"] == 2
    roles = rows(store, "SELECT DISTINCT role, sentence FROM symptom_explanations")
    assert roles == [{"role": "weak", "sentence": None}]


def test_without_an_application_series_no_symptom_table_is_written() -> None:
    store, _ = analysed(N, vmstat=vmstat(N))
    names = {r[0] for r in store.con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert not names & {"symptoms", "symptom_windows", "symptom_explanations"}


def test_an_internal_error_of_the_stage_leaves_a_row_saying_so(monkeypatch) -> None:
    from analyzer.analysis import analyse
    from analyzer.symptoms import stage

    def broken(*_args, **_kw):
        raise RuntimeError("boom")

    store, _ = analysed(N, vmstat=vmstat(N))  # no series yet: the stage writes nothing
    store.write(
        "app_metric_quantile", quantiles(N, lambda i: 2400.0 if 100 <= i < 120 else 180.0), "x"
    )
    monkeypatch.setattr(stage, "explain", broken)
    analyse(store)  # not debug: the analysis goes on
    got = rows(store, "SELECT name, status, reason FROM symptoms")
    assert got == [
        {
            "name": "symptom analysis",
            "status": "not analysed",
            "reason": "internal error: RuntimeError: boom",
        }
    ]


def test_a_bundle_with_only_the_application_series_gets_windows_and_no_explanation() -> None:
    slow = [(100, 120)]
    store, _ = analysed(
        N, app_metric_quantile=quantiles(N, lambda i: 2400.0 if within(i, slow) else 180.0)
    )
    got = rows(store, "SELECT start_ts, end_ts, level FROM symptom_windows")
    assert got == [{"start_ts": t(100), "end_ts": t(120), "level": 2400.0}]
    names = {r[0] for r in store.con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "symptom_explanations" not in names  # no host signal: nothing to rank
