"""Bucket and scalar rows of bpftrace / bcc text output (private helper of ``_bpftrace_text``).

Two ways to a ``bpf_hist`` row, with the same values:

* **fast rows**: a bpftrace bucket row in its canonical form (``FAST_ROW``: printable
  ASCII label without ``|``, blanks and ASCII digits around the count, nothing after the
  closing bar — what bpftrace prints) is a ``bt_row`` whatever its neighbours, and its
  fields sit between the first ``]``/``)`` and the first ``|``. Those rows (all but a
  handful in a capture) are cut with two ``find`` calls, their bounds computed once per
  distinct label, and they inherit map, key, timestamp and validity from the first row
  of their run of consecutive fast rows (the run's representative, which the line
  classifier sees; a run shares one header and one timestamp).
* every other bucket row (bcc rows, bpftrace rows with tabs, trailing blanks, non-ASCII
  labels) goes through the full regexes, one line at a time in vectorized form.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzer.parsers.base import TS

BT_ROW = r"^([\[(])([^\])]*)([\])])\s+(\d+)\s+\|[@ ]*\|$"
FAST_ROW = r"^[\[(][\x20-\x28\x2A-\x5C\x5E-\x7B\x7D\x7E]*[\])] +[0-9]{1,18} \|[@ ]*\|$"
BCC_HDR = r"^\s*(\S.*?)\s+: count\s+distribution$"
BCC_LOG2 = r"^\s*(\d+) -> (\d+)\s+: (\d+)\s+\|[*+ ]*\|$"
BCC_LIN = r"^\s*(\d+)\s+: (\d+)\s+\|[*+ ]*\|$"
BCC_KEY = r"^\s*(?:Bucket )?([A-Za-z_][\w ]*?) = (.+)$"
BT_SCALAR = r"^(?:@([A-Za-z_0-9]*)(?:\[(.*)\])?|\]): (.+)$"
TS_ROW = r"^(\S+) +[|*][ *.]*[|*] (-?\d+(?:\.\d+)?|-)$"
_MULT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
UNITS = {
    "usecs": "usecs",
    "us": "usecs",
    "nsecs": "nsecs",
    "ns": "nsecs",
    "msecs": "msecs",
    "ms": "msecs",
    "bytes": "bytes",
    "kbytes": "kbytes",
    "secs": "secs",
}
HIST_COLS = ["ts", "map", "key", "bucket_low", "bucket_high", "count", "unit", "style"]


def _suffixed(expr: pl.Expr) -> pl.Expr:
    """``64K`` -> 65536 (bpftrace suffixes are powers of 1024)."""
    g = expr.str.strip_chars().str.extract_groups(r"^(-?\d+)([KMGTPE]?)$")
    mult = g.struct.field("2").replace_strict(_MULT, default=None, return_dtype=pl.Int64)
    return g.struct.field("1").cast(pl.Int64, strict=False) * mult


def _bounds(inner: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``bucket_low``, ``bucket_high`` of a bpftrace bucket label (between the brackets)."""
    parts = inner.str.split_exact(",", 1)
    lo_s, hi_s = parts.struct.field("field_0"), parts.struct.field("field_1")
    lo = pl.when(lo_s.str.strip_chars() == "...").then(None).otherwise(_suffixed(lo_s))
    hi = (
        pl.when(hi_s.is_null())
        .then(_suffixed(lo_s) + 1)
        .when(hi_s.str.strip_chars() == "...")
        .then(None)
        .otherwise(_suffixed(hi_s))
    )
    return lo, hi


def unit_of(name: pl.Expr) -> pl.Expr:
    """The unit a map name or bcc label states (``@usecs`` -> usecs), else NULL."""
    return (
        name.str.strip_prefix("@")
        .str.to_lowercase()
        .replace_strict(UNITS, default=None, return_dtype=pl.String)
    )


def runs(fast: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of consecutive True in ``fast``: (first index, length) per run, and the run
    number of every True position (in order)."""
    edges = np.diff(np.concatenate(([0], fast.astype(np.int8), [0])))
    first = np.flatnonzero(edges == 1)
    length = np.flatnonzero(edges == -1) - first
    run_of = np.repeat(np.arange(first.size, dtype=np.int64), length)
    return first, length, run_of


def fast_hist_rows(
    lines: pl.DataFrame,
    data: bytes | None,
    fast: np.ndarray,
    run_of: np.ndarray,
    runs_ok: pl.DataFrame,
) -> pl.DataFrame:
    """bpf_hist columns (plus ``line_no``) of the fast rows of a block.

    ``lines``: the block (``line_no``, ``line``); ``data``: its bytes when its lines are
    exactly its ``\\n``-separated bytes, nothing removed (else None: counts are then cut
    from the strings);
    ``fast``: its fast-row mask; ``run_of``: the run number of each fast row; ``runs_ok``:
    ``run``, ``ts``, ``bt_map``, ``bt_key`` of the runs whose representative is a valid
    row (the others give no rows).
    """
    at = np.full(int(run_of.max()) + 1 if run_of.size else 0, -1, dtype=np.int64)
    at[runs_ok.get_column("run").to_numpy()] = np.arange(runs_ok.height)
    pick = at[run_of]
    keep = pick >= 0
    if not keep.any():
        return pl.DataFrame(schema={"line_no": pl.UInt32, **_HIST_SCHEMA})
    idx = np.flatnonzero(fast)[keep]
    line = pl.col("line")
    cut = (
        lines.select(pl.all().gather(idx))
        .with_columns(
            close=line.str.find(r"[\])]").cast(pl.Int64),
            bar=line.str.find("|", literal=True).cast(pl.Int64),
        )
        .with_columns(inner=line.str.slice(1, pl.col("close") - 1))
    )
    counts = None
    if data is not None:
        lens = lines.get_column("line").str.len_bytes().to_numpy()
        counts = _counts(data, lens, idx, cut.get_column("bar").to_numpy())
    if counts is None:
        count = line.str.slice(pl.col("close") + 1, pl.col("bar") - pl.col("close") - 1)
        counts = cut.select(count.str.strip_chars(" ").cast(pl.Int64, strict=False)).to_series()
    labels = cut.get_column("inner").unique()
    lo, hi = _bounds(pl.col("inner"))
    bounds = pl.DataFrame({"inner": labels}).select(lo.alias("bucket_low"), hi.alias("bucket_high"))
    code = cut.get_column("inner").cast(pl.Enum(labels)).to_physical().to_numpy()
    attrs = runs_ok.select(
        "ts",
        pl.col("bt_map").alias("map"),
        pl.col("bt_key").alias("key"),
        unit_of(pl.col("bt_map")).alias("unit"),
    )
    return pl.concat(
        [
            cut.select("line_no"),
            attrs.select(pl.all().gather(pick[keep])),
            bounds.select(pl.all().gather(code)),
            pl.DataFrame({"count": counts.cast(pl.Int64)}),
        ],
        how="horizontal",
    ).select(*["line_no", *HIST_COLS[:-1]], pl.lit("bpftrace").alias("style"))


def _counts(data: bytes, lens: np.ndarray, idx: np.ndarray, bar: np.ndarray) -> pl.Series | None:
    """Counts of fast rows read from the block's bytes: the run of digits that ends two
    bytes before the bar (``FAST_ROW``: 1 to 18 digits, one blank before ``|``), one
    digit place at a time over all rows. ``lens``: byte length of every line of the block.
    None when the rows are not where the lines say (then the strings are cut instead)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    starts = np.concatenate(([0], np.cumsum(lens.astype(np.int64) + 1)[:-1]))
    end = starts[idx] + bar - 1  # the blank before the bar
    if end.size and (end.max() >= buf.size or not (buf[end] == 32).all()):
        return None
    value = np.zeros(end.size, dtype=np.int64)
    alive = np.ones(end.size, dtype=bool)
    for place in range(18):
        c = buf[np.maximum(end - 1 - place, 0)]
        alive &= (c >= 48) & (c <= 57)
        if not alive.any():
            break
        value += np.where(alive, (c.astype(np.int64) - 48) * 10**place, 0)
    else:
        if alive.any():  # more than 18 digits: not a fast row after all
            return None
    return pl.Series("count", value, dtype=pl.Int64)


_HIST_SCHEMA = {
    "ts": TS,
    "map": pl.String,
    "key": pl.String,
    "bucket_low": pl.Int64,
    "bucket_high": pl.Int64,
    "count": pl.Int64,
    "unit": pl.String,
    "style": pl.String,
}


def hist_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """Valid bucket rows (bpftrace and bcc) -> bpf_hist columns plus ``line_no``."""
    s, is_bt = pl.col("s"), pl.col("kind") == "bt_row"
    bt = s.str.extract_groups(BT_ROW)
    bt_lo, bt_hi = _bounds(bt.struct.field("2"))
    log2, lin = s.str.extract_groups(BCC_LOG2), s.str.extract_groups(BCC_LIN)
    bcc_lo = pl.coalesce(log2.struct.field("1"), lin.struct.field("1")).cast(pl.Int64, strict=False)
    bcc_hi = (
        pl.coalesce(log2.struct.field("2"), lin.struct.field("1")).cast(pl.Int64, strict=False) + 1
    )
    bcc_count = pl.coalesce(log2.struct.field("3"), lin.struct.field("2")).cast(
        pl.Int64, strict=False
    )
    label = pl.col("starter_line").str.extract(BCC_HDR, 1)
    sec = pl.col("hdr_prev").str.extract_groups(BCC_KEY)
    has_sec = pl.col("hdr_prev_kind") == "bcc_key"
    bcc_map = pl.when(has_sec).then(sec.struct.field("1")).otherwise(label)
    bcc_key = (
        pl.when(has_sec)
        .then(sec.struct.field("2").str.strip_chars().str.strip_chars("'\""))
        .otherwise(pl.lit(""))
    )
    return rows.select(
        "line_no",
        "ts",
        pl.when(is_bt).then(pl.col("bt_map")).otherwise(bcc_map).alias("map"),
        pl.when(is_bt).then(pl.col("bt_key")).otherwise(bcc_key).alias("key"),
        pl.when(is_bt).then(bt_lo).otherwise(bcc_lo).alias("bucket_low"),
        pl.when(is_bt).then(bt_hi).otherwise(bcc_hi).alias("bucket_high"),
        pl.when(is_bt)
        .then(bt.struct.field("4").cast(pl.Int64, strict=False))
        .otherwise(bcc_count)
        .alias("count"),
        pl.when(is_bt)
        .then(pl.col("bt_map").str.strip_prefix("@"))
        .otherwise(label)
        .str.to_lowercase()
        .replace_strict(UNITS, default=None, return_dtype=pl.String)
        .alias("unit"),
        pl.when(is_bt).then(pl.lit("bpftrace")).otherwise(pl.lit("bcc")).alias("style"),
    )


def scalar_rows(scal: pl.DataFrame, ts_rows: pl.DataFrame, times: pl.Series | None) -> pl.DataFrame:
    """Map value lines (value / stats() / text) and tseries rows -> bpf_scalar columns.

    ``times``: the timestamps of ``ts_rows`` (read by the caller, which carries their
    midnight roll-over from block to block); None when there are no tseries rows.
    """
    val = pl.col("s").str.extract(BT_SCALAR, 3).str.strip_chars()
    num = val.cast(pl.Float64, strict=False)
    stats = val.str.extract_groups(r"^count (-?\d+), average (-?\d+), total (-?\d+)$")
    is_stats = stats.struct.field("1").is_not_null()
    ident = [pl.col("ts"), pl.col("here_map").alias("map"), pl.col("here_key").alias("key")]
    parts = [
        scal.filter(~is_stats).select(
            *ident,
            pl.lit("value").alias("stat"),
            num.alias("value"),
            pl.when(num.is_null()).then(val).alias("text"),
        )
    ]
    for i, stat in enumerate(("count", "average", "total"), start=1):
        parts.append(
            scal.filter(is_stats).select(
                *ident,
                pl.lit(stat).alias("stat"),
                stats.struct.field(str(i)).cast(pl.Float64).alias("value"),
                pl.lit(None, pl.String).alias("text"),
            )
        )
    tsr = pl.col("s").str.extract_groups(TS_ROW)
    parts.append(
        ts_rows.with_columns(ts=times if times is not None else pl.lit(None, TS)).select(
            "ts",
            pl.col("bt_map").alias("map"),
            pl.col("bt_key").alias("key"),
            pl.lit("value").alias("stat"),
            tsr.struct.field("2").cast(pl.Float64, strict=False).alias("value"),
            pl.lit(None, pl.String).alias("text"),
        )
    )
    return pl.concat(parts, how="vertical_relaxed")
