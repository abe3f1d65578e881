"""GPU dips split by cause, power caps, page-cache bursts, Xid pairs, finished collectors."""

from datetime import timedelta

import polars as pl
from detector_data import between, context, disk, gpu, run, series, store_with, t

from analyzer.correlate import correlate, links
from analyzer.detectors import checkpoint_stall, gpu_starvation, gpu_throttle, gpu_xid
from analyzer.detectors import sampling_gap as gaps
from analyzer.findings import Finding

N = 300


def _vm(busy: list[tuple[int, int]] = (), runq: float = 20.0) -> pl.DataFrame:
    """8 CPUs 40 % busy; inside ``busy`` all CPUs busy with ``runq`` runnable tasks."""
    return series(
        N,
        r=lambda i: runq if between(i, busy) else 2.0,
        b=0,
        us_pct=lambda i: 97.0 if between(i, busy) else 35.0,
        sy_pct=lambda i: 3.0 if between(i, busy) else 5.0,
        id_pct=lambda i: 0.0 if between(i, busy) else 60.0,
        wa_pct=0.0,
        st_pct=0.0,
        since_boot=False,
    )


def test_a_dip_whose_cause_changes_is_split_into_one_finding_per_cause() -> None:
    dip, cpu, write = [(130, 160)], [(130, 152)], [(152, 160)]
    inputs = {
        "gpu_dmon": gpu(N, util=lambda i: 4.0 if between(i, dip) else 95.0),
        "vmstat": _vm(cpu),
        "iostat_device": disk(N, wkb=lambda i: 800_000.0 if between(i, write) else 2000.0),
    }
    got = run(gpu_starvation, n=N, **inputs)
    assert isinstance(got, list)
    assert [(f.impact["cause"], f.start, f.end) for f in got] == [
        ("cpu_contention", t(130), t(152)),
        ("io", t(152), t(160)),
    ]
    assert "whose cause changes" in got[0].summary
    ckpt = run(checkpoint_stall, n=N, **inputs)
    assert isinstance(ckpt, list) and [(f.start, f.end) for f in ckpt] == [(t(152), t(160))]


def test_a_dip_with_one_cause_and_unexplained_seconds_stays_whole() -> None:
    dip, write = [(100, 115)], [(110, 114)]
    got = run(
        gpu_starvation,
        n=N,
        gpu_dmon=gpu(N, util=lambda i: 2.0 if between(i, dip) else 95.0),
        vmstat=_vm(),
        iostat_device=disk(N, wkb=lambda i: 900_000.0 if between(i, write) else 2000.0),
    )
    assert isinstance(got, list) and [(f.impact["cause"], f.start, f.end) for f in got] == [
        ("io", t(100), t(115))
    ]


def _capped_gpu(dips: dict[tuple[int, int], tuple[float, float, int]]) -> pl.DataFrame:
    """One GPU at its power cap while busy; ``dips``: span -> (util, pviol, clock)."""

    def pick(i: int, k: int, busy: float) -> float:
        return next((v[k] for span, v in dips.items() if between(i, [span])), busy)

    return gpu(N, util=lambda i: pick(i, 0, 97.0), gpus=1).with_columns(
        pviol_pct=pl.Series([pick(i, 1, 100.0) for i in range(N)]),
        pclk_mhz=pl.Series([int(pick(i, 2, 1650)) for i in range(N)]),
        pwr_w=695.0,
    )


def test_a_power_cap_does_not_explain_a_dip_to_near_zero_but_does_a_moderate_one() -> None:
    g = _capped_gpu(
        {
            (100, 101): (6.0, 58.0, 1980),  # the transition second still shows the busy pviol
            (101, 110): (2.0, 0.0, 1980),
            (200, 230): (40.0, 80.0, 1100),  # clocks far down, GPU still 40 % busy
        }
    )
    got = run(gpu_starvation, n=N, gpu_dmon=g, vmstat=_vm())
    assert isinstance(got, list)
    assert [(f.start, f.impact["cause"]) for f in got] == [
        (t(100), "unexplained"),
        (t(200), "power_thermal"),
    ]


def _gpu_info(max_clock: int = 1980, limit_w: float = 700.0) -> pl.DataFrame:
    return series(
        1,
        gpu=0,
        enforced_power_limit_w=limit_w,
        power_limit_w=limit_w,
        max_sm_clock_mhz=max_clock,
        throttle_reasons_active="sw_power_cap",
    ).with_columns(pl.col("gpu").cast(pl.Int32))


def test_a_gpu_at_its_power_limit_for_most_of_its_busy_time_is_a_sustained_cap() -> None:
    g = _capped_gpu({(0, 20): (0.0, 0.0, 1980)})
    got = run(gpu_throttle, n=N, gpu_dmon=g, gpu_info=_gpu_info())
    assert isinstance(got, list) and len(got) == 1
    cap = got[0]
    assert cap.impact["sustained"] and cap.severity == "minor" and "power cap" in cap.title
    assert 82 <= cap.impact["clock_pct_of_max"] <= 84
    assert (cap.start, cap.end) == (t(20), t(N))
    notes = {e.signal: e for e in cap.evidence}
    assert (
        notes["gpu0 pclk_mhz"].baseline == 1980
        and "sw_power_cap" in notes["gpu0 clock_event_reasons"].note.lower()
    )


def test_a_gpu_below_its_limits_has_no_sustained_cap() -> None:
    g = gpu(N, util=97.0, gpus=1)  # pviol 0, 400 W of 700 W, full clock
    assert run(gpu_throttle, n=N, gpu_dmon=g, gpu_info=_gpu_info()) == []


def test_a_buffered_checkpoint_starts_when_the_page_cache_fills_not_when_the_disk_writes() -> None:
    flush = [(104, 106)]  # torch.save fills the page cache at 800 MB/s, then fsync writes

    def dirty_kb(i: int) -> float:
        if i < 100 or i >= 106:
            return 20_000.0
        return 20_000.0 + 800_000.0 * min(i - 99, 4)

    mem = series(N, key="Dirty", value_kb=dirty_kb)
    inputs = {
        "meminfo": mem,
        "iostat_device": disk(N, wkb=lambda i: 1_600_000.0 if between(i, flush) else 2000.0),
        "gpu_dmon": gpu(N, util=lambda i: 3.0 if 99 <= i < 106 else 95.0),
    }
    store = store_with(**inputs)
    try:
        ctx = context(store, n=N)
        bursts, base = checkpoint_stall.write_bursts(ctx)
        assert bursts == [(t(100), t(106))] and base["page_cache_write_kb_s"] == 0.0
        (f,) = checkpoint_stall.detect(ctx)  # type: ignore[misc]
        assert f.start == t(99) and f.end == t(106)
        assert any(e.signal == "page_cache_write_kb_s" and e.value for e in f.evidence)
    finally:
        store.close()


def test_xid_13_then_43_on_one_gpu_is_one_incident() -> None:
    msg = "NVRM: Xid (PCI:0000:18:00): {}, pid=42, name=python3, Ch 00000008"
    rows = [
        {"ts": t(10) + timedelta(microseconds=400_000), "kind": "xid", "xid_code": c, "pci_bus": "0000:18:00", "line_no": n, "message": msg.format(c)}
        for n, c in ((1, 13), (2, 13), (3, 43))
    ]  # fmt: skip
    dmesg = pl.DataFrame(rows).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    got = run(gpu_xid, n=60, dmesg=dmesg)
    assert isinstance(got, list) and len(got) == 1
    assert "Xid 13" in got[0].title and "43" in got[0].title
    assert (got[0].start, got[0].end) == (t(10), t(11))  # the second it happened in


def test_an_xid_line_the_parser_could_not_split_still_gives_its_code() -> None:
    bad = (
        "NVRM: Xid (PCI:0000:18:): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    )
    dmesg = pl.DataFrame(
        [
            {
                "ts": t(5),
                "kind": "xid",
                "xid_code": None,
                "pci_bus": None,
                "line_no": 1,
                "message": bad,
            }
        ]
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")), pl.col("xid_code").cast(pl.Int64))
    got = run(gpu_xid, n=60, dmesg=dmesg)
    assert isinstance(got, list) and got[0].severity == "critical" and "Xid 79" in got[0].title


def test_a_sysstat_tool_that_printed_all_its_samples_has_no_tail_gap() -> None:
    n = 120
    vm = series(n, r=1, since_boot=False).filter(pl.int_range(0, n) < 90)  # vmstat 1 90
    psi = series(n, source="system", resource="cpu", kind="some", avg10_pct=1.0)
    finished = pl.DataFrame({"file": ["series/vmstat.out"], "exit_code": [0]})
    assert run(gaps, n=n, vmstat=vm, psi=psi, collectors=finished) == []
    killed = finished.with_columns(exit_code=pl.lit(143))
    got = run(gaps, n=n, vmstat=vm, psi=psi, collectors=killed)
    assert isinstance(got, list) and [(f.start, f.end) for f in got] == [(t(90), t(120))]


def _f(kind: str, a: int, b: int, cause: str | None = None, **impact: object) -> Finding:
    impact = {"cause": cause, **impact} if cause else dict(impact)
    return Finding(kind.upper(), kind, kind, "minor", t(a), t(b), "", impact=impact)


def test_a_write_burst_is_linked_to_the_io_dip_it_caused_not_to_a_cpu_dip_it_touches() -> None:
    fs = [
        _f("checkpoint_stall", 152, 160),
        _f("gpu_starvation", 130, 152, "cpu_contention"),
        _f("gpu_starvation", 152, 160, "io"),
        _f("cpu_contention", 130, 152),
    ]
    got = links(fs)
    assert [(a, b) for a, b, _ in got] == [(0, 2), (3, 1)]
    assert "I/O wait" in got[0][2] and "CPU-starved" in got[1][2]


def test_quota_throttling_overlapping_contention_is_concurrent_not_a_cause() -> None:
    """Throttled tasks leave the run queue: no rule makes throttling cause contention; the
    two incidents name each other as concurrent instead."""
    fs = [_f("cpu_throttle", 100, 140), _f("cpu_contention", 110, 150)]
    assert links(fs) == []
    chains = correlate(fs)
    assert len(chains) == 2 and all(c.concurrent for c in chains)
    assert all("no mechanism in the data links them" in c.summary for c in chains)


def test_an_oom_kill_is_caused_by_pressure_only_in_its_own_memory_cgroup() -> None:
    kill = _f("oom_kill", 150, 151, memcg="/job/a", constraint="CONSTRAINT_MEMCG")
    same = [_f("memory_pressure", 100, 150, cgroup="/job"), kill]
    other = [_f("memory_pressure", 100, 150, cgroup="/other"), kill]
    host = [_f("memory_pressure", 100, 150), kill]
    (link,) = links(same)
    assert link[:2] == (0, 1) and "/job/a is the one under pressure" in link[2]
    assert links(other) == []  # pressure measured in another cgroup
    (link,) = links(host)  # host PSI counts the cgroup's tasks too: said as such
    assert "memory PSI counts the tasks of /job/a too" in link[2]
    host_kill = _f("oom_kill", 150, 151, memcg=None, constraint="CONSTRAINT_NONE")
    assert [x[:2] for x in links([host[0], host_kill])] == [(0, 1)]


def test_collector_gaps_are_an_effect_only_inside_the_contention_that_starved_them() -> None:
    inside = [_f("cpu_contention", 100, 160), _f("sampling_gap", 120, 123)]
    after = [_f("cpu_contention", 100, 160), _f("sampling_gap", 163, 170)]
    named_other = [
        _f("cpu_contention", 100, 160),
        _f("sampling_gap", 120, 123, effect_of="memory_pressure"),
    ]
    (link,) = links(inside)
    assert "inside the cpu contention window" in link[2]
    assert links(after) == [] and links(named_other) == []
    (chain,) = correlate(inside)
    assert chain.cause == 0 and chain.mechanisms == [
        "cpu contention → sampling gap: the missed samples fall inside the cpu contention "
        "window: the collectors were starved too"
    ]


def test_lone_run_queue_spikes_on_a_small_host_are_not_contention() -> None:
    from analyzer.detectors import cpu_contention

    spikes = {12, 18, 24, 30, 36}  # runq 6 = 1.5 x 4 CPUs for one sample each, 6 s apart
    vm = series(
        120, r=lambda i: 6.0 if i in spikes else 2.0, us_pct=40.0, sy_pct=5.0, id_pct=55.0,
        wa_pct=0.0, st_pct=0.0, since_boot=False,
    )  # fmt: skip
    assert run(cpu_contention, cpus=4, n=120, vmstat=vm) == []
