"""gpu_xid, hung_task, irq_hotspot, net_errors, sampling_gap: tiny inputs in, findings out."""

import polars as pl
from detector_data import above_info, between, run, series, t

from analyzer.detectors import gpu_xid, hung_task, irq_hotspot, net_errors, sampling_gap

N = 120


def _dmesg(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.col("ts").cast(pl.Datetime("us", "UTC"))
    )


def test_xid_79_is_critical_and_repeats_of_one_code_group_into_one_finding() -> None:
    rows = [
        {"ts": t(10), "kind": "xid", "xid_code": 13, "pci_bus": "0000:9b:00", "pid": 11, "comm": "python", "line_no": 1, "message": "NVRM: Xid (PCI:0000:9b:00): 13, pid=11, name=python, Graphics Exception"},
        {"ts": t(12), "kind": "xid", "xid_code": 13, "pci_bus": "0000:9b:00", "pid": 11, "comm": "python", "line_no": 2, "message": "NVRM: Xid (PCI:0000:9b:00): 13, pid=11, name=python, Graphics Exception"},
        {"ts": t(50), "kind": "xid", "xid_code": 79, "pci_bus": "0000:1b:00", "line_no": 3, "message": "NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus."},
    ]  # fmt: skip
    got = run(gpu_xid, n=N, dmesg=_dmesg(rows))
    assert isinstance(got, list) and [(f.key, f.severity) for f in got] == [
        ("GPU_XID", "major"),
        ("GPU_XID", "critical"),
    ]
    assert got[0].impact["xid_events"] == 2 and len(got[0].log_lines) == 2
    assert "fallen off the bus" in got[1].title


def test_hung_task_window_starts_when_the_task_blocked() -> None:
    rows = [
        {"ts": t(100), "kind": "hung_task", "event_id": 5, "pid": 999, "comm": "jbd2/nvme0n1p1", "blocked_s": 122, "line_no": 40, "message": "INFO: task jbd2/nvme0n1p1:999 blocked for more than 122 seconds."},
        {"ts": t(100), "kind": None, "event_id": 5, "line_no": 41, "message": " io_schedule+0x46/0x70"},
    ]  # fmt: skip
    got = run(hung_task, n=N, dmesg=_dmesg(rows))
    assert isinstance(got, list) and len(got) == 1
    assert got[0].start == t(-22) and got[0].severity == "major" and len(got[0].log_lines) == 2


def test_quiet_kernel_log_gives_nothing() -> None:
    rows = [
        {
            "ts": t(1),
            "kind": None,
            "line_no": 1,
            "message": "EXT4-fs (nvme0n1p1): mounted filesystem",
        }
    ]
    for det in (gpu_xid, hung_task):
        assert run(det, n=N, dmesg=_dmesg(rows)) == []


def _mp(hot_pct: float) -> pl.DataFrame:
    cpus = [series(N, cpu=c, usr_pct=20.0, sys_pct=5.0, iowait_pct=0.0, idle_pct=70.0, since_boot=False,
                   irq_pct=lambda i, c=c: hot_pct / 2 if c == 3 and 30 <= i < 90 else 1.0,
                   soft_pct=lambda i, c=c: hot_pct / 2 if c == 3 and 30 <= i < 90 else 2.0) for c in range(8)]  # fmt: skip
    return pl.concat(cpus).with_columns(pl.col("cpu").cast(pl.Int32))


def test_one_cpu_buried_in_softirqs_is_an_irq_hotspot() -> None:
    got = above_info(run(irq_hotspot, n=N, mpstat_cpu=_mp(98.0)))
    assert [f.key for f in got] == ["IRQ_HOTSPOT"] and got[0].impact["cpu"] == 3
    assert got[0].severity == "major" and got[0].duration_s == 60


def test_irq_load_just_below_a_quarter_of_the_cpu_gives_nothing() -> None:
    assert run(irq_hotspot, n=N, mpstat_cpu=_mp(24.0)) == []


def test_a_cpu_losing_a_third_to_softirqs_for_a_minute_is_a_minor_hotspot() -> None:
    """The real library's UDP flood: 35 % soft on one CPU, 0 on the other (2 CPUs)."""
    got = run(irq_hotspot, n=N, mpstat_cpu=_mp(35.0))
    assert isinstance(got, list) and [(f.severity, f.duration_s) for f in got] == [("minor", 60)]
    assert got[0].title == "CPU 3 loaded by interrupts (35% irq+softirq)"


def test_a_short_softirq_burst_is_info() -> None:
    mp = _mp(35.0).with_columns(
        soft_pct=pl.when((pl.col("cpu") == 3) & (pl.int_range(pl.len()).over("cpu") >= 40)).then(2.0).otherwise(pl.col("soft_pct")),
        irq_pct=pl.when((pl.col("cpu") == 3) & (pl.int_range(pl.len()).over("cpu") >= 40)).then(1.0).otherwise(pl.col("irq_pct")),
    )  # fmt: skip
    got = run(irq_hotspot, n=N, mpstat_cpu=mp)  # 10 s at 35 %
    assert isinstance(got, list) and [f.severity for f in got] == ["info"]


def _edev(drops) -> pl.DataFrame:
    return pl.concat([
        series(N, iface="eth0", rxdrop_s=drops, txdrop_s=0.0, rxerr_s=0.0, txerr_s=0.0),
        series(N, iface="lo", rxdrop_s=5000.0, txdrop_s=0.0, rxerr_s=0.0, txerr_s=0.0),
    ])  # fmt: skip


def test_receive_drops_are_net_errors_and_loopback_is_ignored() -> None:
    got = above_info(
        run(net_errors, n=N, sar_net_edev=_edev(lambda i: 500.0 if 20 <= i < 40 else 0.0))
    )
    assert [(f.key, f.severity) for f in got] == [("NET_ERRORS", "minor")] and "eth0" in got[
        0
    ].title


def test_drops_just_below_threshold_give_nothing() -> None:
    assert run(net_errors, n=N, sar_net_edev=_edev(lambda i: 9.0 if 20 <= i < 40 else 0.0)) == []


def test_collectors_that_stop_together_are_a_sampling_gap() -> None:
    missing = [(50, 80)]
    vm = series(N, r=1, since_boot=False).filter(~pl.int_range(0, N).is_between(50, 79))
    psi = series(N, source="system", resource="cpu", kind="some", avg10_pct=1.0).filter(
        ~pl.int_range(0, N).is_between(50, 79)
    )
    mp = series(
        N, cpu=-1, idle_pct=90.0, iowait_pct=0.0, since_boot=False
    )  # this one kept sampling
    got = above_info(run(sampling_gap, n=N, vmstat=vm, psi=psi, mpstat_cpu=mp))
    assert len(got) == 1 and got[0].severity == "minor" and got[0].impact["collectors"] == 2
    assert (got[0].start, got[0].end) == (t(missing[0][0]), t(missing[0][1]))
    assert not between(0, missing)


def test_one_late_sample_is_not_a_gap() -> None:
    vm = series(N, r=1, since_boot=False).filter(pl.int_range(0, N) != 60)  # one 2 s spacing
    assert run(sampling_gap, n=N, vmstat=vm) == []
