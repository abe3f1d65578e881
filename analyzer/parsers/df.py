"""Filesystem and block-device snapshots: ``df`` -> ``filesystems``; ``/proc/self/mounts``
and ``/proc/self/mountstats`` -> ``mounts`` (+ ``mountstats`` for per-mount NFS
statistics); ``lsblk`` -> ``block_devices``.

df: the capture runs ``df -Pk``; hand-made ``df -k``, ``df -h`` (human sizes converted to
kB with binary multiples, rounded: noted), ``df -T`` (adds the type), ``df -m``/``-B1``
(``1M-blocks``/``1B-blocks`` scaled) are read by their header. Old coreutils wraps a long
device name onto its own line: the next line's numbers are joined to it. ``df -i``
(inodes) is not supported (no such header). lsblk: the default columns (NAME MAJ:MIN RM
SIZE RO TYPE MOUNTPOINT[S]) in ASCII (``|-``, `` `- ``) or UTF-8 tree form; ``parent`` is
the device above in the tree. ``ts``/``snapshot``: capture phase time from the name
(``df.start.out``), else NULL (noted).

Tables (types and units in ``TABLES``): filesystems (ts, snapshot, filesystem, fstype,
size_kb, used_kb, avail_kb, use_pct, mount); mounts (ts, snapshot, origin, device, mount,
fstype, options); mountstats (ts, snapshot, mount, key, value); block_devices (ts,
snapshot, name, parent, maj, min, removable, size, size_bytes, read_only, type,
mountpoints).

Sample input (``snap/df.start.out``)::

    Filesystem              1024-blocks     Used Available Capacity Mounted on
    devtmpfs                   12334460        0  12334460       0% /dev
    tmpfs                      24684084        0  24684084       0% /dev/shm
    /dev/vda                  264212084 25795748  80595164      25% /
    tmpfs                      12342040        0  12342040       0% /sys/fs/cgroup
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _snap_mounts as sm
from analyzer.parsers._snap_common import account, lines, snapshot_time

_SNAP = (
    ("ts", base.TS, "", "snapshot time (UTC); NULL when unknown"),
    ("snapshot", pl.String, "", "'start' or 'end' (capture phase); NULL for hand-made files"),
)
TABLES: dict[str, base.Table] = {
    "filesystems": base.table(
        "one row per mounted filesystem in a df snapshot",
        *_SNAP,
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
        *_SNAP,
        ("origin", pl.String, "", "'mounts' or 'mountstats' (the file it came from)"),
        ("device", pl.String, "", "mounted device or pseudo filesystem"),
        ("mount", pl.String, "", "mount point (octal escapes decoded)"),
        ("fstype", pl.String, "", "filesystem type"),
        ("options", pl.String, "", "mount options (mounts only)"),
    ),
    "mountstats": base.table(
        "one row per statistics line of a mount in /proc/self/mountstats (NFS)",
        *_SNAP,
        ("mount", pl.String, "", "mount point the statistics belong to"),
        ("key", pl.String, "", "label before the colon (opts, age, events, bytes, READ...)"),
        ("value", pl.String, "", "the rest of the line as printed"),
    ),
    "block_devices": base.table(
        "one row per block device in an lsblk snapshot",
        *_SNAP,
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
_REASONS = {
    "parsed": ("parsed", ""),
    "blank": ("structure", "blank"),
    "header": ("structure", "header"),
    "section": ("structure", "section header"),
    "continuation": ("parsed", ""),
    "wrapped": ("parsed", ""),
    "other": ("skipped", "unrecognised line"),
}


def _kind(head: str) -> tuple[str | None, float]:
    lns = [ln for ln in head.splitlines()[:50] if ln.strip()]
    if not lns:
        return None, 0.0
    if re.match(DF_HEAD, lns[0]):
        return "df", 0.95
    if re.match(sm.LSBLK_HEAD, lns[0]):
        return "lsblk", 0.95
    if re.match(sm.MOUNTSTATS_DEV, lns[0]) and all(
        re.match(sm.MOUNTSTATS_DEV, ln) or ln[:1].isspace() for ln in lns
    ):
        return "mountstats", 0.9
    share = sum(1 for ln in lns if re.match(sm.MOUNTS, ln)) / len(lns)
    if share >= 0.8 and re.search(r"^\S+ / \S+ ", "\n".join(lns), re.M):
        return "mounts", 0.9
    if share >= 0.8 and any(re.match(r"^(?:proc|sysfs|tmpfs|cgroup2?) ", ln) for ln in lns):
        return "mounts", 0.85
    return None, 0.0


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is df, /proc/mounts, mountstats or lsblk output."""
    return _kind(head)[1]


def _df(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    heads = [ln for ln in df["line"] if re.match(DF_HEAD, ln)]
    m = re.match(DF_HEAD, heads[0]) if heads else None
    typed = bool(m and m.group("type"))
    unit = m.group("unit") if m else "1K-blocks"
    rx = (
        r"^(?P<fs>\S+)?\s+"
        + (r"(?P<fstype>\S+)\s+" if typed else "")
        + r"(?P<size>\S+)\s+(?P<used>\S+)\s+(?P<avail>\S+)\s+(?P<pct>\d+%|-)\s+(?P<mount>/.*)$"
    )
    g = pl.col("line").str.extract_groups(rx)
    fs = g.struct.field("fs")
    lone = pl.col("line").str.contains(r"^\S+\s*$")
    wrapped = fs.is_null() & g.struct.field("mount").is_not_null() & lone.shift(1).fill_null(False)
    filesystem = pl.when(wrapped).then(pl.col("line").shift(1).str.strip_chars()).otherwise(fs)
    if unit == "Size":
        size = [sm.size_bytes_expr(pl.col(c)) // 1024 for c in ("s", "u", "a")]
    else:
        mm = re.match(r"^(\d*)([KMGTB]?)", unit.split("-")[0])
        n = int(mm.group(1) or 1) if mm else 1
        scale = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "B": 1, "": 1}[
            mm.group(2) if mm else "K"
        ] * n
        size = [(pl.col(c).cast(pl.Int64, strict=False) * scale) // 1024 for c in ("s", "u", "a")]
    out = df.with_columns(
        filesystem.alias("filesystem"),
        (g.struct.field("fstype") if typed else pl.lit(None, pl.String)).alias("fstype"),
        g.struct.field("size").alias("s"),
        g.struct.field("used").alias("u"),
        g.struct.field("avail").alias("a"),
        g.struct.field("pct").str.strip_suffix("%").cast(pl.Float64, strict=False).alias("use_pct"),
        g.struct.field("mount").alias("mount"),
        lone.alias("_lone"),
    ).with_columns(size[0].alias("size_kb"), size[1].alias("used_kb"), size[2].alias("avail_kb"))
    nxt_wrapped = pl.col("filesystem").is_not_null() & pl.col("line").str.contains(r"^\s")
    what = out.select(
        pl.when(pl.col("line").str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(pl.col("line").str.contains(DF_HEAD))
        .then(pl.lit("header"))
        .when(pl.col("_lone") & nxt_wrapped.shift(-1).fill_null(False))
        .then(pl.lit("wrapped"))
        .when(pl.col("filesystem").is_not_null() & pl.col("mount").is_not_null())
        .then(pl.lit("parsed"))
        .otherwise(pl.lit("other"))
    ).to_series()
    return out.filter(what == "parsed"), what


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse a df / mounts / mountstats / lsblk snapshot."""
    cov = base.Coverage()
    name = ctx.file_name or path.name
    kind, _ = _kind(_read.read_head(path))
    df = lines(path, cov.notes)
    empty = {t: pl.DataFrame(schema=s.schema) for t, s in TABLES.items()}
    if kind is None:
        if df.height == 0 or df["line"].str.strip_chars().eq("").all():
            account(cov, pl.Series(["blank"] * df.height, dtype=pl.String), _REASONS)
            return base.ParseResult({}, cov)
        raise ParseError(f"{name}: not df, /proc/mounts, mountstats or lsblk output")
    phase, ts = snapshot_time(path, ctx, cov.notes)
    tables: dict[str, pl.DataFrame] = {}
    if kind == "df":
        rows, what = _df(df)
        tables["filesystems"] = rows
        if re.search(r"\bSize\b", df["line"][0] if df.height else ""):
            cov.notes.append("df -h human sizes converted to kB with binary multiples (rounded)")
    elif kind == "mounts":
        rows, what = sm.mounts(df)
        tables["mounts"] = rows
    elif kind == "mountstats":
        rows, stats, what = sm.mountstats(df)
        tables["mounts"], tables["mountstats"] = rows, stats
    else:
        rows, verdicts = sm.lsblk(df)
        what = pl.Series(verdicts, dtype=pl.String)
        tables["block_devices"] = rows
    account(cov, what, _REASONS)
    out = {}
    for t, frame in tables.items():
        frame = frame.with_columns(
            pl.lit(ts, dtype=base.TS).alias("ts"), pl.lit(phase, dtype=pl.String).alias("snapshot")
        )
        out[t] = TABLES[t].conform(frame).collect()
    for t in out:
        empty.pop(t)
    return base.ParseResult(out, cov)
