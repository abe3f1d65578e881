"""The interval helper: runs with hysteresis, merge gap, min duration; intersections."""

from datetime import UTC, datetime, timedelta

import polars as pl

from analyzer.intervals import as_windows, intersect, iou, merge, overlap_s, runs

T0 = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)


def _ts(n: int) -> pl.Series:
    return pl.Series(
        "ts", [T0 + timedelta(seconds=i) for i in range(n)], dtype=pl.Datetime("us", "UTC")
    )


def _w(a: int, b: int) -> tuple[datetime, datetime]:
    return (T0 + timedelta(seconds=a), T0 + timedelta(seconds=b))


def test_runs_without_hysteresis_end_one_step_after_the_last_sample() -> None:
    v = pl.Series([0, 0, 50, 60, 0, 0, 70, 0], dtype=pl.Float64)
    assert as_windows(runs(_ts(8), v, enter=50)) == [_w(2, 4), _w(6, 7)]


def test_hysteresis_keeps_a_run_alive_between_leave_and_enter() -> None:
    v = pl.Series([0, 90, 60, 55, 40, 95, 20], dtype=pl.Float64)
    # enters at >= 80, leaves at <= 50: samples 1..3 form one run, 5 another.
    assert as_windows(runs(_ts(7), v, enter=80, leave=50)) == [_w(1, 4), _w(5, 6)]


def test_below_condition_and_min_duration() -> None:
    v = pl.Series([90, 5, 5, 5, 90, 5, 90], dtype=pl.Float64)
    got = runs(_ts(7), v, enter=10, above=False, min_duration_s=2)
    assert as_windows(got) == [_w(1, 4)]


def test_merge_gap_joins_nearby_runs() -> None:
    v = pl.Series([1, 1, 0, 1, 0, 0, 0, 1], dtype=pl.Float64)
    assert as_windows(runs(_ts(8), v, enter=1, merge_gap_s=1)) == [_w(0, 4), _w(7, 8)]


def test_null_samples_are_not_evidence() -> None:
    v = pl.Series([1, None, 1], dtype=pl.Float64)
    assert as_windows(runs(_ts(3), v, enter=1)) == [_w(0, 1), _w(2, 3)]


def test_intersect_overlap_and_iou() -> None:
    a = pl.DataFrame({"start": [_w(0, 10)[0]], "end": [_w(0, 10)[1]]})
    b = pl.DataFrame({"start": [_w(5, 20)[0], _w(30, 40)[0]], "end": [_w(5, 20)[1], _w(30, 40)[1]]})
    assert as_windows(intersect(a, b)) == [_w(5, 10)]
    assert overlap_s(_w(0, 10), _w(5, 20)) == 5
    assert overlap_s(_w(0, 10), _w(10, 20)) == 0
    assert iou(_w(0, 10), _w(5, 15)) == 5 / 15


def test_merge_overlapping_windows() -> None:
    w = pl.DataFrame(
        {
            "start": [_w(0, 1)[0], _w(3, 1)[0], _w(2, 1)[0]],
            "end": [_w(0, 4)[1], _w(0, 6)[1], _w(0, 3)[1]],
        }
    ).cast({"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")})
    assert as_windows(merge(w)) == [_w(0, 6)]


def test_periodicity_finds_the_period_and_tolerates_one_missed_occurrence() -> None:
    from analyzer.intervals import periodicity

    starts = [T0 + timedelta(seconds=s) for s in (0, 60, 121, 179, 300)]  # 240 missing
    period, cv = periodicity(starts)  # type: ignore[misc]
    assert 59 < period < 61 and cv < 0.05


def test_periodicity_rejects_irregular_and_too_few_starts() -> None:
    from analyzer.intervals import periodicity

    assert periodicity([T0, T0 + timedelta(seconds=60)]) is None
    irregular = [T0 + timedelta(seconds=s) for s in (0, 10, 45, 52, 130)]
    assert periodicity(irregular) is None
