"""Write bursts from host signals alone (checkpoint_stall, io_saturation): tiny inputs in,
findings out. The shapes follow the real captures in samples/real/ (a 2-vCPU VM): a
buffered write fills the page cache at ~360 MB/s while the writer runs at ~100 % %system,
then fsync (or the flusher ~30 s later) writes it in one 1 s iostat sample at ~1.2 GB/s
with w_await ~40-70 ms and aqu-sz ~10-30; another writer's fsync'd 200 MB/s bursts queue
nothing (w_await ~10 ms, aqu-sz < 1)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import polars as pl
from detector_data import T0, between, context, disk, gpu, run, series, store_with, t

from analyzer.detectors import checkpoint_stall, io_saturation
from analyzer.findings import Finding

N = 300
MB = 1024.0  # kB


def _flushes(spans: list[tuple[int, int]], kb_s: float = 1_200_000.0, w_await: float = 45.0,
             aqu: float = 14.0) -> pl.DataFrame:  # fmt: skip
    """iostat -x of vda: idle, except ``kb_s`` with queueing inside ``spans``."""
    return disk(
        N,
        wkb=lambda i: kb_s if between(i, spans) else 0.0,
        w_await=lambda i: w_await if between(i, spans) else 0.0,
        util=lambda i: 45.0 if between(i, spans) else 0.4,
        aqu=lambda i: aqu if between(i, spans) else 0.0,
        device="vda",
    )


def _dirty(fills: list[tuple[int, int]], drains: list[int], mb: float = 1200.0) -> pl.DataFrame:
    """meminfo Dirty: ramps by ``mb`` over each fill, drops back at the matching drain."""

    def kb(i: int) -> float:
        level = 2 * MB
        for (a, b), z in zip(fills, drains, strict=True):
            if a <= i < z:
                level += mb * MB * min(i - a + 1, b - a) / (b - a)
        return level

    return series(N, key="Dirty", value_kb=kb)


def _writer(
    spans: list[tuple[int, int]], kb_s: float = 360 * MB, cmd: str = "python3"
) -> pl.DataFrame:
    """pidstat -d of the writer: ``kb_s`` at ~98 % %system inside ``spans``."""
    return series(
        N,
        pid=4242,
        command=cmd,
        kb_wr_s=lambda i: kb_s if between(i, spans) else 0.0,
        kb_rd_s=0.0,
        system_pct=lambda i: 98.0 if between(i, spans) else 0.5,
        cpu_pct=lambda i: 99.0 if between(i, spans) else 1.0,
        since_boot=False,
    )


def _of(got: object, kind: str) -> list[Finding]:
    assert isinstance(got, list), got
    return [f for f in got if f.kind == kind]


def _s(f: Finding) -> tuple[float, float]:
    return ((f.start - T0).total_seconds(), (f.end - T0).total_seconds())


FSYNC = [(60 + 60 * k, 64 + 60 * k) for k in range(3)]  # 4 s page-cache fill
FLUSH = [(b, b + 1) for _, b in FSYNC]  # fsync: one 1 s iostat sample


def test_periodic_fsync_checkpoints_without_gpu_data_are_one_series_with_honest_text() -> None:
    got = run(
        checkpoint_stall,
        n=N,
        meminfo=_dirty(FSYNC, [b for _, b in FLUSH]),
        iostat_device=_flushes(FLUSH),
        pidstat=_writer(FSYNC),
    )
    found = _of(got, "checkpoint_stall")
    assert [_s(f) for f in found] == [(a, b + 1) for a, b in FSYNC]  # fill + flush second
    assert {f.series for f in found} == {"CHECKPOINT_STALL"} and found[0].occurrences == 3
    assert 59 <= (found[0].period_s or 0) <= 61
    assert {f.severity for f in found} == {"minor"}  # the disk queued; GPU cost unknown
    text = found[0].summary
    assert "1.17 GB into the page cache" in text and "No GPU data" in text
    assert "pid 4242 python3" in text and "%system up to 98 %" in text
    assert found[0].impact["queued"] is True and found[0].gpu_seconds_lost is None


def test_a_buffered_checkpoint_and_its_write_back_30_s_later_are_one_episode() -> None:
    fills = [(50 + 75 * k, 54 + 75 * k) for k in range(3)]
    wb = [(b + 30, b + 31) for _, b in fills]  # the flusher, dirty_expire_centisecs later
    got = run(
        checkpoint_stall,
        n=N,
        meminfo=_dirty(fills, [a for a, _ in wb]),
        iostat_device=_flushes(wb),
    )
    found = _of(got, "checkpoint_stall")
    assert [_s(f) for f in found] == [(a, w[1]) for (a, _), w in zip(fills, wb, strict=True)]
    assert 74 <= (found[0].period_s or 0) <= 76 and found[0].occurrences == 3


def test_a_missed_meminfo_sample_does_not_split_a_buffered_episode() -> None:
    fills = [(50 + 75 * k, 54 + 75 * k) for k in range(3)]
    wb = [(b + 30, b + 31) for _, b in fills]
    mem = _dirty(fills, [a for a, _ in wb]).filter(pl.col("ts") != t(70))  # one gap
    got = run(checkpoint_stall, n=N, meminfo=mem, iostat_device=_flushes(wb))
    assert _s(_of(got, "checkpoint_stall")[0]) == (50, wb[0][1])


def test_a_5_s_meminfo_sampler_spreads_page_cache_growth_over_its_5_seconds() -> None:
    every5 = pl.DataFrame(
        {
            "ts": [t(i) for i in range(0, N, 5)],
            "key": "Dirty",
            "value_kb": [2 * MB + (1000 * MB if 100 <= i < 110 else 0) for i in range(0, N, 5)],
        }
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    store = store_with(n=N, meminfo=every5, iostat_device=_flushes([]))
    try:
        ctx = context(store, n=N)
        growth = ctx.signals["page_cache_growth_kb_s"]
        # the sample at 100 s covers 96..100 s: 1000 MB over 5 s, 200 MB/s in each
        assert growth.slice(96, 5).to_list() == [200 * MB] * 5
        assert growth.slice(101, 5).to_list() == [0.0] * 5
        assert checkpoint_stall.episodes(ctx) == [(t(96), t(106))]  # until it is drained
    finally:
        store.close()


def test_another_writers_bursts_that_queue_nothing_are_info() -> None:
    spans = [(100 + 12 * k, 104 + 12 * k) for k in range(3)]  # 200 MB/s x 4 s, fsync'd
    got = run(checkpoint_stall, n=N, iostat_device=_flushes(spans, 192 * MB, 10.0, 0.6))
    found = _of(got, "checkpoint_stall")
    assert len(found) == 3 and {f.severity for f in found} == {"info"}
    assert found[0].impact["queued"] is False
    quiet = run(io_saturation, n=N, iostat_device=_flushes(spans, 192 * MB, 10.0, 0.6))
    assert _of(quiet, "io_saturation") == []


def test_checkpoints_stay_one_series_among_another_writers_bursts() -> None:
    light = [(20, 23), (150, 153), (262, 265)]  # 200 MB/s, no queue, at random times
    inputs = {
        "iostat_device": disk(
            N,
            wkb=lambda i: 1_200_000.0 if between(i, FLUSH) else 196_000.0 if between(i, light) else 0.0,
            w_await=lambda i: 45.0 if between(i, FLUSH) else 9.0 if between(i, light) else 0.0,
            aqu=lambda i: 14.0 if between(i, FLUSH) else 0.5 if between(i, light) else 0.0,
            device="vda",
        ),
    }  # fmt: skip
    found = _of(run(checkpoint_stall, n=N, **inputs), "checkpoint_stall")
    assert [_s(f) for f in found] == [(float(a), float(b)) for a, b in FLUSH]
    assert {f.series for f in found} == {"CHECKPOINT_STALL"} and found[0].occurrences == 3


def test_a_burst_writing_less_than_128_mb_is_not_a_burst() -> None:
    spans = [(100, 102)]  # 2 s at 60 MB/s: 120 MB
    store = store_with(n=N, iostat_device=_flushes(spans, 60 * MB, 30.0, 9.0))
    try:
        assert checkpoint_stall.episodes(context(store, n=N)) == []
    finally:
        store.close()


ONE = [(120, 124)]
ONE_FLUSH = [(124, 125)]


def test_a_one_off_burst_without_gpu_data_is_io_saturation_that_says_the_cost_is_unknown() -> None:
    inputs = {
        "meminfo": _dirty(ONE, [125], 1500.0),
        "iostat_device": _flushes(ONE_FLUSH, 1_500_000.0, 60.0, 23.0),
        "pidstat": _writer(ONE),
    }
    assert _of(run(checkpoint_stall, n=N, **inputs), "checkpoint_stall") == []
    (f,) = _of(run(io_saturation, n=N, **inputs), "io_saturation")
    assert _s(f) == (120, 125) and f.severity == "minor" and "vda" in f.title
    assert "1.46 GB into the page cache at up to 375 MB/s" in f.summary
    assert "w_await median 0.0 ms (max 60.0 ms" in f.summary and "aqu-sz max 23.0" in f.summary
    assert "cost the job is unknown" in f.summary and "pid 4242 python3" in f.summary


def test_a_one_off_burst_while_the_gpus_stay_busy_is_info() -> None:
    inputs = {
        "meminfo": _dirty(ONE, [125], 1500.0),
        "iostat_device": _flushes(ONE_FLUSH, 1_500_000.0, 60.0, 23.0),
        "gpu_dmon": gpu(N, util=95.0),
    }
    (f,) = _of(run(io_saturation, n=N, **inputs), "io_saturation")
    assert f.severity == "info" and "did not wait" in f.summary
    assert "No pidstat in the bundle: the writer is not known." in f.summary


FIO = [(100, 140)]


def _neighbour() -> dict[str, pl.DataFrame]:
    """fio randwrite 4k qd32 next door: aqu-sz ~10 at %util ~50, w_await ~0.1 ms."""
    w_await = [0.1, 0.12, 0.09, 0.3, 0.11]
    return {
        "iostat_device": disk(
            N,
            wkb=lambda i: 320_000.0 if between(i, FIO) else 20.0,
            w_await=lambda i: w_await[i % 5] if between(i, FIO) else 0.5,
            util=lambda i: 50.0 if between(i, FIO) else 0.4,
            aqu=lambda i: 10.0 + (i % 3) if between(i, FIO) else 0.0,
            device="vda",
        ),
        "pidstat": _writer(FIO, 320_000.0, "fio"),
    }


def test_a_neighbour_queueing_the_disk_at_half_util_is_io_saturation_with_its_writer() -> None:
    (f,) = _of(run(io_saturation, n=N, **_neighbour()), "io_saturation")
    assert _s(f) == (100, 140) and f.title == "Disk vda saturated (40 s)"
    assert "pid 4242 fio" in f.summary
    assert any(e.signal == "process_write_kb_s" and "fio" in e.note for e in f.evidence)


def test_io_saturation_quotes_named_statistics_over_exactly_the_window_samples() -> None:
    inputs = _neighbour()
    (f,) = _of(run(io_saturation, n=N, **inputs), "io_saturation")
    raw = inputs["iostat_device"].filter((pl.col("ts") >= f.start) & (pl.col("ts") < f.end))
    ev = {e.signal: e for e in f.evidence}
    wa = ev["vda w_await_ms"]
    assert wa.value == round(raw["w_await_ms"].median(), 2) and wa.value == 0.11  # type: ignore[arg-type]
    assert wa.note.startswith("median over the window's 40 iostat samples")
    assert f"max {raw['w_await_ms'].max():.2f}" in wa.note
    assert ev["vda aqu_sz"].value == round(raw["aqu_sz"].median(), 2)  # type: ignore[arg-type]
    assert ev["vda util_pct"].value == 50.0 and ev["vda util_pct"].note.startswith("mean")
    assert "w_await median 0.1 ms (max 0.3 ms" in f.summary and "40 iostat samples" in f.summary


def test_a_short_queue_spike_is_not_saturation_and_not_a_burst() -> None:
    d = disk(N, wkb=2000.0, aqu=lambda i: 12.0 if 100 <= i < 103 else 0.2, device="vda")
    assert _of(run(io_saturation, n=N, iostat_device=d), "io_saturation") == []


def test_page_cache_growth_uses_the_samples_own_stamps() -> None:
    """Two samples 0.5 s and 1.5 s apart: growth per second of the time between them."""
    stamps = [T0 + timedelta(seconds=s) for s in (0.2, 1.2, 2.7, 3.2)]
    mem = pl.DataFrame(
        {"ts": stamps, "key": "Dirty", "value_kb": [0.0, 100.0, 400.0, 500.0]}
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    store = store_with(n=5, meminfo=mem)
    try:
        growth = context(store, n=5).signals["page_cache_growth_kb_s"].round(6).to_list()
        assert growth[:4] == [None, 100.0, 200.0, 200.0]
    finally:
        store.close()


def test_overlapping_finds_windows_touching_any_target_within_the_pad() -> None:
    wins = [(t(0), t(5)), (t(10), t(12)), (t(20), t(21)), (t(30), t(31))]
    targets = [(t(11), t(11.5)), (t(24), t(26)), (t(4), t(4.5))]
    assert checkpoint_stall.overlapping(wins, targets) == [True, True, False, False]
    assert checkpoint_stall.overlapping(wins, targets, pad_s=4) == [True, True, True, False]
    assert checkpoint_stall.overlapping(wins, []) == [False] * 4


def test_evenly_spaced_bursts_of_very_different_sizes_are_not_a_checkpoint_series() -> None:
    sizes = [1_200_000.0, 150_000.0, 3_000_000.0]  # kB in one second each
    inputs = {
        "iostat_device": disk(
            N,
            wkb=lambda i: next(
                (kb for (a, b), kb in zip(FLUSH, sizes, strict=True) if a <= i < b), 0.0
            ),
            w_await=lambda i: 45.0 if between(i, FLUSH) else 0.0,
            aqu=lambda i: 14.0 if between(i, FLUSH) else 0.0,
            device="vda",
        ),
    }
    assert _of(run(checkpoint_stall, n=N, **inputs), "checkpoint_stall") == []
    found = _of(run(io_saturation, n=N, **inputs), "io_saturation")
    assert [_s(f) for f in found] == [(float(a), float(b)) for a, b in FLUSH]


def _every5(values: dict[str, Any], start: int = 0) -> pl.DataFrame:
    """One row every 5 s from ``start`` (a capture at -i 5); values: functions of i."""
    idx = list(range(start, N, 5))
    data = {"ts": [t(i) for i in idx], **{k: [f(i) for i in idx] for k, f in values.items()}}
    return pl.DataFrame(data).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))


def test_at_5_s_sampling_the_episode_starts_at_its_first_write_not_the_level_before() -> None:
    """ckpt-periodic-coarse: the meminfo sample at 100 s holds 150 MB (30 MB/s over its 5 s:
    no burst opens), the iostat sample at 105 s the flush of 1.2 GB (240 MB/s average,
    w_await ~40 ms): the pending level must not pull the start back to 96 s."""
    mem = _every5(
        {"key": lambda i: "Dirty", "value_kb": lambda i: 150 * MB if i == 100 else 2 * MB}
    )
    io = _every5(
        {
            "device": lambda i: "vda",
            "wkb_s": lambda i: 240 * MB if i == 105 else 10.0,
            "w_await_ms": lambda i: 41.0 if i == 105 else 0.3,
            "aqu_sz": lambda i: 2.7 if i == 105 else 0.0,
            "util_pct": lambda i: 13.0 if i == 105 else 0.2,
            "since_boot": lambda i: False,
        }
    )
    store = store_with(n=N, meminfo=mem, iostat_device=io)
    try:
        ctx = context(store, n=N)
        assert checkpoint_stall.episodes(ctx) == [(t(101), t(106))]
        assert checkpoint_stall.queued(ctx, (t(101), t(106)))  # w_await, not the diluted queue
    finally:
        store.close()
