"""Tiny stores for the symptom tests: host tables and an application series whose cause
is known, built row by row from functions of the second."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from analyzer.analysis import Analysis, analyse
from analyzer.store import Store

T0 = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)
VLLM = "vllm:e2e_request_latency_seconds"
REAL = Path(__file__).resolve().parents[2] / "samples" / "real"
THROTTLE_BUNDLE = REAL / "cpu-throttle.tgz"
THROTTLE_TRUTH = REAL / "cpu-throttle.truth.json"


def t(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def series(n: int, **cols: Any) -> pl.DataFrame:
    """``n`` one-second rows from T0; each column a constant or a function of the second."""
    data: dict[str, Any] = {"ts": [t(i) for i in range(n)]}
    for k, v in cols.items():
        data[k] = [v(i) for i in range(n)] if callable(v) else [v] * n
    return pl.DataFrame(data).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))


def within(i: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= i < b for a, b in spans)


def quantiles(
    n: int, p99_ms: Callable[[int], float], family: str = VLLM, dt_s: float = 1.0
) -> pl.DataFrame:
    """``app_metric_quantile`` rows, one per ``dt_s`` interval, stamped at its end."""
    step = int(dt_s)
    rows = [
        {
            "ts": t(i),
            "endpoint": "http://127.0.0.1:8000/metrics",
            "family": family,
            "labels": 'model_name="m"',
            "type": "histogram",
            "dt_s": dt_s,
            "count": 20.0,
            "rate_per_s": 20.0 / dt_s,
            "unit": "s",
            "p99_ms": p99_ms(i),
            "p50_ms": p99_ms(i) / 2,
            "mean_ms": p99_ms(i) / 2,
        }
        for i in range(step, n, step)
    ]
    return pl.DataFrame(rows).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))


def cgroup(n: int, pct: Callable[[int], float], name: str = "/serve") -> pl.DataFrame:
    return series(
        n,
        cgroup=name,
        nr_periods=lambda i: 10 * i,
        nr_throttled=0,
        throttled_pct=pct,
        throttled_ms_per_s=lambda i: pct(i) * 4,
        usage_pct=390.0,
    )


def vmstat(n: int) -> pl.DataFrame:
    return series(
        n, r=2, b=0, us_pct=40.0, sy_pct=5.0, id_pct=54.5, wa_pct=0.5, st_pct=0.0,
        since_boot=False,
    )  # fmt: skip


def disk(n: int, wkb: Callable[[int], float]) -> pl.DataFrame:
    return series(
        n, device="nvme0n1", wkb_s=wkb, rkb_s=100.0, w_await_ms=1.0, r_await_ms=0.5,
        util_pct=10.0, aqu_sz=0.2, since_boot=False,
    )  # fmt: skip


def gpu(n: int, util: Callable[[int], float]) -> pl.DataFrame:
    frame = series(n, gpu=0, sm_pct=util, pclk_mhz=1980, pwr_w=400.0, pviol_pct=0.0, gtemp_c=60.0)
    return frame.with_columns(pl.col("gpu").cast(pl.Int32))


def analysed(n: int, **tables: pl.DataFrame) -> tuple[Store, Analysis]:
    """A store holding ``tables`` and a ``bundle`` row for ``n`` seconds, analysed."""
    store = Store(None)
    for name, df in tables.items():
        store.write(name, df, f"series/{name}.out")
    row = {"name": "t", "cpus": 8, "start_utc": T0, "end_utc": t(n - 1)}
    store.write("bundle", pl.DataFrame([row | {"manifest_present": True, "interval_s": 1.0}]), None)
    return store, analyse(store, debug=True)


def rows(store: Store, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return store.con.sql(sql, params=params).pl().to_dicts()


def latency_csv(path: Path) -> Path:
    """A made-up latency series (20 per second) for the real ``cpu-throttle`` capture:
    ~400 ms from 1 s after each injected throttling incident's start to its end, ~20 ms
    elsewhere. Checks what is shown, not how well a real cause is found."""
    spans = [(i["start"], i["end"]) for i in json.loads(THROTTLE_TRUTH.read_text())["incidents"]]
    rnd = random.Random(7)
    lo, hi = spans[0][0] - 60, spans[-1][1] + 40
    lines = ["ts,latency_ms"]
    x = lo
    while x < hi:
        bad = any(a + 1 <= x < b for a, b in spans)
        lines.append(f"{x:.3f},{max(1.0, rnd.gauss(400, 40) if bad else rnd.gauss(20, 3)):.2f}")
        x += 0.05
    path.write_text("\n".join(lines) + "\n")
    return path
