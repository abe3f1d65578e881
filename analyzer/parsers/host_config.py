"""Host configuration snapshots -> ``host_config (ts, snapshot, source, key, value, raw)``.

One long table of key/value facts read from the capture's one-shot snapshots
(``snap/<name>.start.out`` / ``.end.out``) or from the same commands' plain output
dropped into a hand-made bundle. The file kind is told by content (the name is a hint).
Sources, their input and example keys:

- sysctl: ``sysctl -a``, the capture's ``key = value`` (``vm.swappiness``)
- thp: ``<path> <value>`` dump of transparent_hugepage (``thp.enabled`` = the [selected] word)
- cpufreq / cpu: dump of /sys/devices/system/cpu (``cpufreq.cpu0.scaling_governor``, ``cpu.isolated``)
- irq_affinity: dump of /proc/irq (``irq.24.smp_affinity_list``)
- cgroup_limits: dump of cgroup limit files, v1 and v2 (``cgroup.<path>.cpu.quota_us``)
- cmdline, uname, os_release: ``/proc/cmdline``, ``uname -a``, ``/etc/os-release``
  (``cmdline.isolcpus``, ``uname.kernel_release``, ``os_release.pretty_name``)
- lscpu (flat or tree layout), numactl ``-H`` (``lscpu.model_name``, ``numactl.node0.size_mb``)
- clock: the capture's clock anchors, ``key=value`` (``clock.boot_epoch_s``)
- ntp: ``chronyc -n tracking``, ``timedatectl show`` / ``status``, ``ntpq -pn``
  (``ntp.synchronized``, ``ntp.offset_s``)
- sched / process: the capture's per-PID file ``pids`` (``sched.<pid>.policy``,
  ``process.<pid>.status.VmRSS``)
- nvidia_topo, nvidia_list: ``nvidia-smi topo -m`` / ``-L`` (``nvidia_topo.GPU0.GPU1``,
  ``nvidia.gpu0.uuid``); nvidia_query / nvidia_apps: ``nvidia-smi --query-gpu`` /
  ``--query-compute-apps ... --format=csv`` (``nvidia.gpu0.ecc.mode.current``)

cgroup limits, v1 and v2 in ONE vocabulary (``<path>``: the directory below
``/sys/fs/cgroup`` without the v1 controller mount, ``/`` for the root): ``cpu.max``
``max 100000`` -> ``cpu.quota_us`` = ``max``, ``cpu.period_us`` = ``100000``; v1
``cfs_quota_us`` ``-1`` -> ``max``; ``cpu.shares`` -> ``cpu.weight`` = 1 + ((shares - 2) *
9999) // 262142; memory limits -> ``memory.<name>_bytes`` (`_RENAME`), ``max`` or >= 2**62
(e.g. 9223372036854771712) -> ``max``; ``io.max`` ``259:0 rbps=max ...`` and v1
``blkio.throttle.*_device`` ``8:0 1048576`` -> ``io.max.<maj:min>.<rbps|wbps|riops|wiops>``.

``ts``: the snapshot time (manifest start/end for ``.start``/``.end`` files; the clock
file's own ``epoch_s``); NULL for hand-made files (noted). ``value`` is the printed value
with runs of whitespace collapsed (normalised where stated above); ``raw`` is the line.

Sample input (``snap/cgroup_limits.start.out``)::

    /sys/fs/cgroup/train.slice/cpu.max max 100000
    /sys/fs/cgroup/memory/train/memory.limit_in_bytes 9223372036854771712
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _snap_common as snap
from analyzer.parsers._snap_common import snake, squash

TABLES: dict[str, base.Table] = {
    "host_config": base.table(
        "one row per configuration fact of a host snapshot",
        *snap.SNAP_COLUMNS,
        ("source", pl.String, "", "what the fact comes from: sysctl, thp, cpufreq, cmdline..."),
        ("key", pl.String, "", "normalised key, e.g. vm.swappiness, thp.enabled"),
        ("value", pl.String, "", "value as printed (whitespace collapsed) or normalised"),
        ("raw", pl.String, "", "the original line"),
        ("line_no", pl.UInt32, "", "1-based line number in the file"),
    )
}

ANSI = r"\x1b\[[0-9;]*m"
L = pl.col("line")

REASONS: dict[str, tuple[str, str]] = snap.REASONS | {
    "section": ("structure", "section header"),
    "legend": ("structure", "legend"),
    "comment": ("structure", "comment"),
    "noise": ("skipped", "error or stderr text mixed in"),
}
_NOISE = r"^(?:sysctl|sh|cat|awk|chrt|taskset|lscpu|numactl|timedatectl|chronyc|ntpq|nvidia-smi|bash|dash):\s"
NOISE = (L.str.contains(_NOISE), "noise")


def _first(*cases: tuple[pl.Expr, pl.Expr], default: pl.Expr | None = None) -> pl.Expr:
    """The value of the first case whose condition holds, else ``default`` (or NULL)."""
    (cond, value), *rest = cases
    e = pl.when(cond).then(value)
    for cond, value in rest:
        e = e.when(cond).then(value)
    return e if default is None else e.otherwise(default)


def _str(*parts: str | pl.Expr) -> pl.Expr:
    """The parts concatenated, plain strings as literals: ``_str("sched.", pid)``."""
    return pl.concat_str([pl.lit(p) if isinstance(p, str) else p for p in parts])


def _list(*items: str | pl.Expr) -> pl.Expr:
    """A list column of the items, plain strings as literals."""
    return pl.concat_list([pl.lit(p) if isinstance(p, str) else p for p in items])


Case = tuple[pl.Expr, str]


def _out(
    df: pl.DataFrame, ok: pl.Expr, source: str | pl.Expr, keys: pl.Expr, vals: pl.Expr, *extra: Case
) -> pl.DataFrame:
    """The tokenizers' result: ``df`` with ``what`` (`snap.classify` of the ``extra`` cases,
    then ``parsed`` where ``ok``), ``source`` and the lists ``keys``/``vals``."""
    what = snap.classify(*extra, (ok, "parsed"))
    src = pl.lit(source) if isinstance(source, str) else source
    return df.with_columns(what=what, source=src, keys=keys, vals=vals)


# ---------------------------------------------------------------- sysctl
SYSCTL = r"^\s*([A-Za-z0-9_][\w.\-/:]*?)\s*=\s?(.*)$"


def sysctl(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``sysctl -a`` / the capture's ``key = value`` dump."""
    g = L.str.extract_groups(SYSCTL)
    key, val = g.struct.field("1"), g.struct.field("2")
    return _out(df, key.is_not_null(), "sysctl", _list(key), _list(squash(val)), NOISE)


# ---------------------------------------------------------------- "<path> <value>" dumps
DUMP = r"^(/[^\s]+)(?: (.*))?$"
_CG = r"^/sys/fs/cgroup(/.*)?/([^/]+)$"
_V1 = (
    r"^/(?:unified|systemd|name=\w+|(?:cpuacct|cpuset|cpu|memory|blkio|pids|devices|freezer|"
    r"net_cls|net_prio|hugetlb|perf_event|rdma|misc)(?:,(?:cpuacct|cpu|net_cls|net_prio))*)(/|$)"
)
_UNLIMITED = 2**62
_RENAME = {
    **{f"memory.{k}": f"memory.{k}_bytes" for k in ("max", "high", "low", "min")},
    "memory.limit_in_bytes": "memory.max_bytes",
    "memory.soft_limit_in_bytes": "memory.soft_limit_bytes",
    "memory.swap.max": "memory.swap_max_bytes",
    "memory.memsw.limit_in_bytes": "memory.memsw_max_bytes",
    "cpu.cfs_period_us": "cpu.period_us",
    "cpu.cfs_quota_us": "cpu.quota_us",
    "cpu.max.burst": "cpu.burst_us",
    "cpu.cfs_burst_us": "cpu.burst_us",
    "memory.oom.group": "memory.oom_group",
}
_BLKIO = {  # blkio.throttle.read_bps_device -> rbps ... write_iops_device -> wiops
    f"blkio.throttle.{rw}_{limit}_device": rw[0] + limit
    for rw in ("read", "write")
    for limit in ("bps", "iops")
}


def _cgroup_keys(path: pl.Expr, val: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(prefix, key-suffix list, value list) of one cgroup limit line, v1 and v2 in one
    vocabulary (see the module docstring)."""
    g = path.str.extract_groups(_CG)
    rel = g.struct.field("1").fill_null("").str.replace(_V1, "${1}").str.strip_chars_start("/")
    f = g.struct.field("2")
    num = val.cast(pl.Int64, strict=False)
    unlimited = (val == "max") | (val.cast(pl.Float64, strict=False) >= _UNLIMITED)
    parts = val.str.split(" ")
    dev = parts.list.first()
    kv = val.str.extract_all(r"[A-Za-z_]+=\S+")
    empty_io = f.is_in(["io.max", "io.weight", *_BLKIO]) & (val == "")
    keys = _first(
        (empty_io, _list(pl.when(f == "io.weight").then(f).otherwise(pl.lit("io.max")))),
        (f == "cpu.max", _list("cpu.quota_us", "cpu.period_us")),
        (f == "io.max", kv.list.eval(pl.element().str.replace("=.*", ""))),
        (f.is_in(list(_BLKIO)), _list(f.replace(_BLKIO))),
        (f == "io.weight", _list(_str("io.weight.", dev))),
        (f == "cpu.shares", _list("cpu.weight")),
        default=_list(f.replace(_RENAME)),
    )
    vals = _first(
        (empty_io, _list(val)),
        (f == "cpu.max", parts.list.head(2)),
        (f == "io.max", kv.list.eval(pl.element().str.replace("^[^=]*=", ""))),
        (f.is_in(["io.weight", *_BLKIO]), _list(parts.list.get(1, null_on_oob=True))),
        (f == "cpu.shares", _list((1 + ((num - 2) * 9999) // 262142).cast(pl.String))),
        (f == "cpu.cfs_quota_us", _list(pl.when(num < 0).then(pl.lit("max")).otherwise(val))),
        (
            f.is_in([k for k, v in _RENAME.items() if v.endswith("_bytes")]),
            _list(pl.when(unlimited).then(pl.lit("max")).otherwise(val)),
        ),
        default=_list(val),
    )
    # io.max / blkio throttle lines: the device sits between "io.max." and the limit name
    io = pl.when(f.is_in(["io.max", *_BLKIO]) & (val != "")).then(_str("io.max.", dev, "."))
    prefix = _str("cgroup.", rel.replace("", "/"), ".", io.otherwise(pl.lit("")))
    return prefix, keys, vals


def dump(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """The capture's ``<path> <line>`` dumps: thp, cpufreq, irq_affinity, cgroup_limits."""
    g = L.str.extract_groups(DUMP)
    path, val = g.struct.field("1"), squash(g.struct.field("2").fill_null(""))
    thp = path.str.extract(r"^/sys/kernel/mm/transparent_hugepage/(.+)$", 1)
    sel = val.str.extract(r"\[([^\]]+)\]", 1)
    cpu = path.str.extract(r"^/sys/devices/system/cpu/(.+)$", 1)
    freq = cpu.str.extract_groups(r"^(cpu\d+)/cpufreq/(.+)$")
    policy = cpu.str.contains(r"^(?:cpufreq|\w+_pstate)/")
    irq = path.str.extract(r"^/proc/irq/(.+)$", 1)
    sysk = path.str.extract(r"^/proc/sys/(.+)$", 1)
    is_cg = path.str.contains(_CG)
    cg_prefix, cg_keys, cg_vals = _cgroup_keys(path, val)
    source = _first(
        (thp.is_not_null(), pl.lit("thp")),
        (freq.struct.field("1").is_not_null() | policy, pl.lit("cpufreq")),
        (cpu.is_not_null(), pl.lit("cpu")),
        (irq.is_not_null(), pl.lit("irq_affinity")),
        (sysk.is_not_null(), pl.lit("sysctl")),
        (is_cg, pl.lit("cgroup_limits")),
        default=pl.lit("file"),
    )
    dotted = pl.coalesce(
        _str("thp.", thp),
        _str("cpufreq.", freq.struct.field("1"), ".", freq.struct.field("2")),
        pl.when(policy).then(cpu),
        _str("cpu.", cpu),
        _str("irq.", irq),
        sysk,
    ).str.replace_all("/", ".")
    keys = pl.when(is_cg).then(cg_keys).otherwise(_list(pl.coalesce(dotted, path)))
    vals = _first(
        (is_cg, cg_vals), (thp.is_not_null() & sel.is_not_null(), _list(sel)), default=_list(val)
    )
    out = _out(df, path.is_not_null(), source, keys, vals, NOISE)
    return out.with_columns(pl.when(is_cg).then(cg_prefix).otherwise(pl.lit("")).alias("prefix"))


# ---------------------------------------------------------------- /proc/cmdline
def cmdline(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``cat /proc/cmdline``: one row per parameter; what follows `` -- `` goes to init."""
    parts = L.str.splitn(" -- ", 2)
    tail = parts.struct.field("field_1").str.strip_chars()
    toks = parts.struct.field("field_0").str.extract_all(r'(?:[^\s"]|"[^"]*")+')
    keys = toks.list.eval(_str("cmdline.", pl.element().str.replace("=.*", "")))
    vals = toks.list.eval(
        pl.when(pl.element().str.contains("="))
        .then(pl.element().str.replace("^[^=]*=", "").str.strip_chars('"'))
        .otherwise(pl.lit(""))
    )
    has_tail = tail.is_not_null() & (tail != "")
    keys = pl.when(has_tail).then(keys.list.concat(pl.lit(["cmdline.init_args"]))).otherwise(keys)
    vals = pl.when(has_tail).then(vals.list.concat(_list(tail))).otherwise(vals)
    return _out(df, toks.list.len() > 0, "cmdline", keys, vals)


# ---------------------------------------------------------------- uname -a
_MACH = r"x86_64|i[3-6]86|aarch64|arm64|armv\w+|ppc64le|ppc64|s390x|riscv64|loongarch64|mips\w*"
UNAME = (
    rf"^(?P<kernel_name>\S+) (?P<nodename>\S+) (?P<kernel_release>\S+) (?P<kernel_version>.*?)"
    rf" (?P<machine>{_MACH})(?: \S+)*? (?P<operating_system>\S+)$"
)
_UNAME_KEYS = tuple(re.compile(UNAME).groupindex)


def uname(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``uname -a``."""
    g = L.str.strip_chars().str.extract_groups(UNAME)
    keys, vals = [f"uname.{k}" for k in _UNAME_KEYS], [g.struct.field(k) for k in _UNAME_KEYS]
    ok = g.struct.field("kernel_name").is_not_null()
    return _out(df, ok, "uname", _list(*keys), _list(*vals))


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
    quoted = v.str.contains(r'^"(?:.*)"$|^\'(?:.*)\'$')
    unquoted = v.str.slice(1, v.str.len_chars() - 2).str.replace_all(r'\\(["\\$`])', "${1}")
    value = _list(pl.when(quoted).then(unquoted).otherwise(v))
    comment = (L.str.contains(r"^\s*#"), "comment")
    return _out(df, k.is_not_null(), source, _list(_str(source + ".", k)), value, comment, NOISE)


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
    is_section = (indent == 0) & (val == "") & (indent.shift(-1).fill_null(0) > 0)
    df = df.with_columns(
        _sec=pl.when(indent == 0).then(pl.when(is_section).then(label).otherwise(pl.lit("")))
    ).with_columns(pl.col("_sec").forward_fill())
    sec = pl.when(indent > 0).then(pl.col("_sec")).otherwise(pl.lit(""))
    key = _first(
        (sec.str.starts_with("caches"), _str(label, "_cache")),
        (sec == "vulnerabilities", _str("vulnerability_", label)),
        default=label,
    )
    keys, section = _list(_str(source + ".", key)), (is_section, "section")
    ok = g.struct.field("2").is_not_null()
    return _out(df, ok, source, keys, _list(val), section, NOISE).drop("_sec")


# ---------------------------------------------------------------- numactl -H
def numactl(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``numactl -H``: node count, cpus, size and free per node, the distance matrix."""
    head = next((ln for ln in df["line"] if re.match(r"^node(?:\s+\d+)+\s*$", ln)), "")
    cols = head.split()[1:]
    avail = L.str.extract_groups(r"^available: (\d+) nodes? \((.*)\)\s*$")
    node = L.str.extract_groups(r"^node (\d+) (cpus|size|free):\s*(.*?)\s*(MB)?\s*$")
    dist = L.str.extract_groups(r"^\s*(\d+):\s+([\d\s]+)$")
    nd, row = node.struct.field("1"), dist.struct.field("1")
    mb = pl.when(node.struct.field("4").is_not_null()).then(pl.lit("_mb")).otherwise(pl.lit(""))
    dvals = dist.struct.field("2").str.strip_chars().str.extract_all("[^ ]+")
    dkeys = _list(
        *[_str("numactl.node", row, f".distance.node{c}") for c in cols] or ["numactl.distances"]
    )
    no_numa = L.str.contains(r"(?i)^No NUMA available")
    is_dist = row.is_not_null() & pl.lit(bool(cols)) & (dvals.list.len() == len(cols))
    has_avail = avail.struct.field("1").is_not_null()
    keys = _first(
        (has_avail, _list("numactl.nodes", "numactl.node_list")),
        (nd.is_not_null(), _list(_str("numactl.node", nd, ".", node.struct.field("2"), mb))),
        (no_numa, _list("numactl.available")),
        (is_dist, dkeys),
    )
    vals = _first(
        (has_avail, _list(avail.struct.field("1"), avail.struct.field("2"))),
        (nd.is_not_null(), _list(squash(node.struct.field("3")))),
        (no_numa, _list("no")),
        (is_dist, dvals),
    )
    header = L.str.contains(r"^node distances:\s*$|^node(?:\s+\d+)+\s*$")
    return _out(df, keys.is_not_null(), "numactl", keys, vals, (header, "header"), NOISE)


# ---------------------------------------------------------------- NTP
def _add(df: pl.DataFrame, cond: pl.Expr, key: str, val: pl.Expr) -> pl.DataFrame:
    """Append a derived (key, value) to the lists of the lines where ``cond`` holds."""
    hit = cond & (pl.col("what") == "parsed")
    return df.with_columns(
        keys=pl.when(hit).then(pl.col("keys").list.concat(pl.lit([key]))).otherwise("keys"),
        vals=pl.when(hit).then(pl.col("vals").list.concat(_list(val))).otherwise("vals"),
    )


_NTPQ = (
    r"^([ *+#ox.-])?(\S+)\s+(\S+)\s+(\d+)\s+(\S)\s+(\S+)\s+(\d+\S*)\s+([0-7]+)"
    r"\s+(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s*$"
)
_NTPQ_F = ("tally", "refid", "stratum", "type", "when", "poll", "reach", "delay_ms")
_NTPQ_F += ("offset_ms", "jitter_ms")


def ntp(df: pl.DataFrame, flavour: str) -> pl.DataFrame:
    """chronyc tracking / timedatectl show / timedatectl status / ntpq -pn.

    Besides the printed keys, ``ntp.synchronized`` ('true'|'false') and ``ntp.offset_s``
    (system clock minus true time, seconds; chrony 'fast' is positive) are derived the
    same way the capture script derives the manifest's clock.ntp.
    """
    if flavour == "ntpq":
        g = L.str.extract_groups(_NTPQ)
        remote = g.struct.field("2")
        header = L.str.contains(r"^\s*remote\s+refid") | L.str.contains(r"^=+\s*$")
        keys = _list(*[_str("ntp.peer.", remote, "." + f) for f in _NTPQ_F])
        vals = _list(
            g.struct.field("1").fill_null(" "), *[g.struct.field(str(i)) for i in range(3, 12)]
        )
        out = _out(df, remote.is_not_null(), "ntp", keys, vals, (header, "header"), NOISE)
        sys_peer = g.struct.field("1") == "*"
        out = _add(out, sys_peer, "ntp.synchronized", pl.lit("true"))
        off = (g.struct.field("10").cast(pl.Float64, strict=False) / 1000).cast(pl.String)
        return _add(out, sys_peer, "ntp.offset_s", off)
    if flavour == "timedatectl_show":
        sync = L.str.extract(r"^NTPSynchronized=(\w+)", 1)
        synced = (sync == "yes").cast(pl.String)
        return _add(assign(df, "ntp"), sync.is_not_null(), "ntp.synchronized", synced)
    out = labelled(df, "ntp")
    if flavour == "chronyc":
        st = L.str.extract_groups(r"^System time\s*:\s*([\d.]+) seconds (fast|slow)")
        v = st.struct.field("1").cast(pl.Float64, strict=False)
        off = pl.when(st.struct.field("2") == "slow").then(-v).otherwise(v).cast(pl.String)
        out = _add(out, v.is_not_null(), "ntp.offset_s", off)
        leap = L.str.extract(r"^Leap status\s*:\s*(.*?)\s*$", 1)
        synced = (~leap.str.contains("Not synchronised")).cast(pl.String)
        return _add(out, leap.is_not_null(), "ntp.synchronized", synced)
    sync = L.str.extract(r"(?:System clock|NTP) synchronized:\s*(\w+)", 1)
    out = _add(out, sync.is_not_null(), "ntp.synchronized", (sync == "yes").cast(pl.String))
    ofs = L.str.extract_groups(r"^\s*Offset:\s*([-+]?[\d.]+)(us|ms|ns|s)\s*$")
    unit = {"us": 1e-6, "ms": 1e-3, "ns": 1e-9, "s": 1.0}
    f = ofs.struct.field("2").replace_strict(unit, default=None)
    v = (ofs.struct.field("1").cast(pl.Float64, strict=False) * f).cast(pl.String)
    return _add(out, ofs.struct.field("1").is_not_null(), "ntp.offset_s", v)


# ---------------------------------------------------------------- the capture's pids file
PIDS = r"^(\d+) (cmdline|status|chrt|taskset|cgroup|oom_score_adj|oom_score|io|environ|gone)(?: (.*))?$"


def pids(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``<pid> <what> <line>`` from the capture (``PIDS_SH``): chrt/taskset -> source
    ``sched`` (``sched.<pid>.policy``, ``.priority``, ``.affinity_list``); everything else
    -> source ``process`` (``process.<pid>.status.VmRSS``, ``.cgroup.memory``, ``.io.rchar``,
    ``.environ.CUDA_VISIBLE_DEVICES``, ``.oom_score``, ``.cmdline``, ``.gone``)."""
    g = L.str.extract_groups(PIDS)
    pid, what, rest = g.struct.field("1"), g.struct.field("2"), g.struct.field("3").fill_null("")
    proc = _str("process.", pid, ".", what)
    cur = rest.str.extract_groups(r"current ([^:]+): (.*)$")
    label = snake(cur.struct.field("1")).str.replace(r"^scheduling_", "")
    is_status = what.is_in(["status", "io"])
    sub = _first(  # the file's own key and value: VmRSS, the cgroup controllers, an env name
        (is_status, rest.str.extract_groups(r"^([^:]+):\s*(.*)$")),
        (what == "cgroup", rest.str.extract_groups(r"^\d+:([^:]*):(.*)$")),
        (what == "environ", rest.str.extract_groups(r"^([^=]+)=(.*)$")),
    )
    has_sub, sub_val = sub.struct.field("1").is_not_null(), sub.struct.field("2")
    sched = what.is_in(["chrt", "taskset"])
    key = _first(
        (sched & label.is_not_null(), _str("sched.", pid, ".", label)),
        (sched, _str("sched.", pid, ".", what, "_message")),
        (has_sub, _str(proc, ".", sub.struct.field("1").replace("", "unified"))),
        (what.is_in(["cmdline", "oom_score_adj", "oom_score", "gone"]), proc),
        (what.is_not_null(), _str(proc, "_line")),
    )
    val = _first(
        (sched & label.is_not_null(), cur.struct.field("2").str.strip_chars()),
        (has_sub, pl.when(is_status).then(squash(sub_val)).otherwise(sub_val)),
        (what == "gone", pl.lit("true")),
        default=rest.str.strip_chars(),
    )
    empty = what.is_in(["environ", "cmdline"]) & (rest.str.strip_chars() == "")
    source = pl.when(sched).then(pl.lit("sched")).otherwise(pl.lit("process"))
    return _out(df, key.is_not_null(), source, _list(key), _list(val), (empty, "blank"))


# ---------------------------------------------------------------- nvidia-smi
_SEP = "\x1f"


def _snake(label: str) -> str:
    """A header label as a key part: ``Used Memory`` -> ``used_memory``, ``MiB`` -> ``mib``."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def nvidia_topo(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``nvidia-smi topo -m``: ``nvidia_topo.GPU0.GPU1`` = ``NV18``, ``.cpu_affinity``,
    ``.numa_affinity``, ``.gpu_numa_id``; NIC legend ``nvidia_topo.NIC0.device``."""
    df = df.with_columns(L.str.replace_all(ANSI, "").alias("line"))
    head = next((ln for ln in df["line"] if re.match(r"^\s+GPU0\b", ln)), "")
    header = [h.strip() for h in re.split(r"\t|\s{2,}", head.strip()) if h.strip()]
    names = [h if re.match(r"^(?:GPU\d+|NIC\d+|mlx\S*)$", h) else _snake(h) for h in header]
    cells = L.str.replace_all(r"(?:\t|\s{2,})+", _SEP).str.strip_chars(_SEP + " ").str.split(_SEP)
    cells = cells.list.eval(pl.element().str.strip_chars())
    row = L.str.extract(r"^(GPU\d+|NIC\d+|mlx\S+)\s", 1)
    ok = row.is_not_null() & (cells.list.len() >= 2) & pl.lit(bool(names))
    nic = L.str.extract_groups(r"^\s+(NIC\d+):\s*(\S+)\s*$")
    is_nic = nic.struct.field("1").is_not_null()
    legend_at = L.str.contains(r"^[A-Za-z ]*Legend:\s*$")  # to the next unindented line
    starts = legend_at | L.str.contains(r"^\S")
    in_legend = pl.when(starts).then(legend_at).forward_fill().fill_null(False)
    all_keys = _list(*[_str("nvidia_topo.", row, "." + n) for n in names] or [""])
    row_vals = cells.list.slice(1, len(names))
    keys = _first(
        (ok, all_keys.list.head(row_vals.list.len())),
        (is_nic, _list(_str("nvidia_topo.", nic.struct.field("1"), ".device"))),
    )
    vals = _first((ok, row_vals), (is_nic, _list(nic.struct.field("2"))))
    header, legend = (L.str.contains(r"^\s+GPU0\b"), "header"), (in_legend & ~is_nic, "legend")
    return _out(df, keys.is_not_null(), "nvidia_topo", keys, vals, header, legend, NOISE)


def nvidia_list(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``nvidia-smi -L``: ``nvidia.gpu0.name``, ``nvidia.gpu0.uuid``; MIG devices
    ``nvidia.gpu0.mig1.profile`` / ``.uuid``."""
    gpu = L.str.extract_groups(r"^GPU (\d+): (.*?) \(UUID: ([^)]+)\)\s*$")
    mig = L.str.extract_groups(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)\s*$")
    df = df.with_columns(gpu.struct.field("1").forward_fill().alias("_gpu"))
    is_gpu = gpu.struct.field("1").is_not_null()
    gk = _str("nvidia.gpu", gpu.struct.field("1"))
    mk = _str("nvidia.gpu", pl.col("_gpu"), ".mig", mig.struct.field("2"))
    is_mig = mig.struct.field("1").is_not_null() & pl.col("_gpu").is_not_null()
    keys = _first(
        (is_gpu, _list(_str(gk, ".name"), _str(gk, ".uuid"))),
        (is_mig, _list(_str(mk, ".profile"), _str(mk, ".uuid"))),
    )
    vals = _first(
        (is_gpu, _list(gpu.struct.field("2"), gpu.struct.field("3"))),
        default=_list(mig.struct.field("1"), mig.struct.field("3")),
    )
    return _out(df, keys.is_not_null(), "nvidia_list", keys, vals, NOISE).drop("_gpu")


def nvidia_csv(df: pl.DataFrame, kind: str) -> pl.DataFrame:
    """``nvidia-smi --query-gpu=... --format=csv`` (source ``nvidia_query``, keys
    ``nvidia.gpu<index>.<field>``) and ``--query-compute-apps=...`` (source
    ``nvidia_apps``, keys ``nvidia_apps.<pid>.<field>``). A unit in the header
    (``used_memory [MiB]``) goes into the key (``used_memory_mib``) and is removed from
    the values; ``[N/A]``-style values are kept as printed."""
    head = next((ln for ln in df["line"] if ln.strip()), "")
    fields = [re.match(r"^(.*?)\s*(?:\[(.+)\])?$", f.strip()).groups("") for f in head.split(",")]
    units = [unit for _, unit in fields]
    names = [stem + ("_" + _snake(unit) if unit else "") for stem, unit in fields]
    apps = "pid" in names
    idx_col = names.index("pid") if apps else (names.index("index") if "index" in names else None)
    cells = L.str.split(",").list.eval(pl.element().str.strip_chars())
    ok = (cells.list.len() == len(names)) & (head != L) & (L.str.strip_chars() != "")
    ident = (
        cells.list.get(idx_col, null_on_oob=True)
        if idx_col is not None
        else pl.lit(None, pl.String)
    )
    row = (ok.cast(pl.Int64).cum_sum() - 1).cast(pl.String)
    prefix = _str("nvidia_apps.", ident) if apps else _str("nvidia.gpu", pl.coalesce(ident, row))
    cell = [cells.list.get(i, null_on_oob=True) for i in range(len(units))]
    vals = _list(
        *[
            c.str.replace(r"\s+" + re.escape(u) + "$", "") if u else c
            for c, u in zip(cell, units, strict=True)
        ]
    )
    noise = L.str.contains(r"^No devices were found|^\S+: ")
    keys = _list(*[_str(prefix, "." + n) for n in names])
    source = "nvidia_apps" if apps else "nvidia_query"
    return _out(df, ok, source, keys, vals, (head == L, "header"), (noise, "noise"))


# ---------------------------------------------------------------- sniffing
_HINTS = {  # capture file stem -> kind
    **{k: k for k in ("sysctl", "cmdline", "uname", "os_release", "lscpu", "numactl", "clock")},
    **{k: k for k in ("pids", "nvidia_topo", "nvidia_list")},
    **dict.fromkeys(("thp", "cpufreq", "irq_affinity", "cgroup_limits"), "dump"),
    **dict.fromkeys(("nvidia_apps", "nvidia_ecc"), "nvidia_csv"),
}
_CMDLINE_WORDS = re.compile(
    r"(?:^|\s)(?:BOOT_IMAGE=|root=|console=|init=|rdinit=|ro|rw|quiet|splash|panic=|isolcpus=|"
    r"nohz_full=|intel_iommu=|iommu=|mitigations=|crashkernel=|hugepages=|psi=|systemd\.\S+=)"
)
_CSV_HEAD = re.compile(
    r"^(?:index|pci\.bus_id|uuid|name|gpu_bus_id|gpu_uuid|pid|process_name|timestamp)"
    r"(?:, [\w.]+(?: \[[^\]]+\])?)+\s*$"
)


def _share(lines_: list[str], pattern: str) -> float:
    rx = re.compile(pattern)
    return sum(1 for ln in lines_ if rx.match(ln)) / len(lines_) if lines_ else 0.0


#: kind, confidence, patterns that must all occur (one line each, multiline mode)
_SIGNS: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("clock", 0.95, (r"^epoch_s=[\d.]+$", r"^uptime_s=")),
    ("numactl", 0.95, (r"^available: \d+ nodes?|^No NUMA available",)),
    ("lscpu", 0.95, (r"^Architecture:\s", r"^\s*CPU\(s\):\s")),
    ("chronyc", 0.95, (r"^Reference ID\s*:", r"^Stratum\s*:")),
    ("ntpq", 0.95, (r"^\s+remote\s+refid\s+st\s+t\s+when",)),
    ("timedatectl_status", 0.9, (r"^\s*Local time:", r"^\s*Universal time:")),
    ("nvidia_topo", 0.95, (r"^\s+GPU0\b", r"Legend:|CPU Affinity")),
    ("nvidia_list", 0.95, (r"^GPU \d+: .*\(UUID: GPU-",)),
)
#: kind, pattern 80% of the lines match, pattern one line must match (multiline)
_SHARES = (
    ("os_release", ASSIGN, r"^(?:NAME|ID|PRETTY_NAME|VERSION_ID)="),
    ("timedatectl_show", ASSIGN, r"^(?:Timezone|NTPSynchronized|LocalRTC|CanNTP|NTP)="),
    ("sysctl", r"^[A-Za-z][\w\-]*\.[\w.\-/:]+ = ", ""),
    ("dump", r"^/(?:sys|proc)/\S+(?: .*)?$", ""),
    ("pids", PIDS, ""),
)


def detect(head: str, name: str) -> tuple[str | None, float]:
    """(kind, confidence) of a host snapshot from its first bytes and file name."""
    lns = [re.sub(ANSI, "", ln.rstrip("\r")) for ln in head.splitlines()[:300] if ln.strip()]
    stem = re.split(r"\.(?:start|end)\b", name.rsplit("__", 1)[-1], maxsplit=1)[0]
    hint = _HINTS.get(stem)
    if not lns:
        return hint, 0.0
    text = "\n".join(lns)
    found = [(k, p) for k, p, rxs in _SIGNS if all(re.search(rx, text, re.M) for rx in rxs)]
    if _CSV_HEAD.match(lns[0]):
        found.append(("nvidia_csv", 0.9))
    for kind, most, one in _SHARES:
        if _share(lns, most) >= 0.8 and re.search(one, text, re.M):
            found.append((kind, 0.9))
    if len(lns) <= 2 and re.match(UNAME, lns[0].strip()) and lns[0].startswith("Linux "):
        found.append(("uname", 0.9))
    if len(lns) <= 2 and "=" not in lns[0][:1] and _CMDLINE_WORDS.search(lns[0]):
        found.append(("cmdline", 0.85 if hint == "cmdline" or "BOOT_IMAGE=" in lns[0] else 0.7))
    elif len(lns) == 1 and hint == "cmdline":
        found.append(("cmdline", 0.6))
    if not found:
        return hint, 0.0
    kind, score = max(found, key=lambda f: f[1])
    if hint in {k for k, _ in found}:  # the file name agrees with one reading: take it
        return hint, min(1.0, score + 0.05)
    return kind, score


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is one of the host snapshots listed in the docstring."""
    return detect(head, name)[1]


_TOKENIZERS: dict[str, Callable[[pl.DataFrame, str], pl.DataFrame]] = {
    "os_release": assign,
    "clock": assign,
    "lscpu": labelled,
    **dict.fromkeys(("chronyc", "ntpq", "timedatectl_show", "timedatectl_status"), ntp),
    **{f.__name__: f for f in (sysctl, dump, cmdline, uname, numactl, pids)},
    **{f.__name__: f for f in (nvidia_topo, nvidia_list, nvidia_csv)},
}
_META = {"uname.nodename": "host", "uname.kernel_release": "kernel", "lscpu.cpus": "cpus"}


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one host snapshot file into ``host_config``."""
    cov = base.Coverage()
    name = ctx.file_name or path.name
    kind, score = detect(_read.read_head(path), name)
    df = snap.lines(path, cov.notes)
    if snap.all_blank(cov, df):
        return base.ParseResult(
            snap.conformed(TABLES, {"host_config": pl.DataFrame()}, None, None), cov
        )
    if kind is None:
        raise ParseError(f"{name}: not a host configuration snapshot")
    if score == 0.0:
        cov.notes.append(f"content not recognised; read as {kind} from the file name")
    phase, ts = snap.snapshot_time(path, ctx, cov.notes)
    out = _TOKENIZERS[kind](df, kind)
    cut = snap.truncated(df, path) & pl.lit(df.height > 1)
    out = out.with_columns(pl.when(cut).then(pl.lit("truncated")).otherwise("what").alias("what"))
    snap.account(cov, out["what"], REASONS)
    rows = out.filter(pl.col("what") == "parsed").explode(["keys", "vals"])
    if "prefix" in rows.columns:  # cgroup limits: the path in front of each key
        rows = rows.with_columns(pl.concat_str("prefix", "keys").alias("keys"))
    rows = rows.filter(pl.col("keys").is_not_null())
    epoch = rows.filter(pl.col("keys") == "clock.epoch_s")["vals"].cast(pl.Float64, strict=False)
    if kind == "clock" and epoch.len() and epoch[0] is not None:
        try:
            ts = datetime.fromtimestamp(float(epoch[0]), UTC)
            cov.notes = [n for n in cov.notes if "ts NULL" not in n]
        except (OverflowError, OSError, ValueError):  # a damaged number: keep the phase time
            cov.notes.append(f"clock.epoch_s {epoch[0]} is not a time: ts from the capture phase")
    table = rows.select("source", "line_no", key="keys", value="vals", raw="line")
    table = snap.conformed(TABLES, {"host_config": table}, phase, ts)["host_config"]
    facts = dict(zip(table["key"], table["value"], strict=True))
    meta = {m: facts[k] for k, m in _META.items() if facts.get(k) is not None}
    return base.ParseResult({"host_config": table}, cov, {"kind": kind, **meta})
