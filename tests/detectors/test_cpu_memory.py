"""cpu_throttle, cpu_contention, memory_pressure, oom_kill, swap_activity: tiny inputs in, findings out."""

import polars as pl
from detector_data import above_info, between, run, series, t

from analyzer.detectors import (
    cpu_contention,
    cpu_throttle,
    memory_pressure,
    oom_kill,
    swap_activity,
)
from analyzer.findings import NotEvaluated

N = 200


def _cg(pct: float, span: tuple[int, int] = (50, 100)) -> pl.DataFrame:
    return series(N, cgroup="/kubepods/pod1", nr_periods=lambda i: 10 * i, nr_throttled=0,
                  throttled_pct=lambda i: pct if between(i, [span]) else 0.0,
                  throttled_ms_per_s=lambda i: pct * 4 if between(i, [span]) else 0.0, usage_pct=390.0)  # fmt: skip


def _limits() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "cgroup": ["/kubepods/pod1"] * 2,
            "key": ["cpu.quota_us", "cpu.period_us"],
            "value": [400000, 100000],
            "unlimited": [False, False],
        }
    )


def test_a_third_of_periods_throttled_under_a_4_cpu_quota_is_minor_with_its_quota() -> None:
    """132 ms/s throttled over 4 CPUs of quota: 3.3 % of the quota's time withheld."""
    got = run(cpu_throttle, n=N, cgroup_cpu=_cg(33.0), cgroup_limits=_limits())
    assert isinstance(got, list) and [f.key for f in got] == ["CPU_THROTTLE"]
    f = got[0]
    assert f.severity == "minor" and f.duration_s == 50 and f.start == t(50)
    assert f.impact["seconds_throttled"] == 6.6  # 50 s x 132 ms/s
    assert f.impact["withheld_pct"] == 3.3
    assert "quota 4.00 CPUs" in f.summary and "/kubepods/pod1" in f.title


def _snapshot(*raws: str) -> pl.DataFrame:
    """host_config rows as the snapshot parser writes them for snap/cgroup_limits.*.out."""
    return pl.DataFrame(
        {"ts": [t(0)] * len(raws), "snapshot": ["start"] * len(raws),
         "source": ["cgroup_limits"] * len(raws), "key": ["k"] * len(raws),
         "value": ["v"] * len(raws), "raw": list(raws)}
    )  # fmt: skip


def test_quota_comes_from_the_cgroup_limits_snapshot_v2_and_v1() -> None:
    v2 = _snapshot("/sys/fs/cgroup/kubepods/pod1/cpu.max 250000 100000")
    got = run(cpu_throttle, n=N, cgroup_cpu=_cg(33.0), host_config=v2)
    assert isinstance(got, list) and "quota 2.50 CPUs" in got[0].summary
    assert "/sys/fs/cgroup/kubepods/pod1/cpu.max" in got[0].remediation[0]
    v1 = _snapshot(
        "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us 150000",
        "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us 100000",
    )
    got = run(cpu_throttle, n=N, cgroup_cpu=_cg(33.0), host_config=v1)
    assert isinstance(got, list) and "quota 1.50 CPUs" in got[0].summary


def test_an_unlimited_cpu_max_in_the_snapshot_is_no_quota() -> None:
    got = run(cpu_throttle, n=N, cgroup_cpu=_cg(33.0),
              host_config=_snapshot("/sys/fs/cgroup/kubepods/pod1/cpu.max max 100000"))  # fmt: skip
    assert isinstance(got, list) and "quota unknown" in got[0].summary


def test_throttling_just_below_ten_percent_is_one_mild_finding_naming_the_cgroup() -> None:
    got = run(cpu_throttle, n=N, cgroup_cpu=_cg(9.9))
    assert isinstance(got, list) and len(got) == 1
    assert got[0].title == "Mild CPU quota throttling in /kubepods/pod1 (10% of periods)"
    assert got[0].impact["withheld_pct"] == 4.0  # 39.6 ms/s, quota unknown: of one CPU
    assert got[0].severity == "minor"  # 4 % of the time withheld


def test_a_quota_binding_in_three_percent_of_periods_is_info_with_the_cpu_withheld() -> None:
    got = run(cpu_throttle, n=N, cgroup_cpu=_cg(3.0))  # 12 ms/s: 1.2 % withheld
    assert isinstance(got, list) and [f.severity for f in got] == ["info"]
    assert "3% of its CFS periods" in got[0].summary and "1% of the time" in got[0].summary


def test_throttling_below_one_percent_of_periods_gives_nothing() -> None:
    assert run(cpu_throttle, n=N, cgroup_cpu=_cg(0.9)) == []


def test_a_quota_withholding_most_of_the_time_for_30_s_is_major() -> None:
    """A busy loop under 20 % of one CPU: throttled ~750 ms of every second."""
    cg = series(N, cgroup="/job", nr_periods=lambda i: 10 * i, nr_throttled=0,
                throttled_pct=lambda i: 99.0 if between(i, [(50, 100)]) else 0.0,
                throttled_ms_per_s=lambda i: 750.0 if between(i, [(50, 100)]) else 0.0,
                usage_pct=20.0)  # fmt: skip
    got = run(cpu_throttle, n=N, cgroup_cpu=cg)
    assert isinstance(got, list) and [f.severity for f in got] == ["major"]
    assert got[0].impact["withheld_pct"] == 75.0


def test_cpu_throttle_without_cgroup_data_is_not_evaluated() -> None:
    got = run(cpu_throttle, n=N, vmstat=series(N, r=1, since_boot=False))
    assert isinstance(got, NotEvaluated) and "cgroup" in got.reason


def _vm(runq) -> pl.DataFrame:
    return series(
        N,
        r=runq,
        b=0,
        us_pct=90.0,
        sy_pct=8.0,
        id_pct=2.0,
        wa_pct=0.0,
        st_pct=0.0,
        cs_per_s=20000.0,
        since_boot=False,
    )


def test_run_queue_at_three_times_the_cpus_is_contention_naming_the_busiest_process() -> None:
    ps = series(N, pid=77, command="stress-ng", cpu_pct=750.0, wait_pct=40.0, since_boot=False)
    got = above_info(
        run(
            cpu_contention,
            cpus=8,
            n=N,
            vmstat=_vm(lambda i: 24 if 40 <= i < 140 else 4),
            pidstat=ps,
        )
    )
    assert [f.key for f in got] == ["CPU_CONTENTION"]
    assert got[0].severity == "major" and got[0].duration_s == 100
    assert "stress-ng" in got[0].summary


def test_run_queue_just_below_one_and_a_half_times_the_cpus_gives_nothing() -> None:
    assert (
        above_info(
            run(cpu_contention, cpus=8, n=N, vmstat=_vm(lambda i: 11 if 40 <= i < 140 else 4))
        )
        == []
    )


def _psi_mem(some, full) -> pl.DataFrame:
    return pl.concat([
        series(N, source="system", resource="memory", kind="some", avg10_pct=0.0, stall_pct=some),
        series(N, source="system", resource="memory", kind="full", avg10_pct=0.0, stall_pct=full),
    ])  # fmt: skip


def _oom_dmesg(at: int) -> pl.DataFrame:
    rows = [
        {"ts": t(at), "kind": "oom_invoked", "event_id": 1, "line_no": 10, "message": "python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"},
        {"ts": t(at), "kind": "oom_kill", "event_id": 1, "line_no": 11, "pid": 4242, "comm": "python", "uid": 1000, "memcg": "/train.slice",
         "oom_constraint": "CONSTRAINT_MEMCG", "anon_rss_kb": 30_000_000, "file_rss_kb": 1024, "shmem_rss_kb": 0, "total_vm_kb": 40_000_000,
         "message": "Out of memory: Killed process 4242 (python) total-vm:40000000kB, anon-rss:30000000kB, file-rss:1024kB, shmem-rss:0kB, UID:1000"},
    ]  # fmt: skip
    return pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.col("ts").cast(pl.Datetime("us", "UTC"))
    )


def test_memory_pressure_ramp_followed_by_an_oom_kill_is_major_and_the_kill_critical() -> None:
    ramp = [(100, 150)]
    inputs = {
        "psi": _psi_mem(
            lambda i: 40.0 if between(i, ramp) else 0.0, lambda i: 15.0 if between(i, ramp) else 0.0
        ),
        "meminfo": series(
            N, key="MemAvailable", value_kb=lambda i: 200_000 if between(i, ramp) else 20_000_000
        ),
        "dmesg": _oom_dmesg(151),
    }
    mp = above_info(run(memory_pressure, n=N, **inputs))
    assert (
        [f.key for f in mp] == ["MEMORY_PRESSURE"]
        and mp[0].severity == "major"
        and "OOM" in mp[0].summary
    )
    kills = run(oom_kill, n=N, **inputs)
    assert isinstance(kills, list) and len(kills) == 1
    k = kills[0]
    assert (
        k.severity == "critical"
        and k.impact["processes_killed"] == 1
        and "python (pid 4242" in k.summary
    )
    assert [ln.line_no for ln in k.log_lines] == [10, 11]
    assert any(e.signal == "mem_available_kb" and e.value == 200_000 for e in k.evidence)


def test_the_same_oom_in_two_log_files_is_one_finding() -> None:
    from detector_data import context, store_with

    store = store_with(dmesg=_oom_dmesg(50))
    store.write("dmesg", _oom_dmesg(50), "snap/dmesg_full.end.out")
    got = oom_kill.detect(context(store, n=N))
    store.close()
    assert (
        isinstance(got, list)
        and len(got) == 1
        and got[0].log_lines[0].source_file == "series/dmesg.out"
    )


def test_cgroup_oom_kill_counter_without_a_log_line_is_still_reported() -> None:
    cg = series(N, cgroup="/train.slice", events_oom_kill=lambda i: 0 if i < 120 else 1)
    got = run(oom_kill, n=N, cgroup_memory=cg)
    assert (
        isinstance(got, list)
        and len(got) == 1
        and got[0].impact["processes_killed"] == 1
        and got[0].caveats
    )


def test_memory_psi_just_below_threshold_gives_nothing() -> None:
    psi = _psi_mem(
        lambda i: 9.9 if 100 <= i < 150 else 0.0, lambda i: 4.9 if 100 <= i < 150 else 0.0
    )
    assert above_info(run(memory_pressure, n=N, psi=psi)) == []
    assert (
        above_info(
            run(oom_kill, n=N, psi=psi, dmesg=_oom_dmesg(0).filter(pl.col("kind") != "oom_kill"))
        )
        == []
    )


def test_sustained_swap_in_is_swap_activity_and_a_trickle_is_not() -> None:
    vm = series(
        N, si_kb_s=lambda i: 20_000.0 if 50 <= i < 100 else 0.0, so_kb_s=0.0, since_boot=False
    )
    got = above_info(run(swap_activity, n=N, vmstat=vm))
    assert [f.key for f in got] == ["SWAP_ACTIVITY"] and got[0].severity == "major"
    trickle = series(
        N, si_kb_s=lambda i: 1000.0 if 50 <= i < 100 else 0.0, so_kb_s=0.0, since_boot=False
    )
    assert above_info(run(swap_activity, n=N, vmstat=trickle)) == []
