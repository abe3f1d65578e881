"""cpu_contention and sampling_gap on a shared host: other tenants keep the CPUs half busy,
so there is no idle baseline (tests/real/score.py measures the same on real captures)."""

from datetime import timedelta

import polars as pl
import pytest
from detector_data import T0, above_info, between, context, run, series, store_with, t

from analyzer.detectors import cpu_contention, sampling_gap
from analyzer.detectors._base import robust_level
from analyzer.findings import Finding, NotEvaluated
from analyzer.store import Store

N = 300
INJECT = (100, 140)
NOISE_R = [2, 3, 2, 4, 3, 2, 3, 3, 2, 5]  # vmstat r of a 2-CPU host with one busy tenant
NOISE_PSI = [18, 25, 12, 30, 21, 16, 35, 22, 14, 27]


def _vm(runq, busy) -> pl.DataFrame:
    return series(N, r=runq, b=0, us_pct=lambda i: busy(i) * 0.9, sy_pct=lambda i: busy(i) * 0.1,
                  id_pct=lambda i: 100.0 - busy(i), wa_pct=0.0, st_pct=0.0, cs_per_s=9000.0,
                  since_boot=False)  # fmt: skip


def _psi(some) -> pl.DataFrame:
    return series(N, source="system", resource="cpu", kind="some", avg10_pct=0.0, stall_pct=some)


def _noisy(level: dict[tuple[int, int], tuple[float, float, float]]) -> dict[str, pl.DataFrame]:
    """vmstat + CPU PSI of a noisy 2-CPU host; inside each span of ``level`` (runq, PSI %,
    busy %) instead (later spans win)."""

    def at(i: int, k: int, noise: float) -> float:
        inside = [v for span, v in level.items() if between(i, [span])]
        return inside[-1][k] if inside else noise

    return {
        "vmstat": _vm(lambda i: at(i, 0, NOISE_R[i % 10]), lambda i: at(i, 2, 55.0)),
        "psi": _psi(lambda i: at(i, 1, NOISE_PSI[i % 10])),
    }


def _contention(result: list[Finding] | NotEvaluated) -> list[Finding]:
    assert not isinstance(result, NotEvaluated), result
    return [f for f in result if f.key == "CPU_CONTENTION"]


def _span(f: Finding) -> tuple[float, float]:
    return (f.start - T0).total_seconds(), (f.end - T0).total_seconds()


def test_robust_level_is_the_usual_level_and_spread_whatever_a_minority_does() -> None:
    usual = [20.0, 18.0, 22.0, 19.0, 21.0, 20.0, 17.0, 23.0]
    med, sigma = robust_level(pl.Series(usual + [95.0] * 3 + [None]))  # type: ignore[misc]
    assert med == pytest.approx(21.0) and sigma == pytest.approx(1.4826 * 2.0)
    assert robust_level(pl.Series([5.0] * 10), min_sigma=0.5) == (5.0, 0.5)
    assert robust_level(pl.Series([None], dtype=pl.Float64)) is None


# -- cpu_contention -------------------------------------------------------------------------
def test_the_usual_load_of_a_noisy_host_is_no_contention() -> None:
    assert run(cpu_contention, cpus=2, n=N, **_noisy({})) == []


def test_an_injection_on_a_noisy_host_is_one_window_with_its_own_edges() -> None:
    got = _contention(run(cpu_contention, cpus=2, n=N, **_noisy({INJECT: (9, 94, 100)})))
    assert len(got) == 1, [(_span(f), f.severity) for f in got]
    a, z = _span(got[0])
    assert abs(a - INJECT[0]) <= 1 and abs(z - INJECT[1]) <= 1
    assert got[0].severity == "minor"


def test_the_evidence_is_the_median_run_queue_and_mean_psi_of_the_window() -> None:
    (f,) = _contention(run(cpu_contention, cpus=2, n=N, **_noisy({INJECT: (9, 94, 100)})))
    ev = {e.signal: e for e in f.evidence}
    a, z = (int(x) for x in _span(f))
    runq = [9 if between(i, [INJECT]) else NOISE_R[i % 10] for i in range(a, z)]
    psi = [94 if between(i, [INJECT]) else NOISE_PSI[i % 10] for i in range(a, z)]
    assert ev["runq"].value == pytest.approx(sorted(runq)[len(runq) // 2], abs=0.5)
    assert "median of vmstat r" in ev["runq"].note
    assert ev["psi_cpu_some_pct"].value == pytest.approx(sum(psi) / len(psi), abs=0.1)
    assert "mean" in ev["psi_cpu_some_pct"].note
    assert ev["runq"].baseline == pytest.approx(3, abs=1)  # the noisy host's usual level


def test_an_injection_on_top_of_a_milder_episode_is_its_own_window() -> None:
    mild, strong = ((60, 180), (4, 60, 100)), (INJECT, (10, 97, 100))
    got = _contention(run(cpu_contention, cpus=2, n=N, **_noisy(dict([mild, strong]))))
    spans = [_span(f) for f in got]
    inj = [
        f for f, (a, z) in zip(got, spans, strict=True) if abs(a - 100) <= 1 and abs(z - 140) <= 1
    ]
    assert len(inj) == 1, spans
    assert inj[0].severity == "minor"
    milder = [f for f in got if f is not inj[0]]
    assert milder and all(f.severity == "info" for f in milder), spans  # no queue: info
    psi = {id(f): next(e.value for e in f.evidence if e.signal == "psi_cpu_some_pct") for f in got}
    assert all(psi[id(inj[0])] > psi[id(f)] + 20 for f in milder)


def test_a_queue_while_the_cpus_had_time_to_spare_is_info() -> None:
    bursty = {INJECT: (6, 60, 80)}  # tasks wake together; the CPUs 20 % idle on average
    got = _contention(run(cpu_contention, cpus=2, n=N, **_noisy(bursty)))
    assert [f.severity for f in got] == ["info"]
    saturated = {INJECT: (6, 60, 97)}
    got = _contention(run(cpu_contention, cpus=2, n=N, **_noisy(saturated)))
    assert [f.severity for f in got] == ["minor"]


def test_a_host_contended_from_start_to_end_is_one_info_finding_throughout() -> None:
    got = run(cpu_contention, cpus=2, n=N, **_noisy({(0, N): (8, 90, 100)}))
    assert isinstance(got, list) and len(got) == 1
    assert got[0].severity == "info" and got[0].impact["throughout"] is True
    assert _span(got[0]) == (0, N) and "throughout" in got[0].title


def _mp_pinned(hot: int, span: tuple[int, int], cpus: int = 8) -> pl.DataFrame:
    rows = [series(N, cpu=c, usr_pct=lambda i, c=c: 100.0 if c == hot and between(i, [span]) else 12.0,
                   sys_pct=0.0, iowait_pct=0.0, since_boot=False,
                   idle_pct=lambda i, c=c: 0.0 if c == hot and between(i, [span]) else 88.0)
            for c in range(cpus)]  # fmt: skip
    return pl.concat(rows).with_columns(pl.col("cpu").cast(pl.Int32))


def _ps_pinned(cpu: int, span: tuple[int, int], tasks: int, wait: float) -> pl.DataFrame:
    rows = [series(N, pid=101 + k, command="stress-ng", cpu=cpu, since_boot=False,
                   cpu_pct=lambda i: 100.0 / tasks if between(i, [span]) else 0.0,
                   wait_pct=lambda i: wait if between(i, [span]) else 0.0)
            for k in range(tasks)]  # fmt: skip
    return pl.concat(rows).with_columns(pl.col("cpu").cast(pl.Int32))


def _pinned_inputs(tasks: int, wait: float) -> dict[str, pl.DataFrame]:
    span = (60, 120)  # 8 CPUs; the host-wide run queue and PSI stay low (the others idle)
    return {
        "vmstat": _vm(lambda i: 3 + tasks if between(i, [span]) else 2, lambda i: 23.0),
        "psi": _psi(lambda i: 9.0 if between(i, [span]) else 1.0),
        "mpstat_cpu": _mp_pinned(1, span),
        "pidstat": _ps_pinned(1, span, tasks, wait),
    }


def test_tasks_pinned_to_one_cpu_are_found_naming_the_cpu_and_the_tasks() -> None:
    got = above_info(run(cpu_contention, cpus=8, n=N, **_pinned_inputs(4, 75.0)))
    assert [(_span(f), f.severity) for f in got] == [((60, 120), "minor")]
    f = got[0]
    assert f.impact["cpu"] == 1 and "CPU 1" in f.summary
    ev = {e.signal: e for e in f.evidence}
    assert ev["cpu1_idle_pct"].value == 0.0 and ev["cpu_wait_pct"].value == pytest.approx(300)
    tasks = [e.note for e in f.evidence if e.signal == "process_cpu_pct"]
    assert len(tasks) == 4 and all("stress-ng" in n and "only on CPU 1" in n for n in tasks)


def test_one_busy_cpu_without_waiting_tasks_is_no_contention() -> None:
    assert above_info(run(cpu_contention, cpus=8, n=N, **_pinned_inputs(1, 0.0))) == []


# -- sampling_gap ---------------------------------------------------------------------------
def _drop(df: pl.DataFrame, spans: list[tuple[int, int]]) -> pl.DataFrame:
    return df.filter(
        ~pl.int_range(0, df.height).map_elements(lambda i: between(i, spans), pl.Boolean)
    )


def _quiet_host() -> dict[str, pl.DataFrame]:
    return {
        "vmstat": _vm(2, lambda i: 20.0),
        "psi": _psi(5.0),
        "mpstat_cpu": series(N, cpu=-1, idle_pct=80.0, iowait_pct=0.0, since_boot=False),
    }


def test_a_collector_stopped_for_19_s_is_minor_and_a_3_s_hiccup_info() -> None:
    inputs = _quiet_host()
    inputs["vmstat"] = _drop(inputs["vmstat"], [(50, 69), (200, 203)])
    inputs["psi"] = _drop(inputs["psi"], [(200, 203)])
    got = run(sampling_gap, n=N, **inputs)
    assert isinstance(got, list)
    assert [(_span(f), f.severity) for f in got] == [((50, 69), "minor"), ((200, 203), "info")]
    assert got[0].impact["rows_lost"] == 19 and got[0].impact["collectors"] == 1
    assert got[1].impact["collectors"] == 2 and got[1].impact["longest_missing_s"] == 3


def test_collectors_starved_inside_a_cpu_contention_are_its_effect() -> None:
    inputs = _noisy({INJECT: (9, 94, 100)})
    inputs["mpstat_cpu"] = _drop(
        series(N, cpu=-1, idle_pct=45.0, iowait_pct=0.0, since_boot=False), [(120, 123), (250, 253)]
    )
    inputs["vmstat"] = _drop(inputs["vmstat"], [(120, 123)])
    got = run(sampling_gap, cpus=2, n=N, **inputs)
    assert isinstance(got, list) and [_span(f) for f in got] == [(120, 123), (250, 253)]
    inside, outside = got
    assert inside.impact["effect_of"] == "cpu_contention" and inside.severity == "info"
    assert "effect of the contention" in inside.summary
    assert "effect_of" not in outside.impact


def test_one_collector_stopped_for_long_while_the_others_sample_is_no_effect_of_contention() -> (
    None
):
    inputs = _noisy({INJECT: (9, 94, 100)})  # vmstat and PSI; PSI keeps sampling
    inputs["mpstat_cpu"] = series(N, cpu=-1, idle_pct=45.0, iowait_pct=0.0, since_boot=False)
    inputs["vmstat"] = _drop(inputs["vmstat"], [(110, 125)])  # SIGSTOP, not starvation
    got = run(sampling_gap, cpus=2, n=N, **inputs)
    assert isinstance(got, list) and [(_span(f), f.severity) for f in got] == [
        ((110, 125), "minor")
    ]
    assert "effect_of" not in got[0].impact and len(got[0].impact["still_sampling"]) == 2
    assert "stopped on its own" in got[0].summary


def _hand_made(**tables: pl.DataFrame) -> Store:
    store = store_with(**tables)
    row = {"name": "t", "cpus": 8, "start_utc": T0, "end_utc": t(N - 1),
           "manifest_present": False, "interval_s": 1.0}  # fmt: skip
    store.write("bundle", pl.DataFrame([row]), None)
    return store


def test_a_collector_ending_early_in_a_hand_made_bundle_is_no_gap() -> None:
    short = _quiet_host()["vmstat"].head(120)  # vmstat was run for 2 minutes, the rest for 5
    store = _hand_made(vmstat=short, psi=_quiet_host()["psi"])
    try:
        assert sampling_gap.detect(context(store, 8, N)) == []
    finally:
        store.close()
    # the same files from the capture script: vmstat died two minutes in
    got = run(sampling_gap, n=N, vmstat=short, psi=_quiet_host()["psi"])
    assert isinstance(got, list) and len(got) == 1
    assert got[0].start == t(120) and got[0].end - got[0].start >= timedelta(seconds=150)
