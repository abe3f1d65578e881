"""Tokenizers for `df`'s sibling snapshots: ``/proc/self/mounts``, ``/proc/self/mountstats``
and ``lsblk``. Each returns (rows, verdict per line) for the frame of lines it is given."""

from __future__ import annotations

import re

import polars as pl

L = pl.col("line")

MOUNTS = r"^(\S+) (\S+) (\S+) (\S+) (\d+) (\d+)\s*$"
MOUNTSTATS_DEV = r"^device (.+?) mounted on (.+?) with fstype (\S+)(?: statvers=(\S+))?\s*$"
LSBLK_HEAD = r"^NAME\s+MAJ:MIN\s+RM\s+SIZE\s+RO\s+TYPE(?:\s+MOUNTPOINTS?)?\s*$"


def _unescape(expr: pl.Expr) -> pl.Expr:
    """Octal escapes of /proc/mounts (``\\040`` space, ``\\011`` tab, ``\\012``, ``\\134``)."""
    return (
        expr.str.replace_all(r"\040", " ", literal=True)
        .str.replace_all(r"\011", "\t", literal=True)
        .str.replace_all(r"\012", "\n", literal=True)
        .str.replace_all(r"\134", "\\", literal=True)
    )


def mounts(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """``/proc/self/mounts`` (fstab format)."""
    g = L.str.extract_groups(MOUNTS)
    out = df.with_columns(
        _unescape(g.struct.field("1")).alias("device"),
        _unescape(g.struct.field("2")).alias("mount"),
        g.struct.field("3").alias("fstype"),
        g.struct.field("4").alias("options"),
        pl.lit("mounts").alias("origin"),
    )
    what = out.select(
        pl.when(L.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(pl.col("device").is_not_null())
        .then(pl.lit("parsed"))
        .otherwise(pl.lit("other"))
    ).to_series()
    return out.filter(what == "parsed"), what


def mountstats(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """``/proc/self/mountstats``: ``device ... mounted on ... with fstype ...`` lines go to
    ``mounts``; the indented per-mount statistics (NFS: opts, age, events, bytes, xprt,
    per-op counters) go to ``mountstats`` as (mount, key, value) with the label as key."""
    g = L.str.extract_groups(MOUNTSTATS_DEV)
    kv = L.str.extract_groups(r"^\s+([^:]+?):\s*(.*?)\s*$")
    out = df.with_columns(
        g.struct.field("1").alias("device"),
        g.struct.field("2").alias("mount"),
        g.struct.field("3").alias("fstype"),
        pl.lit(None, pl.String).alias("options"),
        pl.lit("mountstats").alias("origin"),
        kv.struct.field("1").alias("key"),
        kv.struct.field("2").alias("value"),
    ).with_columns(pl.col("mount").forward_fill().alias("_cur"))
    what = out.select(
        pl.when(L.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(pl.col("device").is_not_null())
        .then(pl.lit("parsed"))
        .when(pl.col("key").is_not_null() & pl.col("_cur").is_not_null())
        .then(pl.lit("stat"))
        .when(L.str.contains(r"^\s+per-op statistics\s*$"))
        .then(pl.lit("section"))
        .otherwise(pl.lit("other"))
    ).to_series()
    dev_rows = out.filter(what == "parsed")
    stats = out.filter(what == "stat").select(
        "line_no", pl.col("_cur").alias("mount"), "key", "value"
    )
    return dev_rows, stats, what.replace({"stat": "parsed"})


_SUFFIX = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5, "E": 1024**6}


def size_bytes(text: str) -> int | None:
    """lsblk/df human size (``931.5G``, ``0B``, ``512``) -> bytes (binary multiples)."""
    m = re.match(r"^(\d+(?:[.,]\d+)?)([BKMGTPE]?)i?B?$", text)
    if not m:
        return None
    value = float(m.group(1).replace(",", ".")) * _SUFFIX.get(m.group(2) or "B", 1)
    return round(value) if value < 2**63 else None  # absurd (or inf): NULL, not a crash


def _int32(digits: str) -> int | None:
    return int(digits) if len(digits) < 10 else None  # Int32 column: 10+ digits may overflow


def size_bytes_expr(expr: pl.Expr) -> pl.Expr:
    """Vectorized `size_bytes` (df -h columns)."""
    g = expr.str.extract_groups(r"^(\d+(?:[.,]\d+)?)([BKMGTPE]?)i?B?$")
    mult = g.struct.field("2").replace_strict(
        {**_SUFFIX, "": 1}, default=None, return_dtype=pl.Float64
    )
    num = g.struct.field("1").str.replace(",", ".", literal=True).cast(pl.Float64, strict=False)
    return (num * mult).round().cast(pl.Int64, strict=False)  # > 2**63: NULL, not a crash


def lsblk(df: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``lsblk`` default columns; tree prefixes give the parent; continuation lines
    (more mount points of the previous device, util-linux >= 2.37) are appended to it.
    Small per-file Python: lsblk lists a few hundred devices at most."""
    rows: list[dict[str, object]] = []
    what: list[str] = []
    stack: list[tuple[int, str]] = []
    rx = re.compile(
        r"^([\s|`├└│─-]*)(\S+)\s+(\d+):(\d+)\s+([01])\s+(\S+)\s+([01])\s+(\S+)(?:\s+(.*?))?\s*$"
    )
    for ln in df["line"]:
        if not ln.strip():
            what.append("blank")
            continue
        if re.match(LSBLK_HEAD, ln):
            what.append("header")
            continue
        m = rx.match(ln)
        if m is None:
            if rows and re.match(r"^\s{20,}\S", ln):
                rows[-1]["mountpoints"] = f"{rows[-1]['mountpoints'] or ''}\n{ln.strip()}".strip()
                what.append("continuation")
            else:
                what.append("other")
            continue
        depth = len(m.group(1))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else None
        stack.append((depth, m.group(2)))
        rows.append(
            {
                "name": m.group(2),
                "parent": parent,
                "maj": _int32(m.group(3)),
                "min": _int32(m.group(4)),
                "removable": m.group(5) == "1",
                "size": m.group(6),
                "size_bytes": size_bytes(m.group(6)),
                "read_only": m.group(7) == "1",
                "type": m.group(8),
                "mountpoints": m.group(9) or None,
            }
        )
        what.append("parsed")
    schema = {
        "name": pl.String,
        "parent": pl.String,
        "maj": pl.Int32,
        "min": pl.Int32,
        "removable": pl.Boolean,
        "size": pl.String,
        "size_bytes": pl.Int64,
        "read_only": pl.Boolean,
        "type": pl.String,
        "mountpoints": pl.String,
    }
    return pl.DataFrame(rows, schema=schema), what
