"""Throttling also shows as CPU pressure (analyzer/symptoms/explain.py, module docstring):
a throttled cgroup's threads stay runnable, so PSI counts their wait for the next CFS
period, while the run queue (vmstat r) drops them. In a window that throttling explains,
CPU pressure is concurrent, not a second cause — unless the run queue grew too (then
tasks did wait for busy CPUs, and contention is a cause of its own).

Seen in the real capture samples/real/svc-quota.tgz: under a 20 % quota the host's CPU
pressure rose to ~55 % with the CPUs 86 % idle and the run queue at its usual 2."""

from __future__ import annotations

from symptom_data import analysed, cgroup, quantiles, rows, series, within

N = 400
THROTTLED = [(40 + 60 * k, 70 + 60 * k) for k in range(6)]  # 6 stretches of 30 s


def _store(runq_grows: bool):
    def busy(i: int) -> bool:
        return within(i, THROTTLED)

    return analysed(
        N,
        vmstat=series(
            N, r=lambda i: 9 if runq_grows and busy(i) else 2, b=0, us_pct=20.0, sy_pct=5.0,
            id_pct=74.5, wa_pct=0.5, st_pct=0.0, since_boot=False,
        ),
        cgroup_cpu=cgroup(N, lambda i: 95.0 if busy(i) else 0.0),
        psi=series(
            N, source="system", resource="cpu", kind="some",
            avg10_pct=lambda i: 55.0 if busy(i) else 5.0, avg60_pct=5.0, avg300_pct=5.0,
            total_us=0, stall_pct=lambda i: 55.0 if busy(i) else 5.0,
        ),
        app_metric_quantile=quantiles(N, lambda i: 300.0 if busy(i) else 15.0),
    )  # fmt: skip


def _by(store, candidate: str) -> list[dict]:
    return rows(
        store,
        "SELECT * FROM symptom_explanations WHERE candidate = $c ORDER BY window_id",
        {"c": candidate},
    )


def test_cpu_pressure_from_throttling_alone_is_concurrent_not_a_second_cause() -> None:
    store, _ = _store(runq_grows=False)
    thr, psi = _by(store, "throttled_pct"), _by(store, "psi_cpu_some_pct")
    assert len(thr) == len(psi) == 6
    assert {r["role"] for r in thr} == {"cause"} and {r["rank"] for r in thr} == {1}
    assert {r["role"] for r in psi} == {"concurrent"}
    assert {r["mechanism_group"] for r in psi} == {"cpu_contention"}  # the group stays
    assert all("the cgroup's throttling explains it" in r["why_not"] for r in psi)
    assert all(r["sentence"].endswith(".") and "not shown as a cause" in r["sentence"] for r in psi)
    causes = rows(
        store, "SELECT DISTINCT mechanism_group FROM symptom_explanations WHERE role = 'cause'"
    )
    assert causes == [{"mechanism_group": "cpu_quota"}]


def test_cpu_pressure_with_a_growing_run_queue_stays_a_cause() -> None:
    store, _ = _store(runq_grows=True)
    psi, runq = _by(store, "psi_cpu_some_pct"), _by(store, "runq")
    assert {r["role"] for r in runq} == {"cause"}
    assert {r["role"] for r in psi} == {"cause"}
    assert all(r["why_not"] is None for r in psi)
