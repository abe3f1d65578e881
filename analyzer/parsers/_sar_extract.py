"""Turn tokenized sar/sadf data rows into the typed tables of `_sar_tables`.

Input: one frame of data rows with ``ts`` (UTC), ``sid`` (index of the row's section in a
list of :class:`Section`) and ``tok`` (list of the row's value tokens, same length as the
section's header names). Columns are picked by header name through a small per-section
index frame joined on ``sid``, then cast once per declared dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzer.parsers import _read
from analyzer.parsers import _sar_names as sn
from analyzer.parsers import _sar_tables as st
from analyzer.parsers import _sysstat as ss


@dataclass(frozen=True)
class Section:
    """One distinct header: its names, target table and column positions."""

    names: tuple[str, ...]
    table: str
    cols: dict[str, tuple[int, float]] = field(default_factory=dict)

    @property
    def width(self) -> int:
        return len(self.names)

    @property
    def label(self) -> str:
        return " ".join(self.names)


def make_section(names: list[str] | tuple[str, ...]) -> Section:
    """Classify a header and locate its columns."""
    names = tuple(names)
    table = sn.classify(list(names))
    cols: dict[str, tuple[int, float]] = {}
    if table in st.COLUMNS:
        amap = sn.text_alias_map(table)
        for i, n in enumerate(names):
            col, scale = amap[n]
            cols.setdefault(col, (i, scale))
    return Section(names=names, table=table, cols=cols)


def _alias_sets() -> dict[str, set[str]]:
    out = {t: set(sn.text_alias_map(t)) for t in st.COLUMNS}
    out["sar_psi"] = {n for p in st.PSI_PREFIX for n in (p + "-10", p + "-60", p + "-300", p)}
    return out


_ALIASES = _alias_sets()


def split_groups(names: list[str]) -> list[tuple[int, int, Section]]:
    """Split a ``sadf -d``/``-dh`` header into activities: ``[(start, end, Section)]``.

    ``sadf -dh`` glues the headers of all activities into one line. Runs of names that all
    belong to one table (and satisfy its signature) form a group; everything else is merged
    into ``sar_other`` groups. A plain single-activity header gives one group.
    """
    runs: list[tuple[int, int, str]] = []
    i = 0
    while i < len(names):
        best, best_len = "sar_other", 1
        for table, aliases in _ALIASES.items():
            seen: set[str] = set()
            j = i
            while j < len(names) and names[j] in aliases and names[j] not in seen:
                seen.add(names[j])
                j += 1
            if j - i > best_len or (j - i == best_len and best == "sar_other" and j > i):
                best, best_len = table, j - i
        if best != "sar_other" and sn.classify(names[i : i + best_len]) != best:
            best = "sar_other"
        runs.append((i, i + best_len, best))
        i += best_len
    merged: list[tuple[int, int, str]] = []
    for a, b, t in runs:
        if merged and t == "sar_other" and merged[-1][2] == "sar_other":
            merged[-1] = (merged[-1][0], b, t)
        else:
            merged.append((a, b, t))
    return [(a, b, make_section(names[a:b])) for a, b, _ in merged]


def text_tail(sections: list[Section]) -> pl.Expr:
    """``tok`` with free-text trailing columns (USB ``manufact``/``product``, ``FILESYSTEM``)
    re-joined: extra tokens go into the last column, missing trailing text columns are blank.

    Approximate for USB rows: a multi-word manufacturer spills into ``product``.
    """
    expr = pl.col("tok")
    for i, s in enumerate(sections):
        ntext = 0
        for n in reversed(s.names):
            if n not in st.TEXT_NAMES:
                break
            ntext += 1
        if not ntext:
            continue
        w = s.width
        n = pl.col("tok").list.len()
        fixed = (
            pl.col("tok")
            .list.head(w - 1)
            .list.concat(pl.concat_list(pl.col("tok").list.slice(w - 1).list.join(" ")))
        )
        padded = pl.col("tok").list.concat(pl.lit([""] * ntext, pl.List(pl.String))).list.head(w)
        expr = (
            pl.when((pl.col("sid") == i) & (n > w))
            .then(fixed)
            .when((pl.col("sid") == i) & (n < w) & (n >= w - ntext))
            .then(padded)
            .otherwise(expr)
        )
    return expr.alias("tok")


def _float(tok: pl.Expr, human: bool = False, plain: bool = False) -> pl.Expr:
    if human:
        return ss.number(tok, human=True)
    return tok.cast(pl.Float64, strict=False) if plain else _read.decimal_number(tok)


def _int(tok: pl.Expr, human: bool = False, plain: bool = False) -> pl.Expr:
    whole = tok.cast(pl.Int64, strict=False) if plain and not human else _read.int_number(tok)
    return pl.coalesce(whole, _float(tok, human, plain).round().cast(pl.Int64, strict=False))


def cast_value(
    tok: pl.Expr, dtype: pl.DataType, col: str, human: bool = False, plain: bool = False
) -> pl.Expr:
    """One token -> the declared dtype (decimal comma; ``--human`` suffixes with ``human``).

    ``plain``: the tokens hold no blank and no comma, so stripping blanks and reading a
    decimal comma would change nothing: the token is cast as it is (same values, less work).
    """
    if col == "cpu":
        t = tok.str.strip_chars().str.to_lowercase().str.strip_prefix("cpu")  # sadf -p: cpu0
        return pl.when(t == "all").then(-1).otherwise(t.cast(pl.Int32, strict=False)).cast(pl.Int32)
    if dtype == pl.String:
        return tok
    if dtype in (pl.Int64, pl.Int32):
        return _int(tok, human, plain).cast(dtype, strict=False)
    v = _float(tok, human, plain)
    return v


def extract(
    rows: pl.DataFrame, sections: list[Section], human: bool = False, plain: bool = False
) -> dict[str, pl.DataFrame]:
    """Build every table that has rows; ``rows`` has ts, sid, tok (validated widths).
    ``plain``: no token holds a blank or a comma (see `cast_value`). When ``rows`` has
    ``line_no``, each table also gets the keys of its row order (``line_no``; ``_sid``,
    ``_tpl`` for sar_psi; ``_sid``, ``_m`` for sar_other) so that other rows can be merged
    in (`_sar_fast`); the table schemas drop them."""
    out: dict[str, pl.DataFrame] = {}
    by_table: dict[str, list[int]] = {}
    for i, s in enumerate(sections):
        by_table.setdefault(s.table, []).append(i)
    for table, sids in by_table.items():
        sub = rows.filter(pl.col("sid").is_in(sids))
        if sub.height == 0:
            continue
        if table == "sar_psi":
            frame = _psi(sub, sections, sids, human, plain)
        elif table == "sar_other":
            frame = _other(sub, sections, sids, human, plain)
        else:
            frame = _dedicated(sub, sections, sids, table, human, plain)
        if frame.height:
            out[table] = frame
    return out


def _dedicated(
    sub: pl.DataFrame,
    sections: list[Section],
    sids: list[int],
    table: str,
    human: bool,
    plain: bool = False,
) -> pl.DataFrame:
    cols = st.COLUMNS[table]
    idx: dict[str, list[object]] = {"sid": list(sids)}
    for col in cols:
        idx[f"_i_{col}"] = [sections[s].cols.get(col, (None, 1.0))[0] for s in sids]
        idx[f"_k_{col}"] = [sections[s].cols.get(col, (None, 1.0))[1] for s in sids]
    schema = {"sid": pl.Int32} | {
        k: (pl.Int32 if k.startswith("_i_") else pl.Float64) for k in idx if k != "sid"
    }
    ix = pl.DataFrame(idx, schema=schema)
    j = sub.join(ix, on="sid", how="left")
    exprs = [pl.col("ts")]
    order = ["line_no"] if "line_no" in sub.columns else []
    for col, spec in cols.items():
        tok = pl.col("tok").list.get(pl.col(f"_i_{col}"), null_on_oob=True)
        v = cast_value(tok, spec[0], col, human, plain)
        if spec[0] == pl.Float64:
            v = v * pl.col(f"_k_{col}")
        exprs.append(v.alias(col))
    return j.select(*exprs, *order)


def _psi(
    sub: pl.DataFrame, sections: list[Section], sids: list[int], human: bool, plain: bool = False
) -> pl.DataFrame:
    parts = []
    keyed = "line_no" in sub.columns
    for s in sids:
        rows = sub.filter(pl.col("sid") == s)
        for tpl, (res, kind, idx) in enumerate(sn.psi_templates(list(sections[s].names))):
            order = [pl.lit(s, pl.Int64).alias("_sid"), pl.lit(tpl, pl.Int64).alias("_tpl")]
            parts.append(
                rows.select(
                    "ts",
                    pl.lit(res).alias("resource"),
                    pl.lit(kind).alias("kind"),
                    *(
                        (
                            _float(pl.col("tok").list.get(idx[c], null_on_oob=True), human, plain)
                            if c in idx
                            else pl.lit(None, pl.Float64)
                        ).alias(c)
                        for c in ("avg10_pct", "avg60_pct", "avg300_pct", "avg_pct")
                    ),
                    *([*order, "line_no"] if keyed else []),
                )
            )
    return pl.concat(parts) if parts else pl.DataFrame()


def _other(
    sub: pl.DataFrame, sections: list[Section], sids: list[int], human: bool, plain: bool = False
) -> pl.DataFrame:
    parts = []
    for s in sids:
        sec = sections[s]
        rows = sub.filter(pl.col("sid") == s)
        keys = [i for i, n in enumerate(sec.names) if n in st.KEY_NAMES]
        item = (
            pl.concat_str(
                [pl.col("tok").list.get(i, null_on_oob=True) for i in keys], separator="|"
            )
            if keys
            else pl.lit(None, pl.String)
        )
        idx = [i for i in range(sec.width) if i not in keys]
        if not idx:
            continue
        keyed = "line_no" in rows.columns
        order = [pl.lit(s, pl.Int64).alias("_sid"), "line_no"] if keyed else []
        long = rows.select(
            "ts",
            item.alias("item"),
            pl.col("tok").list.gather(idx, null_on_oob=True).alias("raw"),
            pl.lit([sec.names[i] for i in idx], pl.List(pl.String)).alias("metric"),
            *order,
            *([pl.lit(list(range(len(idx))), pl.List(pl.Int64)).alias("_m")] if keyed else []),
        ).explode("raw", "metric", *(["_m"] if keyed else []))
        v = _float(pl.col("raw"), human, plain)
        parts.append(
            long.select(
                "ts",
                pl.lit(sec.label).alias("section"),
                "item",
                "metric",
                v.alias("value"),
                pl.when(v.is_null()).then(pl.col("raw")).otherwise(None).alias("text"),
                *(["_sid", "line_no", "_m"] if keyed else []),
            )
        )
    return pl.concat(parts) if parts else pl.DataFrame()
