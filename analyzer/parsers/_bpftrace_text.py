"""Text-mode tokenizer for bpftrace / bcc output (private helper of ``bpftrace``).

Every line gets a kind from one vectorized ``when`` chain; histogram rows are tied to the
header that starts their run of rows (a segment), timestamps to the maps that follow
them until the next timestamp or a run of two blank lines (bpftrace's exit dump).
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers._nvbpf_time import hms_seconds, local_to_utc, time_of_day_to_ts
from analyzer.parsers.base import TS, Coverage, ParseContext

BT_HDR = r"^(?:@[A-Za-z_0-9]*(?:\[.*\])?|\]):$"
STACK_OPEN = r"^@[A-Za-z_0-9]*\[$"
BT_ROW = r"^([\[(])([^\])]*)([\])])\s+(\d+)\s+\|[@ ]*\|$"
BT_SCALAR = r"^(?:@([A-Za-z_0-9]*)(?:\[(.*)\])?|\]): (.+)$"
BCC_HDR = r"^\s*(\S.*?)\s+: count\s+distribution$"
BCC_LOG2 = r"^\s*(\d+) -> (\d+)\s+: (\d+)\s+\|[*+ ]*\|$"
BCC_LIN = r"^\s*(\d+)\s+: (\d+)\s+\|[*+ ]*\|$"
BCC_KEY = r"^\s*(?:Bucket )?([A-Za-z_][\w ]*?) = (.+)$"
TIME_HMS = r"^\[?(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)\]?$"
TIME_ISO = r"^(?:@[A-Za-z_0-9]*: )?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)(Z|[+-]\d{2}:?\d{2})?$"
TIME_EPOCH = r"^(?:@[A-Za-z_0-9]*time[A-Za-z_0-9]*: )?(\d{9,10}(?:\.\d+)?)$"
TS_ROW = r"^(\S+) +[|*][ *.]*[|*] (-?\d+(?:\.\d+)?|-)$"
TS_AXIS = r"^(?:\s+-?\d+(?:\.\d+)?\s+-?\d+(?:\.\d+)?|hh:mm:ss(?:\.ms)?\s+\|_+\||\s+v_+v)$"
BANNER = r"^Attach(?:ing|ed) \d+ probes?|Ctrl-C|^Tracing .*\.\.\.?$|^hindsight \w+: "
NOISE = r"^(?:ERROR|WARNING|WARN|Error|stdin:\d|Lost \d+ events|\S+\.bt:\d+:\d+|libbpf:|perf_event_open|Failed to|cannot )"
PROMPT = r"^(?:#|\$|~\$|\w+@[\w.-]+[:~][^ ]*[$#]) +\S"
ROW_KINDS = ["bt_row", "bcc_row", "ts_row", "ts_axis"]
PROSE_WORD = r"\b[a-z]{2,}\b"
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


def _suffixed(expr: pl.Expr) -> pl.Expr:
    """``64K`` -> 65536 (bpftrace suffixes are powers of 1024)."""
    g = expr.str.strip_chars().str.extract_groups(r"^(-?\d+)([KMGTPE]?)$")
    mult = g.struct.field("2").replace_strict(_MULT, default=None, return_dtype=pl.Int64)
    return g.struct.field("1").cast(pl.Int64, strict=False) * mult


def classify(df: pl.DataFrame) -> pl.DataFrame:
    """Add ``kind`` (and helper columns) to a ``line_no, line`` frame."""
    s = pl.col("line").str.strip_chars_end()
    next1 = s.shift(-1).fill_null("")
    next2 = s.shift(-2).fill_null("")
    words = s.str.count_matches(PROSE_WORD)
    tokens = s.str.count_matches(r"\S+")
    prose = ((words >= 3) & (words * 5 >= tokens * 2)) | (
        (words >= 1) & s.str.contains(r"^\s*[A-Za-z(\"'][^|@]*[a-z)][.:!?,]$")
    )
    kind = (
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
        .when(s.str.contains(BCC_KEY) & next1.str.contains(BCC_HDR))
        .then(pl.lit("bcc_key"))
        .when(s.str.contains(NOISE))
        .then(pl.lit("noise"))
        .when(s.str.contains(BANNER))
        .then(pl.lit("banner"))
        .when(s == "^C")
        .then(pl.lit("ctrl_c"))
        .when(s.str.contains(PROMPT))
        .then(pl.lit("prompt"))
        .when(
            s.str.ends_with(":")
            & (next1.str.starts_with("@") | ((next1 == "") & next2.str.starts_with("@")))
        )
        .then(pl.lit("title"))
        .when(s.str.contains(r"^\s+\S"))
        .then(pl.lit("indented"))
        .when(prose)
        .then(pl.lit("prose"))
        .otherwise(pl.lit("other"))
    )
    return df.with_columns(s=s, kind=kind, prose=prose)


def time_values(frame: pl.DataFrame, col: str, ctx: ParseContext, tz: str) -> pl.Series:
    """Timestamp strings (file order) -> UTC datetimes: HH:MM:SS, ISO 8601, epoch seconds."""
    s = pl.col(col).str.strip_chars()
    hms = hms_seconds(s.str.extract(TIME_HMS, 1))
    by_day = time_of_day_to_ts(hms, ctx, tz)
    iso = s.str.extract_groups(TIME_ISO)
    naive = (
        iso.struct.field("1")
        .str.replace(" ", "T")
        .str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S%.f", strict=False)
    )
    off = (
        iso.struct.field("2")
        .str.replace("Z", "+00:00")
        .str.replace(r"^([+-]\d{2})(\d{2})$", "$1:$2")
    )
    off_min = off.str.slice(0, 1).replace_strict(
        {"+": 1, "-": -1}, default=None, return_dtype=pl.Int64
    ) * (
        off.str.slice(1, 2).cast(pl.Int64, strict=False) * 60
        + off.str.slice(4, 2).cast(pl.Int64, strict=False)
    )
    with_off = (naive - pl.duration(minutes=off_min)).dt.replace_time_zone("UTC").cast(TS)
    epoch = s.str.extract(TIME_EPOCH, 1).cast(pl.Float64, strict=False)
    from_epoch = (
        pl.from_epoch((epoch * 1_000_000).round(0).cast(pl.Int64), time_unit="us")
        .dt.replace_time_zone("UTC")
        .cast(TS)
    )
    out = frame.select(
        pl.coalesce(
            by_day if by_day is not None else pl.lit(None, TS),
            pl.when(off.is_not_null()).then(with_off).otherwise(local_to_utc(naive, tz)),
            from_epoch,
        ).alias("ts")
    )
    return out.get_column("ts")


def _stacks(df: pl.DataFrame) -> pl.DataFrame:
    """Multi-line stack keys: ``@name[`` + indented frames + ``]:`` / ``]: value``.

    Adds ``frame_ok`` (a frame inside an open stack key) and, on the closing line,
    ``stack_map`` / ``stack_key`` (frames stripped and joined with ';').
    """
    kind = pl.col("kind")
    closing = pl.col("s").str.starts_with("]:")
    df = df.with_columns(seg3=(kind != "indented").cast(pl.Int32).cum_sum())
    df = df.with_columns(
        st_start=kind.first().over("seg3"), st_line=pl.col("s").first().over("seg3")
    )
    df = df.with_columns(frame_ok=(kind == "indented") & (pl.col("st_start") == "stack_open"))
    keys = (
        df.filter(pl.col("frame_ok"))
        .group_by("seg3")
        .agg(pl.col("s").str.strip_chars().str.join(";").alias("stack_key"))
    )
    df = df.join(keys, on="seg3", how="left", maintain_order="left")
    prev_open = (pl.col("st_start").shift(1) == "stack_open") & closing
    return df.with_columns(
        stack_map=pl.when(prev_open).then(
            pl.col("st_line").shift(1).str.extract(r"^(@[A-Za-z_0-9]*)\[", 1)
        ),
        stack_key=pl.when(prev_open).then(pl.col("stack_key").shift(1).fill_null("")),
    )


def tokenize(
    df: pl.DataFrame, ctx: ParseContext, tz: str, cov: Coverage
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """-> (hist rows, scalar rows) as frames with typed columns; fills ``cov``."""
    df = _stacks(classify(df))
    kind, s = pl.col("kind"), pl.col("s")
    closing = s.str.starts_with("]:")
    # map/key of every bpftrace map line (plain, or closing a stack key)
    df = df.with_columns(
        here_map=pl.when(closing)
        .then(pl.col("stack_map"))
        .otherwise(pl.concat_str(pl.lit("@"), s.str.extract(r"^@([A-Za-z_0-9]*)", 1))),
        here_key=pl.when(closing)
        .then(pl.col("stack_key"))
        .otherwise(s.str.extract(r"^@[A-Za-z_0-9]*\[(.*)\]:(?: .*)?$", 1).fill_null("")),
    )
    df = df.with_columns(
        kind=pl.when(kind.is_in(["bt_hdr", "bt_scalar"]) & pl.col("here_map").is_null())
        .then(pl.lit("other"))
        .otherwise(kind)
    )
    # segments: each line that is not a row starts one; rows inherit the starter's header
    df = df.with_columns(seg=(~kind.is_in(ROW_KINDS)).cast(pl.Int32).cum_sum())
    new_seg = pl.col("seg") != pl.col("seg").shift(1)
    df = df.with_columns(
        starter=kind.first().over("seg"),
        starter_line=s.first().over("seg"),
        bt_map=pl.col("here_map").first().over("seg"),
        bt_key=pl.col("here_key").first().over("seg"),
        hdr_prev=pl.when(new_seg).then(s.shift(1).fill_null("")),
        hdr_prev_kind=pl.when(new_seg).then(kind.shift(1).fill_null("")),
    ).with_columns(pl.col("hdr_prev", "hdr_prev_kind").forward_fill().over("seg"))
    valid = (
        ((kind == "bt_row") & (pl.col("starter") == "bt_hdr"))
        | ((kind == "bcc_row") & (pl.col("starter") == "bcc_hdr"))
        | (kind.is_in(["ts_row", "ts_axis"]) & (pl.col("starter") == "bt_hdr"))
    )
    # timestamps: apply until the next one or two consecutive blank lines
    blank2 = (kind == "blank") & (kind.shift(1) == "blank")
    df = df.with_columns(
        mark=pl.when(kind == "time").then(pl.col("line_no")).when(blank2).then(0).forward_fill()
    )
    times = df.filter(kind == "time").select("line_no", "s")
    times = times.with_columns(ts=time_values(times, "s", ctx, tz)).select(
        pl.col("line_no").alias("mark"), "ts"
    )
    n_null = times.get_column("ts").null_count()
    if n_null:
        cov.notes.append(
            f"{n_null} timestamp line(s) could not be placed (time of day without a capture start date, or invalid): ts NULL"
        )
    df = df.join(times, on="mark", how="left", maintain_order="left")
    hist = _hist_rows(df.filter(valid & kind.is_in(["bt_row", "bcc_row"])))
    tsr = s.str.extract_groups(TS_ROW)
    has_val = tsr.struct.field("2") != "-"
    scalars = _scalar_rows(
        df.filter(kind == "bt_scalar"), df.filter(valid & (kind == "ts_row") & has_val), ctx, tz
    )
    reason = (
        pl.when(valid & kind.is_in(["bt_row", "bcc_row"]))
        .then(pl.lit("P"))
        .when(kind == "bt_scalar")
        .then(pl.lit("P"))
        .when(valid & (kind == "ts_row") & has_val)
        .then(pl.lit("P"))
        .when(valid & (kind == "ts_row"))
        .then(pl.lit("S:tseries interval without data"))
        .when(valid & (kind == "ts_axis"))
        .then(pl.lit("S:tseries axis"))
        .when(kind.is_in(ROW_KINDS))
        .then(pl.lit("K:histogram row without header"))
        .when(kind.is_in(["bt_hdr", "bcc_hdr"]))
        .then(pl.lit("S:histogram/map header"))
        .when(kind == "stack_open")
        .then(pl.lit("S:stack key (map name)"))
        .when(pl.col("frame_ok"))
        .then(pl.lit("S:stack key (frame)"))
        .when(kind == "bcc_key")
        .then(pl.lit("S:bcc section key"))
        .when(kind == "time")
        .then(pl.lit("S:timestamp"))
        .when(kind == "blank")
        .then(pl.lit("S:blank"))
        .when(kind == "banner")
        .then(pl.lit("S:banner"))
        .when(kind == "ctrl_c")
        .then(pl.lit("S:interrupt echo (^C)"))
        .when(kind == "title")
        .then(pl.lit("S:section title"))
        .when(kind == "noise")
        .then(pl.lit("K:stderr noise"))
        .when(kind == "prompt")
        .then(pl.lit("K:shell prompt (transcript)"))
        .when((kind == "prose") | pl.col("prose"))
        .then(pl.lit("K:not tool output (prose)"))
        .otherwise(pl.lit("K:unrecognized line (unsupported output or garbage)"))
    )
    for r, n in df.select(reason.alias("r")).group_by("r").len().iter_rows():
        if r == "P":
            cov.parsed += n
        elif r.startswith("S:"):
            cov.add_structure(r[2:], n)
        else:
            cov.add_skipped(r[2:], n)
    return hist, scalars


def _hist_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """Valid bucket rows (bpftrace and bcc) -> bpf_hist columns."""
    s, is_bt = pl.col("s"), pl.col("kind") == "bt_row"
    bt = s.str.extract_groups(BT_ROW)
    parts = bt.struct.field("2").str.split_exact(",", 1)
    lo_s, hi_s = parts.struct.field("field_0"), parts.struct.field("field_1")
    bt_lo = pl.when(lo_s.str.strip_chars() == "...").then(None).otherwise(_suffixed(lo_s))
    bt_hi = (
        pl.when(hi_s.is_null())
        .then(_suffixed(lo_s) + 1)
        .when(hi_s.str.strip_chars() == "...")
        .then(None)
        .otherwise(_suffixed(hi_s))
    )
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


def _scalar_rows(
    scal: pl.DataFrame, ts_rows: pl.DataFrame, ctx: ParseContext, tz: str
) -> pl.DataFrame:
    """Map value lines (value / stats() / text) and tseries rows -> bpf_scalar columns."""
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
    row_ts = (
        time_values(ts_rows.with_columns(t=tsr.struct.field("1")), "t", ctx, tz)
        if ts_rows.height
        else pl.Series("ts", [], TS)
    )
    parts.append(
        ts_rows.with_columns(ts=row_ts).select(
            "ts",
            pl.col("bt_map").alias("map"),
            pl.col("bt_key").alias("key"),
            pl.lit("value").alias("stat"),
            tsr.struct.field("2").cast(pl.Float64, strict=False).alias("value"),
            pl.lit(None, pl.String).alias("text"),
        )
    )
    return pl.concat(parts, how="vertical_relaxed")
