"""checkpoint_stall, io_saturation, gpu_starvation, gpu_throttle: tiny inputs in, findings out."""

import polars as pl
from detector_data import above_info, between, disk, gpu, run, series

from analyzer.detectors import checkpoint_stall, gpu_starvation, gpu_throttle, io_saturation
from analyzer.findings import NotEvaluated

N = 400
BURSTS = [(s, s + 10) for s in range(30, N - 20, 60)]  # every 60 s, 10 s long


def _vm(n: int = N, wa: float = 0.5) -> pl.DataFrame:  # busy CPUs: iowait stays near zero
    return series(
        n,
        r=4,
        b=0,
        us_pct=80.0,
        sy_pct=10.0,
        id_pct=9.5,
        wa_pct=wa,
        st_pct=0.0,
        cs_per_s=5000.0,
        since_boot=False,
    )


def _checkpoints(write_kb: float = 400_000.0, w_await: float = 80.0) -> dict[str, pl.DataFrame]:
    return {
        "iostat_device": disk(
            N,
            wkb=lambda i: write_kb if between(i, BURSTS) else 2000.0,
            w_await=lambda i: w_await if between(i, BURSTS) else 1.0,
            util=lambda i: 100.0 if between(i, BURSTS) else 5.0,
        ),
        "gpu_dmon": gpu(N, util=lambda i: 10.0 if between(i, BURSTS) else 95.0),
        "vmstat": _vm(),
    }


def test_periodic_write_bursts_are_checkpoint_stalls_with_period_and_gpu_time_lost() -> None:
    got = run(checkpoint_stall, n=N, **_checkpoints())
    assert isinstance(got, list) and len(got) == len(BURSTS)
    f = got[0]
    assert (
        f.key == "CHECKPOINT_STALL"
        and f.series == "CHECKPOINT_STALL"
        and f.occurrences == len(BURSTS)
    )
    assert 59 <= (f.period_s or 0) <= 61
    assert 12 <= (f.gpu_seconds_lost or 0) <= 20  # 2 GPUs x 10 s x (95 - 10) %
    assert f.severity == "major"  # ~100 of 800 GPU-s lost in total
    assert any(e.signal == "iowait_pct" and "hide iowait" in e.note for e in f.evidence)
    assert "repeats every 60 s" in f.summary


def test_write_bursts_just_below_thresholds_give_nothing() -> None:
    inputs = _checkpoints(write_kb=50_000.0, w_await=19.0)  # 48.8 MB/s < 50 MB/s, 19 ms < 20 ms
    inputs["gpu_dmon"] = gpu(N, util=95.0)
    assert above_info(run(checkpoint_stall, n=N, **inputs)) == []
    assert above_info(run(io_saturation, n=N, **inputs)) == []


def test_quiet_disk_and_busy_gpus_give_no_findings() -> None:
    quiet = {"iostat_device": disk(N, wkb=2000.0), "gpu_dmon": gpu(N, util=95.0), "vmstat": _vm()}
    for det in (checkpoint_stall, io_saturation, gpu_starvation, gpu_throttle):
        assert above_info(run(det, n=N, **quiet)) == [], det.NAME


def test_a_single_write_burst_without_gpu_impact_is_not_a_checkpoint_stall() -> None:
    inputs = {
        "iostat_device": disk(N, wkb=lambda i: 400_000.0 if 100 <= i < 110 else 2000.0),
        "gpu_dmon": gpu(N, util=95.0),
    }
    assert run(checkpoint_stall, n=N, **inputs) == []


def test_detectors_without_their_inputs_are_not_evaluated_with_a_reason() -> None:
    for det in (checkpoint_stall, io_saturation, gpu_starvation, gpu_throttle):
        got = run(det, n=10, vmstat=_vm(10))
        assert isinstance(got, NotEvaluated) and got.reason, det.NAME


def test_gpu_dips_during_write_bursts_are_classified_as_io() -> None:
    got = run(gpu_starvation, n=N, **_checkpoints())
    assert isinstance(got, list) and len(got) == len(BURSTS)
    assert {f.impact["cause"] for f in got} == {"io"}
    assert got[0].series == "GPU_STARVATION:io"


def test_gpu_dip_with_cgroup_throttling_is_classified_as_throttling() -> None:
    dip = [(100, 110)]
    cg = series(
        N,
        cgroup="/train.slice",
        nr_periods=lambda i: 10 * i,
        throttled_pct=lambda i: 60.0 if between(i, dip) else 0.0,
        throttled_ms_per_s=lambda i: 300.0 if between(i, dip) else 0.0,
        usage_pct=400.0,
    )
    got = run(
        gpu_starvation,
        n=N,
        gpu_dmon=gpu(N, util=lambda i: 5.0 if between(i, dip) else 95.0),
        cgroup_cpu=cg,
        vmstat=_vm(),
    )
    assert isinstance(got, list) and [f.impact["cause"] for f in got] == ["cpu_throttle"]
    assert got[0].start.second == 40 and got[0].duration_s == 10


def test_gpu_dip_with_one_pegged_process_and_idle_cores_is_a_cpu_bound_loader() -> None:
    dip = [(200, 210)]
    vm = series(
        N, r=1, b=0, us_pct=12.0, sy_pct=3.0, id_pct=85.0, wa_pct=0.0, st_pct=0.0, since_boot=False
    )
    ps = series(
        N,
        pid=4242,
        command="python",
        cpu_pct=lambda i: 100.0 if between(i, dip) else 60.0,
        wait_pct=0.0,
        since_boot=False,
    )
    got = run(
        gpu_starvation,
        n=N,
        gpu_dmon=gpu(N, util=lambda i: 8.0 if between(i, dip) else 92.0),
        vmstat=vm,
        pidstat=ps,
    )
    assert isinstance(got, list) and [f.impact["cause"] for f in got] == ["cpu_loader"]
    assert any("pid 4242 python" in e.note for e in got[0].evidence)


def test_gpu_util_just_above_the_dip_threshold_is_not_starvation() -> None:
    got = run(
        gpu_starvation,
        n=N,
        gpu_dmon=gpu(N, util=lambda i: 49.0 if 100 <= i < 130 else 95.0),
        vmstat=_vm(),
    )
    assert got == []


def test_unexplained_dip_says_so_and_points_at_the_application() -> None:
    got = run(
        gpu_starvation,
        n=N,
        gpu_dmon=gpu(N, util=lambda i: 3.0 if 100 <= i < 120 else 95.0),
        vmstat=_vm(),
    )
    assert isinstance(got, list) and got[0].impact["cause"] == "unexplained"
    assert "nsys" in got[0].remediation[0]


def test_a_saturated_disk_outside_checkpoints_is_io_saturation() -> None:
    hot = [(100, 160)]
    d = disk(
        N,
        wkb=lambda i: 30_000.0 if between(i, hot) else 500.0,
        w_await=lambda i: 60.0 if between(i, hot) else 1.0,
        util=lambda i: 99.0 if between(i, hot) else 5.0,
        aqu=lambda i: 20.0 if between(i, hot) else 0.1,
    )
    got = above_info(run(io_saturation, n=N, iostat_device=d))
    assert [f.key for f in got] == ["IO_SATURATION"] and got[0].duration_s == 60
    assert got[0].severity == "major"


def test_nvme_busy_but_fast_is_not_saturated() -> None:
    d = disk(N, wkb=30_000.0, w_await=0.3, util=100.0, aqu=2.0)
    assert above_info(run(io_saturation, n=N, iostat_device=d)) == []


def test_clock_drop_under_power_cap_is_gpu_throttle_but_idle_downclock_is_not() -> None:
    hot = [(50, 120)]
    g = gpu(N, util=95.0)
    idx = pl.int_range(0, pl.len()).over("gpu")
    g = g.with_columns(
        pclk_mhz=pl.when(idx.is_between(50, 119)).then(1200).otherwise(1980),
        pviol_pct=pl.when(idx.is_between(50, 119)).then(80.0).otherwise(0.0),
    )
    got = above_info(run(gpu_throttle, n=N, gpu_dmon=g))
    assert [f.key for f in got] == ["GPU_THROTTLE"] and "power cap" in got[0].title
    assert got[0].severity == "major" and got[0].duration_s == hot[0][1] - hot[0][0]
    idle = g.with_columns(pviol_pct=pl.lit(0.0))  # clocks drop but nothing is at a limit
    assert above_info(run(gpu_throttle, n=N, gpu_dmon=idle)) == []


def _loader_dip(rkb: float) -> list:
    """The pegged-loader dip of the test above, with disk reads of ``rkb`` kB/s in it."""
    dip = [(200, 210)]
    vm = series(
        N, r=1, b=0, us_pct=12.0, sy_pct=3.0, id_pct=85.0, wa_pct=0.0, st_pct=0.0, since_boot=False
    )
    ps = series(
        N,
        pid=4242,
        command="python",
        cpu_pct=lambda i: 100.0 if between(i, dip) else 60.0,
        wait_pct=0.0,
        since_boot=False,
    )
    io = disk(N, wkb=0.0).with_columns(
        rkb_s=pl.Series([rkb if between(i, dip) else 1000.0 for i in range(N)])
    )
    return run(
        gpu_starvation,
        n=N,
        gpu_dmon=gpu(N, util=lambda i: 8.0 if between(i, dip) else 92.0),
        vmstat=vm,
        pidstat=ps,
        iostat_device=io,
    )


def test_a_cpu_bound_loader_with_high_disk_reads_is_copying_data() -> None:
    """The field guide: loader CPU and disk throughput both high: the CPU copies data."""
    (f,) = _loader_dip(rkb=200_000.0)
    assert f.impact["cause"] == "cpu_loader" and f.impact["loader"] == "copying"
    ev = next(e for e in f.evidence if e.signal == "disk_read_kb_s")
    assert ev.value == 200_000.0 and ev.baseline == 1000.0
    assert "copying data from storage" in f.summary and "WebDataset" in f.remediation[0]
    assert f.impact["who"][0]["command"] == "python" and f.impact["who"][0]["pids"] == [4242]


def test_a_cpu_bound_loader_with_reads_at_baseline_is_computing() -> None:
    (f,) = _loader_dip(rkb=1000.0)
    assert f.impact["loader"] == "computing" and "num_workers" in f.remediation[0]
    assert "computing (decoding" in f.summary
