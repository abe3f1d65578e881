"""``bpftrace -f json`` records -> rows (the JSON half of `analyzer.parsers.bpftrace`).

bpftrace prints one JSON record per line (NDJSON); its test suite also keeps records
pretty-printed over several lines. `bpftrace` groups the lines into records; each record
(a whole map print, many buckets) is decoded here with ``json``: one Python step per
record, not per line. Timestamps, units and coverage are `bpftrace`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import polars as pl

#: Row layouts of `decode`'s hist rows and scalar rows (the record number first).
HIST = {"rec": pl.Int64, "map": pl.String, "key": pl.String}
HIST |= {"bucket_low": pl.Int64, "bucket_high": pl.Int64, "count": pl.Int64}
SCALAR = {"rec": pl.Int64, "map": pl.String, "key": pl.String, "stat": pl.String}
SCALAR |= {"value": pl.Float64, "text": pl.String}


def decode(
    records: Iterable[tuple[int, str]],
) -> tuple[list[tuple], list[tuple], list[tuple[Any, str]], dict[int, str]]:
    """(record number, text) -> hist rows, scalar rows, time strings, class per record.

    Time strings are ``(rec, text)`` for "time" records and ``(("p", i), text)`` for the
    interval start of tseries point ``i``, whose scalar row ends with the string's index.
    Classes: 'P' (gave rows), 'S:<structure>' or 'K:<skip reason>'.
    """
    hist: list[tuple] = []
    scal: list[tuple] = []
    tstr: list[tuple[Any, str]] = []
    classes: dict[int, str] = {}
    for rec, text in records:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            obj = None
        ok = isinstance(obj, dict)
        classes[rec] = _record(rec, obj, hist, scal, tstr) if ok else "K:malformed JSON record"
    return hist, scal, tstr, classes


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
