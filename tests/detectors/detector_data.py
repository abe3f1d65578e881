"""Tiny inline inputs for detector tests: build a store from a few rows, run one detector."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import polars as pl

from analyzer import signals
from analyzer.detectors._base import Context
from analyzer.findings import Finding, NotEvaluated
from analyzer.store import Store

T0 = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)


def t(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def series(n: int, **cols: Any) -> pl.DataFrame:
    """``n`` one-second samples from T0; each column a constant, a list, or a function of i."""
    data: dict[str, Any] = {"ts": [t(i) for i in range(n)]}
    for k, v in cols.items():
        data[k] = [v(i) for i in range(n)] if callable(v) else v if isinstance(v, list) else [v] * n
    return pl.DataFrame(data).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))


def store_with(cpus: int | None = 8, n: int | None = None, **tables: pl.DataFrame) -> Store:
    store = Store(None)
    for name, df in tables.items():
        store.write(name, df, f"series/{name}.out")
    if n is not None:
        row = {
            "name": "t",
            "cpus": cpus,
            "start_utc": T0,
            "end_utc": t(n - 1),
            "manifest_present": True,
            "interval_s": 1.0,
        }
        store.write("bundle", pl.DataFrame([row]), None)
    return store


def context(store: Store, cpus: int | None = 8, n: int | None = None) -> Context:
    start, end = (T0, t(n - 1)) if n else (None, None)
    sig = signals.build(store.con, start, end, cpus)
    return Context(con=store.con, signals=sig, cpus=cpus, interval_s=1.0)


def run(
    detector: ModuleType, cpus: int | None = 8, n: int | None = None, **tables: pl.DataFrame
) -> list[Finding] | NotEvaluated:
    store = store_with(**tables)
    try:
        return detector.detect(context(store, cpus, n))
    finally:
        store.close()


def above_info(result: list[Finding] | NotEvaluated) -> list[Finding]:
    assert not isinstance(result, NotEvaluated), result
    return [f for f in result if f.severity != "info"]


def gpu(n: int, util: Any, gpus: int = 2, **extra: Any) -> pl.DataFrame:
    """gpu_dmon rows for ``gpus`` GPUs with the same per-second SM utilisation."""
    frames = [
        series(
            n, gpu=g, sm_pct=util, pclk_mhz=1980, pwr_w=400.0, pviol_pct=0.0, gtemp_c=60.0, **extra
        )
        for g in range(gpus)
    ]
    return pl.concat(frames).with_columns(pl.col("gpu").cast(pl.Int32))


def disk(
    n: int, wkb: Any, w_await: Any = 1.0, util: Any = 10.0, aqu: Any = 0.2, device: str = "nvme0n1"
) -> pl.DataFrame:
    return series(
        n,
        device=device,
        wkb_s=wkb,
        rkb_s=100.0,
        w_await_ms=w_await,
        r_await_ms=0.5,
        util_pct=util,
        aqu_sz=aqu,
        since_boot=False,
    )


def between(i: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= i < b for a, b in spans)
