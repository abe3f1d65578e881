"""Line kinds of bpftrace / bcc text output (private helper of ``_bpftrace_text``).

Every line gets a kind from one ``when`` chain: blank, ``bt_hdr`` (``@map:``), ``stack_open``
(``@[``), ``bt_row`` (``[lo, hi)  count |@@|``), ``time``, ``bt_scalar`` (``@map: value``),
``bcc_hdr`` (``usecs : count distribution``), ``bcc_row``, ``ts_row`` / ``ts_axis``
(``tseries()``), ``bcc_key`` (``disk = 'sda'`` before a bcc header), ``noise`` (stderr),
``banner``, ``ctrl_c``, ``prompt``, ``title`` (a ``...:`` line before a map), ``indented``,
``prose``, ``other``.

The chain runs once per *distinct* line text (`_facts`: a capture repeats its headers,
blank lines and timestamps); only the bcc section key and the title depend on the next
lines, through three flags of theirs. Canonical bucket rows (``FAST_ROW``) never enter it.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzer.parsers._bpftrace_rows import (
    BCC_HDR,
    BCC_KEY,
    BCC_LIN,
    BCC_LOG2,
    BT_ROW,
    BT_SCALAR,
    FAST_ROW,
    TS_ROW,
)

BT_HDR = r"^(?:@[A-Za-z_0-9]*(?:\[.*\])?|\]):$"
STACK_OPEN = r"^@[A-Za-z_0-9]*\[$"
TIME_HMS = r"^\[?(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)\]?$"
TIME_ISO = r"^(?:@[A-Za-z_0-9]*: )?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)(Z|[+-]\d{2}:?\d{2})?$"
TIME_EPOCH = r"^(?:@[A-Za-z_0-9]*time[A-Za-z_0-9]*: )?(\d{9,10}(?:\.\d+)?)$"
TS_AXIS = r"^(?:\s+-?\d+(?:\.\d+)?\s+-?\d+(?:\.\d+)?|hh:mm:ss(?:\.ms)?\s+\|_+\||\s+v_+v)$"
BANNER = r"^Attach(?:ing|ed) \d+ probes?|Ctrl-C|^Tracing .*\.\.\.?$|^hindsight \w+: "
NOISE = r"^(?:ERROR|WARNING|WARN|Error|stdin:\d|Lost \d+ events|\S+\.bt:\d+:\d+|libbpf:|perf_event_open|Failed to|cannot )"
PROMPT = r"^(?:#|\$|~\$|\w+@[\w.-]+[:~][^ ]*[$#]) +\S"
ROW_KINDS = ["bt_row", "bcc_row", "ts_row", "ts_axis"]
PROSE_WORD = r"\b[a-z]{2,}\b"


def _facts(u: pl.DataFrame) -> pl.DataFrame:
    """Everything about a line that depends on its text alone (``u``: distinct ``s``).

    ``k1``/``k2``/``k3``: the kinds of the chain before the bcc section key, between it
    and the title, and after the title (``k1``/``k2`` NULL when none applies); ``bcc_key``
    and ``title``: the text conditions of those two context-dependent kinds; ``at``,
    ``empty``, ``bcch``: what the lines before ask of this one as their next line.
    """
    s = pl.col("s")
    words = s.str.count_matches(PROSE_WORD)
    tokens = s.str.count_matches(r"\S+")
    prose = ((words >= 3) & (words * 5 >= tokens * 2)) | (
        (words >= 1) & s.str.contains(r"^\s*[A-Za-z(\"'][^|@]*[a-z)][.:!?,]$")
    )
    k1 = (
        pl.when(s.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(s.str.contains(BT_HDR))
        .then(pl.lit("bt_hdr"))
        .when(s.str.contains(STACK_OPEN))
        .then(pl.lit("stack_open"))
        .when(s.str.contains(BT_ROW))
        .then(pl.lit("bt_row"))
        .when(s.str.contains(TIME_HMS) | s.str.contains(TIME_ISO) | s.str.contains(TIME_EPOCH))
        .then(pl.lit("time"))
        .when(s.str.contains(BT_SCALAR))
        .then(pl.lit("bt_scalar"))
        .when(s.str.contains(BCC_HDR))
        .then(pl.lit("bcc_hdr"))
        .when(s.str.contains(BCC_LOG2) | s.str.contains(BCC_LIN))
        .then(pl.lit("bcc_row"))
        .when(s.str.contains(TS_ROW))
        .then(pl.lit("ts_row"))
        .when(s.str.contains(TS_AXIS))
        .then(pl.lit("ts_axis"))
    )
    k2 = (
        pl.when(s.str.contains(NOISE))
        .then(pl.lit("noise"))
        .when(s.str.contains(BANNER))
        .then(pl.lit("banner"))
        .when(s == "^C")
        .then(pl.lit("ctrl_c"))
        .when(s.str.contains(PROMPT))
        .then(pl.lit("prompt"))
    )
    k3 = (
        pl.when(s.str.contains(r"^\s+\S"))
        .then(pl.lit("indented"))
        .when(prose)
        .then(pl.lit("prose"))
        .otherwise(pl.lit("other"))
    )
    return u.with_columns(
        k1=k1,
        bcc_key=s.str.contains(BCC_KEY),
        k2=k2,
        title=s.str.ends_with(":"),
        k3=k3,
        prose=prose,
        at=s.str.starts_with("@"),
        empty=s == "",
        bcch=s.str.contains(BCC_HDR),
        closing=s.str.starts_with("]:"),
        map0=pl.concat_str(pl.lit("@"), s.str.extract(r"^@([A-Za-z_0-9]*)", 1)),
        key0=s.str.extract(r"^@[A-Za-z_0-9]*\[(.*)\]:(?: .*)?$", 1).fill_null(""),
    )


def _next(a: np.ndarray, k: int, fill: bool) -> np.ndarray:
    """``a`` shifted ``k`` up (the value of the k-th next line), ``fill`` past the end."""
    out = np.full(a.size, fill)
    out[: max(a.size - k, 0)] = a[k:]
    return out


def classify(full: pl.DataFrame, n: int) -> tuple[pl.DataFrame, np.ndarray]:
    """Kinds of the first ``n`` lines of ``full`` (block lines, then look-ahead lines).

    Returns the lines that are not fast rows (``line_no``, ``s``, ``kind``, ``prose``,
    ``closing``, ``map0``, ``key0``) and the fast-row mask of the ``n`` block lines.
    """
    fast = full.get_column("line").str.contains(FAST_ROW).to_numpy()
    rest_idx = np.flatnonzero(~fast)
    rest = full.select(pl.all().gather(rest_idx)).with_columns(
        s=pl.col("line").str.strip_chars_end()
    )
    rest = rest.join(
        _facts(rest.select(pl.col("s").unique())), on="s", how="left", maintain_order="left"
    )
    flags = {}
    for name in ("at", "empty", "bcch"):
        a = np.zeros(full.height, dtype=bool)
        a[rest_idx] = rest.get_column(name).to_numpy()
        flags[name] = a
    rest = rest.with_columns(
        n_at1=pl.Series(_next(flags["at"], 1, False)[rest_idx]),
        n_empty1=pl.Series(_next(flags["empty"], 1, True)[rest_idx]),
        n_at2=pl.Series(_next(flags["at"], 2, False)[rest_idx]),
        n_bcch1=pl.Series(_next(flags["bcch"], 1, False)[rest_idx]),
    )
    c = pl.col
    kind = pl.coalesce(
        c("k1"),
        pl.when(c("bcc_key") & c("n_bcch1")).then(pl.lit("bcc_key")),
        c("k2"),
        pl.when(c("title") & (c("n_at1") | (c("n_empty1") & c("n_at2")))).then(pl.lit("title")),
        c("k3"),
    )
    rest = rest.head(int(np.searchsorted(rest_idx, n))).select(
        "line_no", "s", kind.alias("kind"), "prose", "closing", "map0", "key0"
    )
    return rest, fast[:n]
