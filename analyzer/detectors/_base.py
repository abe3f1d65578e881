"""What every detector gets (`Context`) and the helpers they share.

Baselines are the capture's own: the median (``q=0.5``) of a signal over the seconds
outside the candidate windows; "busy" signals use another quantile where the docs say so.
Every window operation goes through `analyzer.intervals`.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

import duckdb
import polars as pl

from analyzer import intervals, sqlmacros
from analyzer.findings import LogLine
from analyzer.intervals import Window
from analyzer.signals import SIGNALS
from analyzer.sql import ident

UNITS = {c.name: c.unit for c in SIGNALS.columns}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# GPU-idle dip (docs/detectors.md "GPU-seconds lost"): util below max(20, 0.5 x baseline)
GPU_DIP = {"abs_pct": 20.0, "rel": 0.5, "min_baseline_pct": 50.0, "min_s": 3, "gap_s": 2}


@dataclass
class Context:
    """A detector's view of one analysis: the store, the signals frame and bundle facts."""

    con: duckdb.DuckDBPyConnection
    signals: pl.DataFrame
    cpus: int | None = None
    interval_s: float | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sqlmacros.install(self.con)

    # -- inputs -------------------------------------------------------------------------
    def has(self, *cols: str) -> bool:
        """True when every column exists in signals and has at least one value."""
        return (
            all(
                c in self.signals.columns and self.signals[c].null_count() < self.signals.height
                for c in cols
            )
            and self.signals.height > 0
        )

    def any_of(self, *cols: str) -> bool:
        return any(self.has(c) for c in cols)

    def rows(self, table: str) -> int:
        """Rows in ``table`` (0 when absent)."""
        exists = self.con.sql(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", params=[table]
        ).fetchall()[0][0]
        if not exists:
            return 0
        return int(self.con.sql(f"SELECT count(*) FROM {ident(table)}").fetchall()[0][0])

    def query(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        """``sql`` (constant text; values from the data only in ``params``) as a frame."""
        return self.con.sql(sql, params=params).pl()

    @property
    def gpu_count(self) -> int | None:
        if not self.has("gpu_count"):
            return None
        return int(self.signals["gpu_count"].max())  # type: ignore[arg-type]

    # -- statistics ---------------------------------------------------------------------
    def ts_us(self) -> tuple[pl.Series, list[int]]:
        """Signals ts as epoch microseconds: a series and a list (cached; for binary search)."""
        if "_ts_us" not in self.cache:
            us = self.signals["ts"].dt.epoch("us").cast(pl.Int64)
            self.cache["_ts_us"] = (us, us.to_list())
        return self.cache["_ts_us"]

    def mask(self, windows: list[Window], pad_s: float = 0.0) -> pl.Series:
        """Boolean per signals row: inside any of ``windows`` (widened by ``pad_s``).

        O(n log w): each second finds the last window starting at or before it.
        """
        ts, _ = self.ts_us()
        if not windows or ts.len() == 0:
            return pl.Series("m", [False] * ts.len(), dtype=pl.Boolean)
        pad = int(pad_s * 1e6)
        w = sorted((epoch_us(a) - pad, epoch_us(b) + pad) for a, b in windows)
        starts = pl.Series([x[0] for x in w], dtype=pl.Int64)
        ends = pl.Series(list(accumulate((x[1] for x in w), max)), dtype=pl.Int64)
        idx = starts.search_sorted(ts, side="right").cast(pl.Int64) - 1
        return ((idx >= 0) & (ts < ends.gather(idx.clip(lower_bound=0)))).alias("m")

    def rows_in(self, w: Window, pad_s: float = 0.0) -> pl.DataFrame:
        """The signals rows of window ``w`` (a slice: ts is sorted)."""
        _, ts = self.ts_us()
        pad = int(pad_s * 1e6)
        lo = bisect_left(ts, epoch_us(w[0]) - pad)
        hi = bisect_left(ts, epoch_us(w[1]) + pad)
        return self.signals.slice(lo, max(hi - lo, 0))

    def baseline(
        self, col: str, exclude: list[Window] | None = None, q: float = 0.5, pad_s: float = 0.0
    ) -> float | None:
        """Quantile ``q`` of ``col`` over the seconds outside ``exclude`` (cached)."""
        key = ("baseline", col, tuple(exclude or ()), q, pad_s)
        if key in self.cache:
            return self.cache[key]
        s = self.signals[col]
        if exclude:
            s = s.filter(~self.mask(exclude, pad_s))
        s = s.drop_nulls()
        v = None if s.len() == 0 else float(s.quantile(q, "linear"))  # type: ignore[arg-type]
        self.cache[key] = v
        return v

    def stat(self, col: str, w: Window, how: str = "max", pad_s: float = 0.0) -> float | None:
        """max / mean / min / sum of ``col`` inside window ``w``."""
        if col not in self.signals.columns:
            return None
        s = self.rows_in(w, pad_s)[col].drop_nulls()
        if s.len() == 0:
            return None
        return float(getattr(s, how)())  # type: ignore[arg-type]

    def runs(
        self,
        values: pl.Series | str,
        enter: float,
        leave: float | None = None,
        *,
        above: bool = True,
        min_s: float = 0,
        gap_s: float = 0,
    ) -> list[Window]:
        v = self.signals[values] if isinstance(values, str) else values
        frame = intervals.runs(
            self.signals["ts"],
            v.cast(pl.Float64),
            enter=enter,
            leave=leave,
            above=above,
            min_duration_s=min_s,
            merge_gap_s=gap_s,
        )
        return intervals.as_windows(frame)

    # -- GPU ------------------------------------------------------------------------------
    def gpu_dips(self) -> tuple[float | None, list[Window]]:
        """(baseline util, windows where the GPUs idled) — cached; see GPU_DIP."""
        if "gpu_dips" in self.cache:
            return self.cache["gpu_dips"]
        result: tuple[float | None, list[Window]] = (None, [])
        if self.has("gpu_util_mean_pct"):
            util = self.signals["gpu_util_mean_pct"]
            base0 = self.baseline("gpu_util_mean_pct", q=0.75)
            if base0 is not None and base0 >= GPU_DIP["min_baseline_pct"]:
                thr = max(GPU_DIP["abs_pct"], GPU_DIP["rel"] * base0)
                dips0 = self.runs(
                    util, thr, above=False, min_s=GPU_DIP["min_s"], gap_s=GPU_DIP["gap_s"]
                )
                base = self.baseline("gpu_util_mean_pct", exclude=dips0, pad_s=2) or base0
                thr = max(GPU_DIP["abs_pct"], GPU_DIP["rel"] * base)
                dips = self.runs(
                    util, thr, above=False, min_s=GPU_DIP["min_s"], gap_s=GPU_DIP["gap_s"]
                )
                active = self.runs(util, thr, above=True)
                if active:  # only while the job runs: between its first and last busy second
                    lo, hi = active[0][0], active[-1][1]
                    dips = [(max(a, lo), min(b, hi)) for a, b in dips if b > lo and a < hi]
                result = (base, dips)
            elif base0 is not None:
                result = (base0, [])
        self.cache["gpu_dips"] = result
        return result

    def gpu_seconds_lost(self, w: Window, baseline: float | None = None) -> float | None:
        """Σ over seconds in ``w`` of gpu_count × max(0, baseline − util_mean) / 100."""
        if not self.has("gpu_util_mean_pct"):
            return None
        baseline = baseline if baseline is not None else self.gpu_dips()[0]
        if baseline is None:
            return None
        sub = self.rows_in(w)
        lost = (
            (baseline - pl.col("gpu_util_mean_pct")).clip(lower_bound=0)
            * pl.col("gpu_count")
            / 100.0
        ).sum()
        return float(sub.select(lost).item() or 0.0)

    def gpu_capacity_s(self) -> float | None:
        """GPU-seconds of the capture while the job ran (denominator for severity)."""
        if not self.has("gpu_count"):
            return None
        return float(self.signals["gpu_count"].fill_null(0).sum())

    # -- logs -------------------------------------------------------------------------------
    def log_lines(
        self,
        source_file: str,
        *,
        event_id: int | None = None,
        line_no: int | None = None,
        limit: int = 60,
    ) -> list[LogLine]:
        """The kernel-log lines of one event (``event_id``) or one line (``line_no``) of
        ``source_file``, in file order."""
        if not self.rows("dmesg"):
            return []
        df = self.query(
            "SELECT source_file, line_no, ts, message FROM dmesg WHERE source_file = $file"
            " AND (event_id = $event OR line_no = $line) ORDER BY source_file, line_no"
            " LIMIT $limit",
            {"file": source_file, "event": event_id, "line": line_no, "limit": int(limit)},
        )
        return [
            LogLine(r["source_file"], r["line_no"], r["ts"], r["message"] or "")
            for r in df.iter_rows(named=True)
        ]


def epoch_us(t: datetime) -> int:
    return (
        int(t.timestamp() * 1_000_000)
        if t.microsecond == 0
        else int(t.timestamp()) * 1_000_000 + t.microsecond
    )


def gpu_loss_severity(lost: float | None, capacity: float | None) -> str | None:
    """Severity from GPU time lost (docs/detectors.md): None when no GPU data."""
    if lost is None:
        return None
    share = lost / capacity if capacity else 0.0
    if share >= 0.25:
        return "critical"
    if share >= 0.05 or lost >= 600:
        return "major"
    if share >= 0.005 or lost >= 10:
        return "minor"
    return "info"


#: the MAD of normal data times this is its standard deviation
MAD_TO_SIGMA = 1.4826


def robust_level(values: pl.Series, min_sigma: float = 0.0) -> tuple[float, float] | None:
    """(median, σ) of ``values`` (nulls dropped), σ = 1.4826 × the median absolute deviation
    (the standard deviation of normal data, unmoved by a minority of outliers), at least
    ``min_sigma``; None when there is no value. A noisy host's baseline: its usual level
    and how far it wanders, without an idle period to learn them from."""
    v = values.drop_nulls().cast(pl.Float64)
    if v.len() == 0:
        return None
    med = float(v.median())  # type: ignore[arg-type]
    mad = float((v - med).abs().median())  # type: ignore[arg-type]
    return med, max(MAD_TO_SIGMA * mad, min_sigma)


def unit_of(col: str) -> str:
    return UNITS.get(col, "")


def worst(*severities: str | None) -> str:
    order = ["info", "minor", "major", "critical"]
    return max((s for s in severities if s), key=order.index, default="info")


def second_of(t: datetime) -> datetime:
    """The start of the signals second that holds ``t`` (point events sit on the 1 s grid)."""
    return t.replace(microsecond=0)


def hhmmss(t: datetime) -> str:
    return t.strftime("%H:%M:%S")


def span(w: Window) -> str:
    """'14:03:10–14:03:25 UTC (15 s)'."""
    return f"{hhmmss(w[0])}–{hhmmss(w[1])} UTC ({(w[1] - w[0]).total_seconds():.0f} s)"


def r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)
