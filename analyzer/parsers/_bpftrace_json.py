"""``bpftrace -f json`` output (private helper of ``bpftrace``).

bpftrace prints one JSON record per line (NDJSON); its test suite also keeps records
pretty-printed over several lines. Lines are grouped into records with polars (a record
starts at a line beginning with ``{``), then each record — a whole map print, many
buckets — is decoded with ``json`` (one Python step per record, not per line).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from analyzer.parsers._bpftrace_text import NOISE, UNITS, time_values
from analyzer.parsers.base import TS, Coverage, ParseContext

HIST_COLS = ["rec", "map", "key", "bucket_low", "bucket_high", "count"]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if not isinstance(v, int) or abs(v) < 2**1023 else None  # float(10**400) raises


def _is_stats_leaf(x: Any) -> bool:
    return isinstance(x, dict) and "count" in x and not isinstance(x["count"], dict)


def _keyed(data: Any, is_leaf: Any) -> list[tuple[str, Any]]:
    """``value`` or ``{key: value}`` -> [(key, value)] ('' when unkeyed)."""
    if is_leaf(data):
        return [("", data)]
    if isinstance(data, dict):
        return [(str(k), v) for k, v in data.items()]
    return []


def _int64(v: object) -> int | None:
    """A JSON integer that fits Int64 (json.loads gives arbitrary ints, or strings)."""
    ok = isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63
    return v if ok else None  # type: ignore[return-value]


def _record(rec: int, obj: dict, hist: list, scal: list, tstr: list) -> str:
    """Append rows for one record; return its coverage class ('P', 'S:..', 'K:..')."""
    kind, data = obj.get("type"), obj.get("data")
    if kind == "attached_probes":
        return "S:banner"
    if kind == "time":
        tstr.append((rec, str(data).strip()))
        return "S:timestamp"
    if kind not in ("hist", "map", "stats", "tseries") or not isinstance(data, dict):
        return f"K:unsupported JSON record type {kind!r}"
    before = len(hist) + len(scal)
    for name, body in data.items():
        if kind == "hist":
            for key, buckets in _keyed(body, lambda x: isinstance(x, list)):
                for b in buckets if isinstance(buckets, list) else []:
                    if not isinstance(b, dict):
                        continue
                    lo, hi = _int64(b.get("min")), _int64(b.get("max"))
                    hi = _int64(hi + 1) if hi is not None else None
                    hist.append((rec, name, key, lo, hi, _int64(b.get("count"))))
        elif kind == "stats":
            for key, st in _keyed(body, _is_stats_leaf):
                if isinstance(st, dict):
                    scal.extend(
                        (rec, name, key, s, _num(st.get(s)), None)
                        for s in ("count", "average", "total")
                        if s in st
                    )
        elif kind == "tseries":
            for key, points in _keyed(body, lambda x: isinstance(x, list)):
                for p in points if isinstance(points, list) else []:
                    if isinstance(p, dict) and _num(p.get("value")) is not None:
                        tstr.append((("p", len(scal)), str(p.get("interval_start", ""))))
                        scal.append(
                            (rec, name, key, "value", _num(p["value"]), None, len(tstr) - 1)
                        )
        else:
            for key, v in _keyed(body, lambda x: not isinstance(x, dict)):
                if isinstance(v, dict | list):
                    continue
                scal.append(
                    (rec, name, key, "value", _num(v), None if _num(v) is not None else str(v))
                )
    return "P" if len(hist) + len(scal) > before else "S:empty map"


def tokenize(
    df: pl.DataFrame, ctx: ParseContext, tz: str, cov: Coverage
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """JSON-mode file -> (hist rows, scalar rows); fills ``cov``."""
    s = pl.col("line").str.strip_chars()
    kind = (
        pl.when(s == "")
        .then(pl.lit("blank"))
        .when(s.str.contains(NOISE))
        .then(pl.lit("noise"))
        .when(pl.col("line").str.starts_with("{"))
        .then(pl.lit("start"))
        .otherwise(pl.lit("cont"))
    )
    df = df.with_columns(kind=kind).with_columns(
        rec=(pl.col("kind") == "start").cast(pl.Int32).cum_sum()
    )
    blank2 = (pl.col("kind") == "blank") & (pl.col("kind").shift(1) == "blank")
    df = df.with_columns(reset=blank2.cast(pl.Int32).cum_sum())
    body = df.filter(pl.col("kind").is_in(["start", "cont"]) & (pl.col("rec") > 0))
    blocks = body.group_by("rec", maintain_order=True).agg(
        pl.col("line").str.join("\n"), pl.len().alias("n"), pl.col("reset").first()
    )
    hist: list = []
    scal: list = []
    tstr: list = []
    classes: dict[int, str] = {}
    rec_reset: dict[int, int] = {}
    for rec, text, _n, reset in blocks.iter_rows():
        rec_reset[rec] = reset
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            classes[rec] = "K:malformed JSON record"
            continue
        classes[rec] = (
            _record(rec, obj, hist, scal, tstr)
            if isinstance(obj, dict)
            else "K:malformed JSON record"
        )
    # coverage per line
    cls = df.select(
        pl.when(pl.col("kind") == "blank")
        .then(pl.lit("S:blank"))
        .when(pl.col("kind") == "noise")
        .then(pl.lit("K:stderr noise"))
        .when(pl.col("rec") == 0)
        .then(pl.lit("K:unrecognized line (unsupported output or garbage)"))
        .otherwise(
            pl.col("rec").replace_strict(
                classes, default="K:malformed JSON record", return_dtype=pl.String
            )
        )
        .alias("r")
    )
    for r, n in cls.group_by("r").len().iter_rows():
        if r == "P":
            cov.parsed += n
        elif r.startswith("S:"):
            cov.add_structure(r[2:], n)
        else:
            cov.add_skipped(r[2:], n)
    # timestamps: "time" records apply to later records until a double blank line
    tframe = pl.DataFrame({"t": [t for _, t in tstr]}, schema={"t": pl.String})
    tvals = time_values(tframe, "t", ctx, tz).to_list() if tstr else []
    rec_ts: dict[int, Any] = {}
    cur, cur_reset = None, None
    time_at = {r: tvals[i] for i, (r, _) in enumerate(tstr) if isinstance(r, int)}
    for rec in sorted(rec_reset):
        if cur_reset is not None and rec_reset[rec] != cur_reset:
            cur = None
        cur_reset = rec_reset[rec]
        if rec in time_at:
            cur = time_at[rec]
        rec_ts[rec] = cur
    hist_df = pl.DataFrame(
        hist,
        schema=dict(
            zip(
                HIST_COLS,
                [pl.Int64, pl.String, pl.String, pl.Int64, pl.Int64, pl.Int64],
                strict=True,
            )
        ),
        orient="row",
    )
    hist_df = hist_df.with_columns(
        ts=pl.col("rec").replace_strict(rec_ts, default=None, return_dtype=TS),
        unit=pl.col("map")
        .str.strip_prefix("@")
        .str.to_lowercase()
        .replace_strict(UNITS, default=None, return_dtype=pl.String),
        style=pl.lit("json"),
    )
    rows = [
        (r[0], r[1], r[2], r[3], r[4], r[5], tvals[r[6]] if len(r) > 6 else rec_ts.get(r[0]))
        for r in scal
    ]
    sc_df = pl.DataFrame(
        rows,
        schema={
            "rec": pl.Int64,
            "map": pl.String,
            "key": pl.String,
            "stat": pl.String,
            "value": pl.Float64,
            "text": pl.String,
            "ts": TS,
        },
        orient="row",
    )
    return hist_df.drop("rec"), sc_df.drop("rec")
