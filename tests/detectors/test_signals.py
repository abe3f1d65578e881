"""The 1-second signals table: sources, NULL for missing, multi-rate attribution."""

import polars as pl
from detector_data import T0, series, store_with, t

from analyzer import signals
from analyzer.signals import SIGNALS


def _build(n: int, **tables: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, str | None]]:
    store = store_with(**tables)
    df = signals.build(store.con, T0, t(n - 1), 4)
    src = dict(store.con.sql("SELECT signal, source_table FROM signal_sources").fetchall())
    store.close()
    return df, src


def test_columns_match_the_declaration_and_missing_sources_are_null_not_zero() -> None:
    df, src = _build(
        5,
        vmstat=series(
            5,
            r=3,
            b=0,
            us_pct=50.0,
            sy_pct=10.0,
            id_pct=40.0,
            wa_pct=0.0,
            st_pct=0.0,
            cs_per_s=1000.0,
            si_kb_s=0.0,
            so_kb_s=0.0,
            since_boot=False,
        ),
    )
    assert df.columns == [c.name for c in SIGNALS.columns]
    assert df.height == 5
    assert df["runq"].to_list() == [3.0] * 5
    assert df["cpu_busy_pct"].to_list() == [60.0] * 5
    assert df["gpu_util_mean_pct"].null_count() == 5 and df["psi_io_some_pct"].null_count() == 5
    assert src["runq"] == "vmstat" and src["gpu_util_mean_pct"] is None


def test_since_boot_rows_are_excluded() -> None:
    vm = series(3, r=[99, 2, 2], since_boot=[True, False, False])
    df, _ = _build(3, vmstat=vm)
    assert df["runq"].to_list() == [None, 2.0, 2.0]


def test_a_10_s_histogram_covers_the_ten_seconds_it_describes() -> None:
    rows = []
    for end in (10, 20):  # two intervals; printed at their end
        for lo, hi, c in ((1, 2, 90), (2, 4, 9), (4096, 8192, 1)):
            rows.append(
                {
                    "ts": t(end),
                    "map": "@usecs",
                    "key": "",
                    "bucket_low": lo,
                    "bucket_high": hi,
                    "count": c,
                    "unit": "usecs",
                }
            )
    hist = pl.DataFrame(rows).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    store = store_with()
    store.write("bpf_hist", hist, "series/bpf_runqlat.out")
    df = signals.build(store.con, T0, t(20), 4)
    store.close()
    filled = df.filter(pl.col("runqlat_p99_us").is_not_null())
    # the sample printed at 14:00:10 covers (14:00:00, 14:00:10], the next one (10, 20]
    assert filled["ts"].min() == t(1) and filled["ts"].max() == t(20) and filled.height == 20
    assert set(filled["runqlat_interval_s"].to_list()) == {10.0}
    assert set(filled["runqlat_p99_us"].to_list()) == {4.0}  # 99 % of 100 events are below 4 us
    assert (
        df.filter(pl.col("ts") == T0)["runqlat_p99_us"].item() is None
    )  # nothing describes second 0


def test_disk_sums_whole_disks_only_and_partitions_and_dm_are_left_out() -> None:
    rows = [
        series(
            2,
            device=d,
            wkb_s=w,
            util_pct=u,
            w_await_ms=1.0,
            aqu_sz=0.1,
            is_partition=p,
            since_boot=False,
        )
        for d, w, u, p in (
            ("sda", 1000.0, 50.0, False),
            ("sda1", 1000.0, 50.0, True),
            ("dm-0", 1000.0, 99.0, False),
            ("nvme0n1", 500.0, 20.0, False),
        )
    ]
    df, src = _build(2, iostat_device=pl.concat(rows))
    assert df["disk_write_kb_s"].to_list() == [1500.0, 1500.0]
    assert df["disk_util_max_pct"].to_list() == [50.0, 50.0]
    assert src["disk_write_kb_s"] == "iostat_device"


def test_psi_uses_stall_pct_and_falls_back_to_avg10() -> None:
    psi = pl.concat(
        [
            series(
                3,
                source="system",
                resource="io",
                kind="some",
                avg10_pct=5.0,
                stall_pct=[None, 40.0, 50.0],
            ),
            series(
                3,
                source="/sys/fs/cgroup/x",
                resource="io",
                kind="some",
                avg10_pct=99.0,
                stall_pct=99.0,
            ),
        ]
    )
    df, _ = _build(3, psi=psi)
    assert df["psi_io_some_pct"].to_list() == [5.0, 40.0, 50.0]
