"""mpstat, big files: table rows from the typed fast rows of one chunk (:mod:`._mpstat_fast`).

Everything here is numpy on the chunk's arrays, handed to polars without a copy where
polars allows it: ``ts`` (UTC microseconds, ``base.TS``) from the banner date, the day
roll-over and the time of day; ``since_boot`` (row time equals its header's time); the
CPU/NODE tables one row per fast row (:func:`cpu_frames`); the interrupt tables in long
form, one row per CPU and interrupt. All interrupt groups of a chunk (``-I SUM`` and
``-I SCPU`` alternate every report) are laid out in file order at once, so each long
row is written once instead of built per group, concatenated and sorted by line: what
does not depend on the chunks before (CPU, irq names, kinds, values) by a worker thread
(:func:`irq_layout`), the rest (times, ``since_boot``) by the main thread
(:func:`irq_frame`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from analyzer.parsers import _sysstat as s
from analyzer.parsers import base

if TYPE_CHECKING:
    from analyzer.parsers._mpstat_fast import Ctx, Group, Rows

_EPOCH = datetime(1970, 1, 1)


def _utc_us(sec: np.ndarray, day: np.ndarray, cx: Ctx) -> np.ndarray | None:
    """Row times as UTC microseconds when no time zone conversion is needed (None else)."""
    if cx.day0 is None or cx.zone not in (None, "UTC"):
        return None
    day0_us = (cx.day0 - _EPOCH) // timedelta(microseconds=1)
    us = sec.astype(np.int64)
    us += 86400 * day.astype(np.int64)
    us *= 1_000_000
    us += day0_us
    return us


def ts_series(sec: np.ndarray, day: np.ndarray, cx: Ctx) -> pl.Series:
    """Row times: banner date + day roll-over + time of day, local time -> UTC (``base.TS``)."""
    us = _utc_us(sec, day, cx)
    if us is not None:  # s.local_to_utc's UTC case: the same instants
        return pl.Series("ts", us).cast(base.TS)
    if cx.day0 is None:
        return pl.repeat(None, sec.size, dtype=base.TS, eager=True).alias("ts")
    day0_us = (cx.day0 - _EPOCH) // timedelta(microseconds=1)
    us = day0_us + (sec.astype(np.int64) + 86400 * day.astype(np.int64)) * 1_000_000
    naive = pl.Series("ts", us).cast(pl.Datetime("us"))
    return naive.to_frame().select(s.local_to_utc(pl.col("ts"), cx.zone).cast(base.TS)).to_series()


def cpu_frames(f: Rows, g: Group, cx: Ctx) -> list[tuple[str, pl.DataFrame]]:
    """CPU/NODE table rows of one group: line_no, ts, since_boot, key, the percentages."""
    assert f.day is not None and f.hdr_sec is not None and f.node is not None
    frame = pl.DataFrame(
        {
            "line_no": pl.Series(f.line + f.first_line, dtype=pl.UInt32),
            "ts": ts_series(f.sec, f.day, cx),
            "since_boot": pl.Series(f.sec == f.hdr_sec),
            "key": pl.Series(f.key, dtype=pl.Int32),
            **{cx.pct_cols[n]: f.vals[i] for i, n in enumerate(g.names)},
        }
    )
    node = f.node
    out = []
    if not node.all():
        cpu = frame if not node.any() else frame.filter(~pl.Series(node))
        out.append(("mpstat_cpu", cpu.rename({"key": "cpu"})))
    if node.any():
        out.append(("mpstat_node", frame.filter(pl.Series(node)).rename({"key": "node"})))
    return out


@dataclass
class IrqLayout:
    """The long rows of a chunk's interrupt groups, all but what depends on the chunks
    before it (times, headers, line numbers): laid out by a worker thread."""

    order: np.ndarray | None  # file order of the groups' rows (None: one group)
    rep: pl.Series  # each long row's fast row (index in file order)
    cpu: np.ndarray  # of each fast row, in file order
    per_s: pl.Series
    name: pl.Series  # index in `names` of each long row's interrupt
    names: list[str]  # irq names (sum, HI, TIMER...), the groups' one after the other
    kinds: list[str]  # the kind of each name


def irq_layout(parts: list[tuple[Group, Rows]], cx: Ctx) -> IrqLayout:
    """Lay out the long rows of the interrupt groups ``parts`` (each with rows): per fast
    row, one row per interrupt column (``-I SUM``: one, irq ``sum``), in file order."""
    names: list[str] = []
    kinds: list[str] = []
    first, ks = [], []  # each group's first name and number of names
    for g, _ in parts:
        kind = cx.table_kind(["CPU", *g.names])
        irq = ["sum"] if kind == "sum" else [n.removesuffix("/s") for n in g.names]
        first.append(len(names))
        ks.append(len(irq))
        names += irq
        kinds += [kind] * len(irq)
    heights = [f.height for _, f in parts]
    k_of = np.repeat(np.array(ks, dtype=np.int64), heights)
    order = None
    if len(parts) > 1:  # the groups' rows interleave: file order
        order = np.argsort(np.concatenate([f.line for _, f in parts]), kind="stable")
        k_of = k_of[order]
    total = int(k_of.sum())
    per_s = np.empty(total, dtype=np.float64)
    name = np.empty(total, dtype=np.uint32)
    if order is None:
        k = ks[0]
        per_s.reshape(-1, k)[:] = parts[0][1].vals[:k].T
        name.reshape(-1, k)[:] = np.arange(first[0], first[0] + k, dtype=np.uint32)
    else:
        start = np.empty(order.size, dtype=np.int64)  # each fast row's first long row
        start[order] = np.cumsum(k_of) - k_of
        at = 0
        for j, (_, f) in enumerate(parts):
            dest = start[at : at + f.height]
            at += f.height
            for v in range(ks[j]):
                per_s[dest + v] = f.vals[v]
                name[dest + v] = first[j] + v
    return IrqLayout(
        order,
        pl.Series(np.repeat(np.arange(k_of.size, dtype=np.uint32), k_of)),
        _wide(parts, order, lambda f: f.key),
        pl.Series("per_s", per_s),
        pl.Series(name),
        names,
        kinds,
    )


def _wide(parts: list[tuple[Group, Rows]], order: np.ndarray | None, get) -> np.ndarray:
    """A per-row array of every group, in file order."""
    if order is None:
        return get(parts[0][1])
    return np.concatenate([get(f) for _, f in parts])[order]


def irq_frame(
    lay: IrqLayout, parts: list[tuple[Group, Rows]], cx: Ctx, line_no: bool
) -> pl.DataFrame:
    """``mpstat_irq`` rows of the chunk's interrupt groups laid out by :func:`irq_layout`,
    now that their days and headers are known: columns in the table's order, ``line_no``
    first when asked for (to merge with regular rows)."""
    order = lay.order
    sec, day = _wide(parts, order, lambda f: f.sec), _wide(parts, order, lambda f: f.day)
    wide = {}
    if line_no:
        wide["line_no"] = pl.Series(_wide(parts, order, lambda f: f.line + f.first_line))
        wide["line_no"] = wide["line_no"].cast(pl.UInt32)
    wide["ts"] = ts_series(sec, day, cx)
    wide["since_boot"] = pl.Series(sec == _wide(parts, order, lambda f: f.hdr_sec))
    wide["cpu"] = pl.Series(lay.cpu, dtype=pl.Int32)
    # Per long row by polars gathers (numbers and strings) in this thread: its memory of
    # the chunk before, just handed over, is reused instead of fresh pages.
    frame = pl.DataFrame(wide)[lay.rep]  # (one index for every column)
    one = len(set(lay.kinds)) == 1
    names = {"irq": lay.names} if one else {"kind": lay.kinds, "irq": lay.names}
    strings = pl.DataFrame(names, schema=dict.fromkeys(names, pl.String))[lay.name]
    frame = frame.hstack(strings).with_columns(lay.per_s)
    if one:  # one kind: a constant column, placed by the table's conform
        frame = frame.with_columns(pl.lit(lay.kinds[0], dtype=pl.String).alias("kind"))
    return frame
