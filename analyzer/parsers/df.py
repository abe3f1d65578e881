"""Filesystem and block-device snapshots: ``df`` -> ``filesystems``; ``/proc/self/mounts``
and ``/proc/self/mountstats`` -> ``mounts`` (+ ``mountstats`` for per-mount NFS
statistics); ``lsblk`` -> ``block_devices`` (columns and units in ``TABLES``).

df: the capture runs ``df -Pk``; hand-made ``df -k``, ``df -h`` (human sizes converted to
kB with binary multiples, rounded: noted), ``df -T`` (adds the type), ``df -m``/``-B1``
(``1M-blocks``/``1B-blocks`` scaled) are read by their header. Old coreutils wraps a long
device name onto its own line: the next line's numbers are joined to it. ``df -i``
(inodes) is not supported (no such header). lsblk: the default columns (NAME MAJ:MIN RM
SIZE RO TYPE MOUNTPOINT[S]) in ASCII (``|-``, `` `- ``) or UTF-8 tree form; ``parent`` is
the device above in the tree. ``ts``/``snapshot``: capture phase time from the name
(``df.start.out``), else NULL (noted).

Sample input (``snap/df.start.out``)::

    Filesystem              1024-blocks     Used Available Capacity Mounted on
    devtmpfs                   12334460        0  12334460       0% /dev
    /dev/vda                  264212084 25795748  80595164      25% /
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _snap_common as snap

TABLES: dict[str, base.Table] = {
    "filesystems": base.table(
        "one row per mounted filesystem in a df snapshot",
        *snap.SNAP_COLUMNS,
        ("filesystem", pl.String, "", "device or pseudo filesystem name"),
        ("fstype", pl.String, "", "filesystem type (df -T only)"),
        ("size_kb", pl.Int64, "kB", "total size"),
        ("used_kb", pl.Int64, "kB", "used space"),
        ("avail_kb", pl.Int64, "kB", "space available to unprivileged users"),
        ("use_pct", pl.Float64, "%", "used / (used + avail), as df prints it"),
        ("mount", pl.String, "", "mount point"),
    ),
    "mounts": base.table(
        "one row per mount in /proc/self/mounts or mountstats",
        *snap.SNAP_COLUMNS,
        ("origin", pl.String, "", "'mounts' or 'mountstats' (the file it came from)"),
        ("device", pl.String, "", "mounted device or pseudo filesystem"),
        ("mount", pl.String, "", "mount point (octal escapes decoded)"),
        ("fstype", pl.String, "", "filesystem type"),
        ("options", pl.String, "", "mount options (mounts only)"),
    ),
    "mountstats": base.table(
        "one row per statistics line of a mount in /proc/self/mountstats (NFS)",
        *snap.SNAP_COLUMNS,
        ("mount", pl.String, "", "mount point the statistics belong to"),
        ("key", pl.String, "", "label before the colon (opts, age, events, bytes, READ...)"),
        ("value", pl.String, "", "the rest of the line as printed"),
    ),
    "block_devices": base.table(
        "one row per block device in an lsblk snapshot",
        *snap.SNAP_COLUMNS,
        ("name", pl.String, "", "device name without the tree prefix"),
        ("parent", pl.String, "", "device above it in the tree (NULL for a top-level disk)"),
        ("maj", pl.Int32, "", "major device number"),
        ("min", pl.Int32, "", "minor device number (maj:min keys biolat and io.stat)"),
        ("removable", pl.Boolean, "", "RM column"),
        ("size", pl.String, "", "size as printed (e.g. 931.5G)"),
        ("size_bytes", pl.Int64, "bytes", "size converted with binary multiples (rounded)"),
        ("read_only", pl.Boolean, "", "RO column"),
        ("type", pl.String, "", "disk, part, lvm, rom, loop..."),
        ("mountpoints", pl.String, "", "mount point(s), newline-separated when several"),
    ),
}

DF_HEAD = (
    r"^Filesystem\s+(?P<type>Type\s+)?(?P<unit>\S+-blocks|Size)\s+Used\s+(?:Available|Avail)"
    r"\s+(?:Capacity|Use%)\s+Mounted on\s*$"
)
MOUNTS = r"^(\S+) (\S+) (\S+) (\S+) (\d+) (\d+)\s*$"
MOUNTSTATS_DEV = r"^device (.+?) mounted on (.+?) with fstype (\S+)(?: statvers=(\S+))?\s*$"
LSBLK_HEAD = r"^NAME\s+MAJ:MIN\s+RM\s+SIZE\s+RO\s+TYPE(?:\s+MOUNTPOINTS?)?\s*$"
_LSBLK_ROW = (
    r"^([\s|`├└│─-]*)(\S+)\s+(\d+):(\d+)\s+([01])\s+(\S+)\s+([01])\s+(\S+)(?:\s+(.*?))?\s*$"
)
_SUFFIX = {"": 1, "B": 1} | {c: 1024 ** (i + 1) for i, c in enumerate("KMGTPE")}  # binary
_REASONS = snap.REASONS | {
    "section": ("structure", "section header"),
    "continuation": ("parsed", ""),
    "wrapped": ("parsed", ""),
}
L = pl.col("line")


def _kind(head: str) -> tuple[str | None, float]:
    lns = [ln for ln in head.splitlines()[:50] if ln.strip()]
    if not lns:
        return None, 0.0
    if re.match(DF_HEAD, lns[0]):
        return "df", 0.95
    if re.match(LSBLK_HEAD, lns[0]):
        return "lsblk", 0.95
    if re.match(MOUNTSTATS_DEV, lns[0]) and all(
        re.match(MOUNTSTATS_DEV, ln) or ln[:1].isspace() for ln in lns
    ):
        return "mountstats", 0.9
    share = sum(1 for ln in lns if re.match(MOUNTS, ln)) / len(lns)
    if share >= 0.8 and re.search(r"^\S+ / \S+ ", "\n".join(lns), re.M):
        return "mounts", 0.9
    if share >= 0.8 and any(re.match(r"^(?:proc|sysfs|tmpfs|cgroup2?) ", ln) for ln in lns):
        return "mounts", 0.85
    return None, 0.0


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is df, /proc/mounts, mountstats or lsblk output."""
    return _kind(head)[1]


def size_bytes(expr: pl.Expr) -> pl.Expr:
    """lsblk/df human size (``931.5G``, ``0B``, ``512``) -> bytes (binary multiples, rounded;
    NULL when absurd)."""
    g = expr.str.extract_groups(r"^(\d+(?:[.,]\d+)?)([BKMGTPE]?)i?B?$")
    mult = g.struct.field("2").replace_strict(_SUFFIX, default=None, return_dtype=pl.Float64)
    num = g.struct.field("1").str.replace(",", ".", literal=True).cast(pl.Float64, strict=False)
    return (num * mult).round().cast(pl.Int64, strict=False)  # > 2**63: NULL, not a crash


def _df(df: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    m = re.match(DF_HEAD, next((ln for ln in df["line"] if re.match(DF_HEAD, ln)), ""))
    typed = bool(m and m.group("type"))
    unit = m.group("unit") if m else "1K-blocks"
    rx = (
        r"^(?P<fs>\S+)?\s+"
        + (r"(?P<fstype>\S+)\s+" if typed else "")
        + r"(?P<size>\S+)\s+(?P<used>\S+)\s+(?P<avail>\S+)\s+(?P<pct>\d+%|-)\s+(?P<mount>/.*)$"
    )
    g = L.str.extract_groups(rx)
    fs, mount = g.struct.field("fs"), g.struct.field("mount")
    lone = L.str.contains(r"^\S+\s*$")
    wrapped = fs.is_null() & mount.is_not_null() & lone.shift(1).fill_null(False)
    filesystem = pl.when(wrapped).then(L.shift(1).str.strip_chars()).otherwise(fs)
    count, suffix = re.match(r"^(\d*)([KMGTB]?)", unit).groups()  # 1K-, 1024-, 1M-, 1B-blocks
    scale = int(count or 1) * _SUFFIX[suffix]
    cols = {f"{c}_kb": g.struct.field(c) for c in ("size", "used", "avail")}
    if unit == "Size":
        sizes = [(size_bytes(v) // 1024).alias(c) for c, v in cols.items()]
    else:
        sizes = [(v.cast(pl.Int64, strict=False) * scale // 1024).alias(c) for c, v in cols.items()]
    out = df.with_columns(
        filesystem.alias("filesystem"),
        (g.struct.field("fstype") if typed else pl.lit(None, pl.String)).alias("fstype"),
        *sizes,
        g.struct.field("pct").str.strip_suffix("%").cast(pl.Float64, strict=False).alias("use_pct"),
        mount.alias("mount"),
    )
    next_wraps = pl.col("filesystem").is_not_null() & L.str.contains(r"^\s")
    what = out.select(
        snap.classify(
            (L.str.contains(DF_HEAD), "header"),
            (lone & next_wraps.shift(-1).fill_null(False), "wrapped"),
            (pl.col("filesystem").is_not_null() & pl.col("mount").is_not_null(), "parsed"),
        )
    ).to_series()
    return {"filesystems": out.filter(what == "parsed")}, what


def _mounts(df: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``/proc/self/mounts`` (fstab format)."""
    g = L.str.extract_groups(MOUNTS)
    out = df.with_columns(
        snap.unescape(g.struct.field("1")).alias("device"),
        snap.unescape(g.struct.field("2")).alias("mount"),
        g.struct.field("3").alias("fstype"),
        g.struct.field("4").alias("options"),
        pl.lit("mounts").alias("origin"),
    )
    what = out.select(snap.classify((pl.col("device").is_not_null(), "parsed"))).to_series()
    return {"mounts": out.filter(what == "parsed")}, what


def _mountstats(df: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
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
        snap.classify(
            (pl.col("device").is_not_null(), "parsed"),
            (pl.col("key").is_not_null() & pl.col("_cur").is_not_null(), "stat"),
            (L.str.contains(r"^\s+per-op statistics\s*$"), "section"),
        )
    ).to_series()
    stats = out.filter(what == "stat").select("line_no", "key", "value", mount="_cur")
    tables = {"mounts": out.filter(what == "parsed"), "mountstats": stats}
    return tables, what.replace({"stat": "parsed"})


def _lsblk(df: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``lsblk`` default columns; the tree prefix gives the parent; continuation lines (more
    mount points of the device above, util-linux >= 2.37) are appended to it."""
    f = [pl.col("g").struct.field(str(i)) for i in range(1, 10)]
    head = L.str.contains(LSBLK_HEAD)
    df = df.with_columns(L.str.extract_groups(_LSBLK_ROW).alias("g"), head.alias("head"))
    row = f[1].is_not_null() & (L.str.strip_chars() != "") & ~pl.col("head")
    df = df.with_columns(row=row.cum_sum())
    what = snap.classify(  # a continuation line before any device is not one
        (pl.col("head"), "header"),
        (f[1].is_not_null(), "parsed"),
        (L.str.contains(r"^\s{20,}\S") & (pl.col("row") > 0), "continuation"),
    )
    df = df.with_columns(what.alias("what"))
    rows = df.filter(pl.col("what") == "parsed").select(
        "line_no",
        "row",
        depth=f[0].str.len_chars(),
        name=f[1],
        maj=pl.when(f[2].str.len_chars() < 10).then(f[2]).cast(pl.Int32),  # 10+ digits: NULL
        min=pl.when(f[3].str.len_chars() < 10).then(f[3]).cast(pl.Int32),
        removable=f[4] == "1",
        size=f[5],
        size_bytes=size_bytes(f[5]),
        read_only=f[6] == "1",
        type=f[7],
        mountpoints=pl.when(f[8] != "").then(f[8]),
    )
    depth = pl.col("depth")  # the parent: the last device above that is less indented
    parent = [
        pl.when(depth == d).then(pl.when(depth < d).then(pl.col("name")).forward_fill())
        for d in rows["depth"].unique()
    ]
    rows = rows.with_columns(pl.coalesce(parent or [pl.lit(None, pl.String)]).alias("parent"))
    more = df.filter(pl.col("what") == "continuation")
    if more.height:
        more = more.group_by("row").agg(pl.col("line").str.strip_chars().str.join("\n"))
        rows = rows.join(more, on="row", how="left", maintain_order="left").with_columns(
            pl.concat_str("mountpoints", "line", separator="\n", ignore_nulls=True)
            .replace("", None)
            .alias("mountpoints"),
        )
    return {"block_devices": rows}, df["what"]


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse a df / mounts / mountstats / lsblk snapshot."""
    cov = base.Coverage()
    kind, _ = _kind(_read.read_head(path))
    df = snap.lines(path, cov.notes)
    if kind is None:
        if snap.all_blank(cov, df):
            return base.ParseResult({}, cov)
        name = ctx.file_name or path.name
        raise ParseError(f"{name}: not df, /proc/mounts, mountstats or lsblk output")
    phase, ts = snap.snapshot_time(path, ctx, cov.notes)
    read = {"df": _df, "mounts": _mounts, "mountstats": _mountstats, "lsblk": _lsblk}[kind]
    tables, what = read(df)
    if kind == "df" and re.search(r"\bSize\b", df["line"][0] if df.height else ""):
        cov.notes.append("df -h human sizes converted to kB with binary multiples (rounded)")
    snap.account(cov, what, _REASONS)
    return base.ParseResult(snap.conformed(TABLES, tables, phase, ts), cov)
