"""iostat, big files: what the main thread does with each typed block (:mod:`._iostat_fast`).

The worker left device rows typed and most structure lines told (:mod:`._iostat_rows`);
here the remaining lines go through iostat's regular classifier (:func:`.iostat.line_kinds`)
and the regular path's running state is carried from block to block (:class:`State`):
the governing device header (``dev_ctx``), the last event and the report numbering, as
:func:`.iostat.classify_lines` and :func:`.iostat._reports` compute them over the whole
file. A fast row is kept only if the last structure line above it is a device header of
the fast layout (else :func:`finish` returns None and the block is read again without
fast rows). Rows the worker could not type are typed the regular way
(:func:`.iostat._device_rows`, :func:`.iostat._cpu_rows`), and every row gets its report's
time (:func:`._iostat_cols.times_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _iostat_scan as scan
from analyzer.parsers import _sysstat as s
from analyzer.parsers import base
from analyzer.parsers import iostat as io
from analyzer.parsers._iostat_rows import (
    _EVENTS,
    _MARKS,
    _RESETS,
    AVG,
    CPU,
    DEV_HDR,
    KINDS,
    OTHER,
    TRUNC,
    TS,
    Layout,
    Prepared,
)


@dataclass
class State:
    """What carries from chunk to chunk (the regular classifier's running state)."""

    line: int = 1
    dev_ctx: int = 0  # line of the governing device header, 0 = none
    event: int = -1  # last event kind (ts, avg, dev_hdr)
    reports: int = 0  # reports started so far
    mark: tuple[int, bool, int] = (-1, False, -1)  # last structure line: kind, main, report
    hdr: tuple[int, str, str] | None = None  # last device header: line_no, hkey, text
    prev_avg: bool = False  # the last line was an avg-cpu header
    stamp: tuple[int, object] | None = None  # the open report's stamp
    layouts: list[str] = field(default_factory=list)
    counts: np.ndarray = field(default_factory=lambda: np.zeros(len(KINDS), dtype=np.int64))
    stray: int = 0
    no_time: bool = False
    banner: str | None = None  # the file's first banner line
    layout_text: dict[str, str] = field(default_factory=dict)  # hkey -> its first header
    avg_text: str | None = None  # the file's first avg-cpu header


def _ffill(vals: np.ndarray, init: int) -> np.ndarray:
    """Forward fill of the values >= 0 (``init`` before the first)."""
    at = np.maximum.accumulate(np.where(vals >= 0, np.arange(vals.size), -1))
    return np.where(at >= 0, vals[np.maximum(at, 0)], init)


@dataclass
class Out:
    """One chunk's rows: device and avg-cpu frames, with report times; the first tokens
    and device header layouts of the lines the regular classifier read (what a first
    pass over them would find, see :mod:`._iostat_scan`)."""

    dev: pl.DataFrame | None
    cpu: pl.DataFrame | None
    tokens: set[str] = field(default_factory=set)
    hkeys: set[str] = field(default_factory=set)


def finish(
    p: Prepared, lay: Layout, st: State, ctx: base.ParseContext, cov: base.Coverage, tz: tuple
) -> Out | None:
    """This thread's part: classify what the worker could not, carry the regular
    classifier's state, check each fast row's header, type the rest the regular way.
    None when a fast row is not under a device header of the fast layout (nothing changed)."""
    chunk, rest = p.chunk, p.rest
    chunk.first_line = st.line
    kind = p.kind.astype(np.int8)
    text = _unknown(p, kind, st)
    ln = rest.astype(np.int64) + chunk.first_line
    main = kind == DEV_HDR  # a device header of the fast layout
    if text.height:
        for pos, key in text.filter(pl.col("kind") == "dev_hdr").select("_pos", "hkey").rows():
            main[pos] = key == lay.hkey
    dev_ctx = _ffill(
        np.where(kind == DEV_HDR, ln, np.where(np.isin(kind, _RESETS), 0, -1)), st.dev_ctx
    )
    last_ev = _ffill(np.where(np.isin(kind, _EVENTS), kind, -1), st.event)
    prev_ev = np.concatenate([[st.event], last_ev[:-1]]) if rest.size else last_ev
    start = (
        (kind == TS)
        | ((kind == AVG) & (prev_ev != TS))
        | (main & (prev_ev != TS) & (prev_ev != AVG))
    )
    report = np.cumsum(start) - 1 + st.reports
    marks = np.flatnonzero(np.isin(kind, _MARKS))
    count = np.zeros(chunk.n, dtype=np.int32)
    count[rest[marks]] = 1
    j = np.cumsum(count)[p.rows] - 1  # index in marks of the last one above each fast row
    ok = np.append((kind[marks] == DEV_HDR) & main[marks], st.mark[0] == DEV_HDR and st.mark[1])
    if not ok[j].all():  # j == -1 picks the carried mark
        return None
    row_report = np.append(report[marks], st.mark[2])[j]
    mark_kinds = kind[marks]
    if chunk.unterminated and rest.size and rest[-1] == chunk.n - 1 and kind[-1] in (OTHER, CPU):
        kind[-1] = TRUNC
    st.counts += np.bincount(kind, minlength=len(KINDS))
    st.stray += int(((kind == OTHER) & (dev_ctx == 0)).sum())
    if text.height:
        at = text.get_column("_pos").to_numpy()
        text = text.with_columns(
            report=pl.Series(report[at], dtype=pl.Int32), dev_ctx=pl.Series(dev_ctx[at])
        )
    hdrs = _header_of(text, kind, ln, lay, st)
    if st.banner is None and text.height:  # the file's first banner (for meta)
        banner = text.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
        st.banner = banner[0] if banner else None
    devs = [_fast_devices(p, lay, row_report)] if p.rows.size else []
    devs += _slow_devices(text, kind, hdrs, st, cov)
    cpus = _cpu(p, text, kind, report, ln, lay, st, cov)
    stamps = _stamps(p, text, kind, report, tz[0])
    cov.parsed += sum(d.height for d in devs) + sum(x.height for x in cpus)
    # Report times: every report of the chunk, from the one still open at its start.
    lo, hi = max(st.reports - 1, 0), st.reports + int(start.sum()) - 1
    reports = pl.DataFrame({"report": np.arange(lo, hi + 1, dtype=np.int32)})
    if st.stamp is not None:
        carried = pl.DataFrame({"report": [st.stamp[0]], "ts": [st.stamp[1]]}, schema=stamps.schema)
        stamps = pl.concat([carried, stamps])
    times, no_time = c.times_for(reports, stamps, ctx, tz[1])
    st.no_time |= no_time
    # Carry the state to the next chunk.
    st.line += chunk.n
    if rest.size:
        st.dev_ctx, st.event = int(dev_ctx[-1]), int(last_ev[-1])
        st.prev_avg = bool(rest[-1] == chunk.n - 1 and kind[-1] == AVG)
    else:
        st.prev_avg = False
    if marks.size:
        st.mark = (int(mark_kinds[-1]), bool(main[marks[-1]]), int(report[marks[-1]]))
    if start.any():
        last = np.flatnonzero(start)[-1]
        ts = stamps.filter(pl.col("report") == int(report[last])).get_column("ts").to_list()
        st.stamp = (int(report[last]), ts[0] if ts else None)
    st.reports += int(start.sum())
    out = Out(_timed(devs, times, lo), _timed(cpus, times, lo))
    if text.height:
        tok = text.get_column("line").str.extract(r"^\s*(\S+)").drop_nulls().unique()
        out.tokens = set(tok.to_list())
        out.hkeys = set(text.get_column("hkey").drop_nulls().unique().to_list())
    return out


def _timed(frames: list[pl.DataFrame], times: pl.DataFrame, lo: int) -> pl.DataFrame | None:
    """The rows of ``frames`` in file order with their report's times (``times`` holds
    reports ``lo``, ``lo + 1``, ...)."""
    if not frames:
        return None
    out = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
    if len(frames) > 1:
        out = out.sort("line_no")
    at = out.get_column("report").to_numpy().astype(np.int64) - lo
    if at.size and at.min() < 0:  # rows before the first report: no time
        return out.join(times, on="report", how="left", maintain_order="left")
    return out.hstack(times.drop("report")[at])


_CODE = {k: i for i, k in enumerate(KINDS)}
_TEXT = {
    "_pos": pl.Int64,
    "line_no": pl.UInt32,
    "line": pl.String,
    "kind": pl.String,
    "hkey": pl.String,
}


def _unknown(p: Prepared, kind: np.ndarray, st: State) -> pl.DataFrame:
    """The regular classifier on the lines the worker could not tell (``kind`` -1, set
    here): ``_pos`` (in ``p.rest``), ``line_no``, ``line``, ``kind``, ``hkey``."""
    q = np.flatnonzero(kind == -1)
    if not q.size:
        return pl.DataFrame(schema=_TEXT)
    r = p.rest[q]
    qm = np.maximum(q - 1, 0)
    prev_avg = (q > 0) & (p.rest[qm] == r - 1) & (kind[qm] == AVG)
    prev_avg |= (r == 0) & st.prev_avg
    lines = p.chunk.lines(r).with_columns(
        pl.Series("_prev_avg", prev_avg), pl.Series("_pos", q, dtype=pl.Int64)
    )
    out = io.line_kinds(lines)
    kind[q] = out.get_column("kind").replace_strict(_CODE, return_dtype=pl.Int8).to_numpy()
    return out.select(list(_TEXT))


def _header_of(
    text: pl.DataFrame, kind: np.ndarray, ln: np.ndarray, lay: Layout, st: State
) -> Callable[[int], tuple[str, str]]:
    """``line_no -> (hkey, text)`` of the device headers this chunk's rows may point to
    (its own and the carried one); notes new layouts in file order, carries the last."""
    carried, main = st.hdr, (lay.hkey, lay.header.decode())
    pos = np.flatnonzero(kind == DEV_HDR)
    rows = []
    if text.height:
        rows = text.filter(pl.col("kind") == "dev_hdr").select("_pos", "hkey", "line").rows()
    other = {int(ln[p]): (k, t) for p, k, t in rows}
    if pos.size:
        seq = [(p, (k, t)) for p, k, t in rows]  # positions in rest: other headers
        unknown = {p for p, _ in seq}
        first_copy = next((int(x) for x in pos if int(x) not in unknown), None)
        if first_copy is not None:  # a byte copy of the fast header
            seq.append((first_copy, main))
        for _, (k, t) in sorted(seq):
            if k not in st.layout_text:
                st.layouts.append(k)
                st.layout_text[k] = t
        last = int(ln[pos[-1]])
        st.hdr = (last, *other.get(last, main))

    def of(line_no: int) -> tuple[str, str]:
        if line_no in other:
            return other[line_no]
        if carried is not None and line_no == carried[0]:
            return carried[1], carried[2]
        return main

    return of


def _fast_devices(p: Prepared, lay: Layout, report: np.ndarray) -> pl.DataFrame:
    """The fast device rows as the regular path types them."""
    names = pl.Series("device", p.names, dtype=pl.String)
    frame = pl.DataFrame(
        {
            "line_no": pl.Series(p.chunk.line_nos(p.rows), dtype=pl.UInt32),
            "report": pl.Series(report, dtype=pl.Int32),
            "device": names.gather(p.code),
            **{name: p.vals[lay.numbers.row[j]] for j, name, _, _ in lay.cols},
        }
    )
    conv = [
        ((pl.col(n) * f).round(0).cast(pl.Int64) if is_int else pl.col(n) * f).alias(n)
        for _, n, f, is_int in lay.cols
        if is_int or f != 1.0
    ]
    return frame.with_columns(pl.lit(False).alias("is_group"), *conv)


def _slow_devices(
    text: pl.DataFrame, kind: np.ndarray, hdrs: Callable, st: State, cov: base.Coverage
) -> list[pl.DataFrame]:
    """Device rows the regular way (the fast path's rejects and other tables' rows)."""
    if not text.height:
        return []
    pos = text.get_column("_pos").to_numpy()
    rows = text.filter(pl.Series(kind[pos] == OTHER) & (pl.col("dev_ctx") > 0))
    if not rows.height:
        return []
    out = []
    by_key: dict[str, list[int]] = {}
    for line_no in rows.get_column("dev_ctx").unique(maintain_order=True).to_list():
        by_key.setdefault(hdrs(line_no)[0], []).append(line_no)
    for key, ids in sorted(by_key.items(), key=lambda kv: st.layouts.index(kv[0])):
        sub = rows.filter(pl.col("dev_ctx").is_in(ids))
        if st.layouts.index(key) >= io._MAX_LAYOUTS:
            cov.add_skipped(f"more than {io._MAX_LAYOUTS} distinct header layouts", sub.height)
            continue
        frame, bad = io._device_rows(sub, st.layout_text[key], False, False)
        cov.add_skipped("device row does not match its header", bad)
        out.append(frame)
    return out


def _cpu(
    p: Prepared,
    text: pl.DataFrame,
    kind: np.ndarray,
    report: np.ndarray,
    ln: np.ndarray,
    lay: Layout,
    st: State,
    cov: base.Coverage,
) -> list[pl.DataFrame]:
    """avg-cpu rows: those the worker typed, and the others the regular way."""
    out = []
    if p.cpu.size:
        out.append(
            pl.DataFrame(
                {
                    "line_no": pl.Series(ln[p.cpu], dtype=pl.UInt32),
                    "report": pl.Series(report[p.cpu], dtype=pl.Int32),
                    **{col: p.cpu_vals[lay.cpu.row[j]] for j, col in lay.cpu_cols},
                }
            )
        )
    if not text.height:
        return out
    if st.avg_text is None:
        avg = text.filter(pl.col("kind") == "avg").get_column("line").head(1).to_list()
        st.avg_text = avg[0] if avg else None
    pos = text.get_column("_pos").to_numpy()
    slow = text.filter(pl.Series(kind[pos] == CPU))
    if slow.height:
        frame, bad = io._cpu_rows(slow, False, st.avg_text)
        cov.add_skipped("avg-cpu row does not match its header", bad)
        out.append(frame)
    return out


def _stamps(
    p: Prepared, text: pl.DataFrame, kind: np.ndarray, report: np.ndarray, zone: str | None
) -> pl.DataFrame:
    """``report``, ``ts`` of this chunk's stamp lines (ISO ones decoded by numpy)."""
    pos = np.flatnonzero(kind == TS)
    known = pos[p.kind[pos] == TS]  # told by the worker: ISO stamps
    lines = text.filter(pl.col("kind") == "ts").select("_pos", "line") if text.height else None
    parts = []
    if known.size:
        view = np.lib.stride_tricks.sliding_window_view(p.chunk.buf, 24)
        raw = view[p.chunk.starts[p.rest[known]]]
        done, us = scan.iso_utc(raw)
        us = pl.Series("ts", us[done])
        ts = pl.when(us != scan.NO_TIME).then(us).cast(base.TS)  # NO_TIME: NULL
        parts.append(pl.DataFrame({"_pos": known[done]}).with_columns(ts.alias("ts")))
        if not done.all():
            text_of = pl.Series(raw[~done].view("S24").ravel()).cast(pl.String)
            more = pl.DataFrame({"_pos": known[~done], "line": text_of})
            lines = more if lines is None else pl.concat([lines, more])
    if lines is not None and lines.height:
        parts.append(lines.select("_pos", s.stamp_to_utc(pl.col("line"), zone).alias("ts")))
    if not parts:
        return pl.DataFrame(schema={"report": pl.Int32, "ts": base.TS})
    out = parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical_relaxed").sort("_pos")
    got = report[out.get_column("_pos").to_numpy()]
    return pl.DataFrame({"report": pl.Series(got, dtype=pl.Int32), "ts": out.get_column("ts")})
