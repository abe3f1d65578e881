"""Tokenizers of the simple key/value snapshots for `host_config`.

Every tokenizer takes the frame of lines (``line_no``, ``line``) and returns it with
``what`` (the line's verdict: ``parsed`` or a reason key of ``REASONS``), ``source`` and
two list columns ``keys``/``vals`` of equal length (one line may give several rows, e.g.
``cpu.max`` -> quota and period). Only polars expressions; no loop over lines.
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers._snap_common import snake, squash

L = pl.col("line")

REASONS: dict[str, tuple[str, str]] = {
    "parsed": ("parsed", ""),
    "blank": ("structure", "blank"),
    "header": ("structure", "header"),
    "section": ("structure", "section header"),
    "legend": ("structure", "legend"),
    "comment": ("structure", "comment"),
    "noise": ("skipped", "error or stderr text mixed in"),
    "other": ("skipped", "unrecognised line"),
    "truncated": ("skipped", "truncated last line (no trailing newline)"),
}


def verdict(ok: pl.Expr, *extra: tuple[pl.Expr, str]) -> pl.Expr:
    """``parsed`` where ``ok``, ``blank`` for empty lines, the first matching extra, else other."""
    e = pl.when(L.str.strip_chars() == "").then(pl.lit("blank"))
    for cond, what in extra:
        e = e.when(cond).then(pl.lit(what))
    return e.when(ok).then(pl.lit("parsed")).otherwise(pl.lit("other"))


def one(key: pl.Expr, val: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """One (key, value) per line as single-element list columns."""
    return pl.concat_list(key).alias("keys"), pl.concat_list(val).alias("vals")


_NOISE = r"^(?:sysctl|sh|cat|awk|chrt|taskset|lscpu|numactl|timedatectl|chronyc|ntpq|nvidia-smi|bash|dash):\s"


# ---------------------------------------------------------------- sysctl
SYSCTL = r"^\s*([A-Za-z0-9_][\w.\-/:]*?)\s*=\s?(.*)$"


def sysctl(df: pl.DataFrame) -> pl.DataFrame:
    """``sysctl -a`` / the capture's ``key = value`` dump."""
    g = L.str.extract_groups(SYSCTL)
    key, val = g.struct.field("1"), g.struct.field("2")
    return df.with_columns(
        verdict(key.is_not_null(), (L.str.contains(_NOISE), "noise")).alias("what"),
        pl.lit("sysctl").alias("source"),
        *one(key, squash(val)),
    )


# ---------------------------------------------------------------- "<path> <value>" dumps
DUMP = r"^(/[^\s]+)(?: (.*))?$"
_CG = r"^/sys/fs/cgroup(/.*)?/([^/]+)$"
_V1 = (
    r"^/(?:unified|systemd|name=\w+|(?:cpuacct|cpuset|cpu|memory|blkio|pids|devices|freezer|"
    r"net_cls|net_prio|hugetlb|perf_event|rdma|misc)(?:,(?:cpuacct|cpu|net_cls|net_prio))*)(/|$)"
)
_UNLIMITED = 2**62
_RENAME = {
    "memory.max": "memory.max_bytes",
    "memory.limit_in_bytes": "memory.max_bytes",
    "memory.high": "memory.high_bytes",
    "memory.low": "memory.low_bytes",
    "memory.min": "memory.min_bytes",
    "memory.soft_limit_in_bytes": "memory.soft_limit_bytes",
    "memory.swap.max": "memory.swap_max_bytes",
    "memory.memsw.limit_in_bytes": "memory.memsw_max_bytes",
    "cpu.cfs_period_us": "cpu.period_us",
    "cpu.cfs_quota_us": "cpu.quota_us",
    "cpu.max.burst": "cpu.burst_us",
    "cpu.cfs_burst_us": "cpu.burst_us",
    "memory.oom.group": "memory.oom_group",
}
_BLKIO = {
    "blkio.throttle.read_bps_device": "rbps",
    "blkio.throttle.write_bps_device": "wbps",
    "blkio.throttle.read_iops_device": "riops",
    "blkio.throttle.write_iops_device": "wiops",
}


def _cgroup_keys(path: pl.Expr, val: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(prefix, key-suffix list, value list) of one cgroup limit line, v1 and v2 in one
    vocabulary (see host_config's docstring)."""
    g = path.str.extract_groups(_CG)
    rel = g.struct.field("1").fill_null("").str.replace(_V1, "${1}").str.strip_chars_start("/")
    cg = pl.when(rel == "").then(pl.lit("/")).otherwise(rel)
    f = g.struct.field("2")
    prefix = pl.concat_str(pl.lit("cgroup."), cg, pl.lit("."))
    mem = f.is_in([k for k, v in _RENAME.items() if v.endswith("_bytes")])
    num = val.cast(pl.Int64, strict=False)
    mem_val = (
        pl.when((val == "max") | (val.cast(pl.Float64, strict=False) >= _UNLIMITED))
        .then(pl.lit("max"))
        .otherwise(val)
    )
    parts = val.str.split(" ")
    dev = parts.list.first()
    kv = val.str.extract_all(r"[A-Za-z_]+=\S+")
    is_io = f.is_in(["io.max", *_BLKIO]) & (val != "")
    keys = (
        pl.when(f.is_in(["io.max", "io.weight", *_BLKIO]) & (val == ""))
        .then(pl.concat_list(pl.when(f == "io.weight").then(f).otherwise(pl.lit("io.max"))))
        .when(f == "cpu.max")
        .then(pl.concat_list(pl.lit("cpu.quota_us"), pl.lit("cpu.period_us")))
        .when(f == "io.max")
        .then(kv.list.eval(pl.element().str.replace("=.*", "")))
        .when(f.is_in(list(_BLKIO)))
        .then(pl.concat_list(f.replace(_BLKIO)))
        .when(f == "io.weight")
        .then(pl.concat_list(pl.concat_str(pl.lit("io.weight."), dev)))
        .when(f == "cpu.shares")
        .then(pl.concat_list(pl.lit("cpu.weight")))
        .otherwise(pl.concat_list(f.replace(_RENAME)))
    )
    vals = (
        pl.when(f.is_in(["io.max", "io.weight", *_BLKIO]) & (val == ""))
        .then(pl.concat_list(val))
        .when(f == "cpu.max")
        .then(parts.list.head(2))
        .when(f == "io.max")
        .then(kv.list.eval(pl.element().str.replace("^[^=]*=", "")))
        .when(f.is_in(["io.weight", *_BLKIO]))
        .then(pl.concat_list(parts.list.get(1, null_on_oob=True)))
        .when(f == "cpu.shares")
        .then(pl.concat_list((1 + ((num - 2) * 9999) // 262142).cast(pl.String)))
        .when(f == "cpu.cfs_quota_us")
        .then(pl.concat_list(pl.when(num < 0).then(pl.lit("max")).otherwise(val)))
        .when(mem)
        .then(pl.concat_list(mem_val))
        .otherwise(pl.concat_list(val))
    )
    # io.max / blkio throttle lines: the device sits between "io.max." and the limit name
    prefix = pl.concat_str(
        prefix,
        pl.when(is_io)
        .then(pl.concat_str(pl.lit("io.max."), dev, pl.lit(".")))
        .otherwise(pl.lit("")),
    )
    return prefix, keys, vals


def dump(df: pl.DataFrame) -> pl.DataFrame:
    """The capture's ``<path> <line>`` dumps: thp, cpufreq, irq_affinity, cgroup_limits."""
    g = L.str.extract_groups(DUMP)
    path = g.struct.field("1")
    raw_val = g.struct.field("2").fill_null("")
    val = squash(raw_val)
    thp = path.str.extract(r"^/sys/kernel/mm/transparent_hugepage/(.+)$", 1)
    sel = val.str.extract(r"\[([^\]]+)\]", 1)
    cpu = path.str.extract(r"^/sys/devices/system/cpu/(.+)$", 1)
    cpufreq = cpu.str.extract_groups(r"^(cpu\d+)/cpufreq/(.+)$")
    irq = path.str.extract(r"^/proc/irq/(.+)$", 1)
    sysk = path.str.extract(r"^/proc/sys/(.+)$", 1)
    is_cg = path.str.contains(_CG)
    cg_prefix, cg_keys, cg_vals = _cgroup_keys(path, val)
    source = (
        pl.when(thp.is_not_null())
        .then(pl.lit("thp"))
        .when(
            cpufreq.struct.field("1").is_not_null() | cpu.str.contains(r"^(?:cpufreq|\w+_pstate)/")
        )
        .then(pl.lit("cpufreq"))
        .when(cpu.is_not_null())
        .then(pl.lit("cpu"))
        .when(irq.is_not_null())
        .then(pl.lit("irq_affinity"))
        .when(sysk.is_not_null())
        .then(pl.lit("sysctl"))
        .when(is_cg)
        .then(pl.lit("cgroup_limits"))
        .otherwise(pl.lit("file"))
    )
    dotted = pl.concat_str(
        pl.coalesce(
            pl.concat_str(pl.lit("thp."), thp),
            pl.concat_str(
                pl.lit("cpufreq."),
                cpufreq.struct.field("1"),
                pl.lit("."),
                cpufreq.struct.field("2"),
            ),
            pl.when(cpu.str.contains(r"^(?:cpufreq|\w+_pstate)/")).then(cpu),
            pl.concat_str(pl.lit("cpu."), cpu),
            pl.concat_str(pl.lit("irq."), irq),
            sysk,
        ).str.replace_all("/", "."),
    )
    keys = pl.when(is_cg).then(cg_keys).otherwise(pl.concat_list(pl.coalesce(dotted, path)))
    vals = (
        pl.when(is_cg)
        .then(cg_vals)
        .when(thp.is_not_null() & sel.is_not_null())
        .then(pl.concat_list(sel))
        .otherwise(pl.concat_list(val))
    )
    return df.with_columns(
        verdict(path.is_not_null(), (L.str.contains(_NOISE), "noise")).alias("what"),
        source.alias("source"),
        keys.alias("keys"),
        vals.alias("vals"),
        pl.when(is_cg).then(cg_prefix).otherwise(pl.lit("")).alias("prefix"),
    )


def finish_keys(rows: pl.DataFrame) -> pl.DataFrame:
    """After exploding: put the per-line prefix (cgroup limits) in front of each key."""
    if "prefix" not in rows.columns:
        return rows
    return rows.with_columns(pl.concat_str(pl.col("prefix"), pl.col("keys")).alias("keys")).drop(
        "prefix"
    )


# ---------------------------------------------------------------- /proc/cmdline
def cmdline(df: pl.DataFrame) -> pl.DataFrame:
    """``cat /proc/cmdline``: one row per parameter; what follows `` -- `` goes to init."""
    parts = L.str.splitn(" -- ", 2)
    head = parts.struct.field("field_0")
    tail = parts.struct.field("field_1").str.strip_chars()
    toks = head.str.extract_all(r'(?:[^\s"]|"[^"]*")+')
    keys = toks.list.eval(pl.concat_str(pl.lit("cmdline."), pl.element().str.replace("=.*", "")))
    vals = toks.list.eval(
        pl.when(pl.element().str.contains("="))
        .then(pl.element().str.replace("^[^=]*=", "").str.strip_chars('"'))
        .otherwise(pl.lit(""))
    )
    has_tail = tail.is_not_null() & (tail != "")
    return df.with_columns(
        verdict(toks.list.len() > 0).alias("what"),
        pl.lit("cmdline").alias("source"),
        pl.when(has_tail)
        .then(keys.list.concat(pl.lit(["cmdline.init_args"])))
        .otherwise(keys)
        .alias("keys"),
        pl.when(has_tail)
        .then(vals.list.concat(pl.concat_list(tail)))
        .otherwise(vals)
        .alias("vals"),
    )


# ---------------------------------------------------------------- uname -a
_MACH = r"x86_64|i[3-6]86|aarch64|arm64|armv\w+|ppc64le|ppc64|s390x|riscv64|loongarch64|mips\w*"
UNAME = (
    rf"^(?P<kernel_name>\S+) (?P<nodename>\S+) (?P<kernel_release>\S+) (?P<kernel_version>.*?)"
    rf" (?P<machine>{_MACH})(?: \S+)*? (?P<operating_system>\S+)$"
)
_UNAME_KEYS = (
    "kernel_name",
    "nodename",
    "kernel_release",
    "kernel_version",
    "machine",
    "operating_system",
)


def uname(df: pl.DataFrame) -> pl.DataFrame:
    """``uname -a``."""
    g = L.str.strip_chars().str.extract_groups(UNAME)
    return df.with_columns(
        verdict(g.struct.field("kernel_name").is_not_null()).alias("what"),
        pl.lit("uname").alias("source"),
        pl.concat_list([pl.lit(f"uname.{k}") for k in _UNAME_KEYS]).alias("keys"),
        pl.concat_list([g.struct.field(k) for k in _UNAME_KEYS]).alias("vals"),
    )


# ---------------------------------------------------------------- KEY=value files
ASSIGN = r"^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$"


def assign(df: pl.DataFrame, source: str) -> pl.DataFrame:
    """``KEY=value`` files: os-release, the capture's clock file, ``timedatectl show``.

    Keys are snake_case (``PRETTY_NAME`` -> ``pretty_name``, ``NTPSynchronized`` ->
    ``ntp_synchronized``); os-release quotes are removed.
    """
    g = L.str.extract_groups(ASSIGN)
    k = (
        g.struct.field("1")
        .str.replace_all(r"([A-Z]+)([A-Z][a-z])", "${1}_${2}")
        .str.replace_all(r"([a-z0-9])([A-Z])", "${1}_${2}")
        .str.to_lowercase()
    )
    v = g.struct.field("2").str.strip_chars()
    v = (
        pl.when(v.str.contains(r'^"(?:.*)"$|^\'(?:.*)\'$'))
        .then(v.str.slice(1, v.str.len_chars() - 2).str.replace_all(r'\\(["\\$`])', "${1}"))
        .otherwise(v)
    )
    return df.with_columns(
        verdict(
            k.is_not_null(),
            (L.str.contains(r"^\s*#"), "comment"),
            (L.str.contains(_NOISE), "noise"),
        ).alias("what"),
        pl.lit(source).alias("source"),
        *one(pl.concat_str(pl.lit(source + "."), k), v),
    )


# ---------------------------------------------------------------- "Label: value" files
LABEL = r"^(\s*)([^:]*[^:\s])\s*:(?:\s+(.*)|\s*)$"


def labelled(df: pl.DataFrame, source: str) -> pl.DataFrame:
    """``Label: value`` output (lscpu, chronyc tracking, timedatectl status).

    lscpu's tree layout (util-linux >= 2.38 on a terminal) nests caches, NUMA and
    vulnerabilities under section lines; they get the flat names (``L1d:`` under
    ``Caches`` -> ``l1d_cache``; ``Spectre v1:`` under ``Vulnerabilities`` ->
    ``vulnerability_spectre_v1``), so both layouts give the same keys.
    """
    g = L.str.extract_groups(LABEL)
    indent = g.struct.field("1").str.len_chars()
    label = snake(g.struct.field("2"))
    val = squash(g.struct.field("3").fill_null(""))
    nxt_indent = indent.shift(-1).fill_null(0)
    is_section = (indent == 0) & (val == "") & (nxt_indent > 0)
    df = df.with_columns(
        pl.when(indent == 0)
        .then(pl.when(is_section).then(label).otherwise(pl.lit("")))
        .alias("_sec")
    ).with_columns(pl.col("_sec").forward_fill())
    sec = pl.when(indent > 0).then(pl.col("_sec")).otherwise(pl.lit(""))
    key = (
        pl.when(sec.str.starts_with("caches"))
        .then(pl.concat_str(label, pl.lit("_cache")))
        .when(sec == "vulnerabilities")
        .then(pl.concat_str(pl.lit("vulnerability_"), label))
        .otherwise(label)
    )
    return df.with_columns(
        verdict(
            g.struct.field("2").is_not_null(),
            (is_section, "section"),
            (L.str.contains(_NOISE), "noise"),
        ).alias("what"),
        pl.lit(source).alias("source"),
        *one(pl.concat_str(pl.lit(source + "."), key), val),
    ).drop("_sec")
