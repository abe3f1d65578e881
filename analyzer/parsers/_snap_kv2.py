"""Tokenizers of the structured snapshots for `host_config`: numactl -H, NTP state
(chronyc tracking, timedatectl, ntpq -pn), the capture's per-PID file (`pids`), and
nvidia-smi ``topo -m``, ``-L`` and ``--query-* --format=csv``.

Same contract as `_snap_kv`: frame in, frame out with ``what``, ``source``, ``keys``,
``vals``. Header lines (numactl distances, topo, CSV) are read once per file in Python;
the rows themselves go through polars expressions.
"""

from __future__ import annotations

import re

import polars as pl

from analyzer.parsers._snap_common import snake, squash
from analyzer.parsers._snap_kv import _NOISE, L, assign, labelled, one, verdict


# ---------------------------------------------------------------- numactl -H
def numactl(df: pl.DataFrame) -> pl.DataFrame:
    """``numactl -H``: node count, cpus, size and free per node, the distance matrix."""
    cols: list[str] = []
    for ln in df["line"]:
        if re.match(r"^node(?:\s+\d+)+\s*$", ln):
            cols = ln.split()[1:]
            break
    avail = L.str.extract_groups(r"^available: (\d+) nodes? \((.*)\)\s*$")
    node = L.str.extract_groups(r"^node (\d+) (cpus|size|free):\s*(.*?)\s*(MB)?\s*$")
    dist = L.str.extract_groups(r"^\s*(\d+):\s+([\d\s]+)$")
    nd = node.struct.field("1")
    nkey = pl.concat_str(
        pl.lit("numactl.node"),
        nd,
        pl.lit("."),
        node.struct.field("2"),
        pl.when(node.struct.field("4").is_not_null()).then(pl.lit("_mb")).otherwise(pl.lit("")),
    )
    dvals = (
        dist.struct.field("2")
        .str.strip_chars()
        .str.split(" ")
        .list.eval(pl.element().filter(pl.element() != ""))
    )
    n = len(cols)
    dkeys = pl.concat_list(
        [
            pl.concat_str(
                pl.lit("numactl.node"), dist.struct.field("1"), pl.lit(f".distance.node{c}")
            )
            for c in cols
        ]
        or [pl.lit("numactl.distances")]
    )
    is_dist = dist.struct.field("1").is_not_null() & pl.lit(n > 0) & (dvals.list.len() == n)
    keys = (
        pl.when(avail.struct.field("1").is_not_null())
        .then(pl.concat_list(pl.lit("numactl.nodes"), pl.lit("numactl.node_list")))
        .when(nd.is_not_null())
        .then(pl.concat_list(nkey))
        .when(L.str.contains(r"(?i)^No NUMA available"))
        .then(pl.concat_list(pl.lit("numactl.available")))
        .when(is_dist)
        .then(dkeys)
    )
    vals = (
        pl.when(avail.struct.field("1").is_not_null())
        .then(pl.concat_list(avail.struct.field("1"), avail.struct.field("2")))
        .when(nd.is_not_null())
        .then(pl.concat_list(squash(node.struct.field("3"))))
        .when(L.str.contains(r"(?i)^No NUMA available"))
        .then(pl.concat_list(pl.lit("no")))
        .when(is_dist)
        .then(dvals)
    )
    header = L.str.contains(r"^node distances:\s*$|^node(?:\s+\d+)+\s*$")
    return df.with_columns(
        verdict(keys.is_not_null(), (header, "header"), (L.str.contains(_NOISE), "noise")).alias(
            "what"
        ),
        pl.lit("numactl").alias("source"),
        keys.alias("keys"),
        vals.alias("vals"),
    )


# ---------------------------------------------------------------- NTP
def _add(df: pl.DataFrame, cond: pl.Expr, key: str, val: pl.Expr) -> pl.DataFrame:
    """Append a derived (key, value) to the lists of the lines where ``cond`` holds."""
    return df.with_columns(
        pl.when(cond & (pl.col("what") == "parsed"))
        .then(pl.col("keys").list.concat(pl.lit([key])))
        .otherwise(pl.col("keys"))
        .alias("keys"),
        pl.when(cond & (pl.col("what") == "parsed"))
        .then(pl.col("vals").list.concat(pl.concat_list(val)))
        .otherwise(pl.col("vals"))
        .alias("vals"),
    )


_NTPQ = (
    r"^([ *+#ox.-])?(\S+)\s+(\S+)\s+(\d+)\s+(\S)\s+(\S+)\s+(\d+\S*)\s+([0-7]+)"
    r"\s+(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s*$"
)
_NTPQ_F = (
    "tally",
    "refid",
    "stratum",
    "type",
    "when",
    "poll",
    "reach",
    "delay_ms",
    "offset_ms",
    "jitter_ms",
)


def ntp(df: pl.DataFrame, flavour: str) -> pl.DataFrame:
    """chronyc tracking / timedatectl show / timedatectl status / ntpq -pn.

    Besides the printed keys, ``ntp.synchronized`` ('true'|'false') and ``ntp.offset_s``
    (system clock minus true time, seconds; chrony 'fast' is positive) are derived the
    same way the capture script derives the manifest's clock.ntp.
    """
    if flavour == "ntpq":
        g = L.str.extract_groups(_NTPQ)
        remote = g.struct.field("2")
        out = df.with_columns(
            verdict(
                remote.is_not_null(),
                (L.str.contains(r"^\s*remote\s+refid"), "header"),
                (L.str.contains(r"^=+\s*$"), "header"),
                (L.str.contains(_NOISE), "noise"),
            ).alias("what"),
            pl.lit("ntp").alias("source"),
            pl.concat_list(
                [pl.concat_str(pl.lit("ntp.peer."), remote, pl.lit("." + f)) for f in _NTPQ_F]
            ).alias("keys"),
            pl.concat_list(
                [
                    g.struct.field("1").fill_null(" "),
                    *[g.struct.field(str(i)) for i in range(3, 12)],
                ]
            ).alias("vals"),
        )
        sys_peer = g.struct.field("1") == "*"
        out = _add(out, sys_peer, "ntp.synchronized", pl.lit("true"))
        off = (g.struct.field("10").cast(pl.Float64, strict=False) / 1000).cast(pl.String)
        return _add(out, sys_peer, "ntp.offset_s", off)
    if flavour == "timedatectl_show":
        out = assign(df, "ntp")
        sync = L.str.extract(r"^NTPSynchronized=(\w+)", 1)
        return _add(out, sync.is_not_null(), "ntp.synchronized", (sync == "yes").cast(pl.String))
    out = labelled(df, "ntp")
    if flavour == "chronyc":
        st = L.str.extract_groups(r"^System time\s*:\s*([\d.]+) seconds (fast|slow)")
        v = st.struct.field("1").cast(pl.Float64, strict=False)
        off = pl.when(st.struct.field("2") == "slow").then(-v).otherwise(v).cast(pl.String)
        out = _add(out, v.is_not_null(), "ntp.offset_s", off)
        leap = L.str.extract(r"^Leap status\s*:\s*(.*?)\s*$", 1)
        return _add(
            out,
            leap.is_not_null(),
            "ntp.synchronized",
            (~leap.str.contains("Not synchronised")).cast(pl.String),
        )
    sync = L.str.extract(r"(?:System clock|NTP) synchronized:\s*(\w+)", 1)
    out = _add(out, sync.is_not_null(), "ntp.synchronized", (sync == "yes").cast(pl.String))
    ofs = L.str.extract_groups(r"^\s*Offset:\s*([-+]?[\d.]+)(us|ms|ns|s)\s*$")
    f = ofs.struct.field("2").replace_strict(
        {"us": 1e-6, "ms": 1e-3, "ns": 1e-9, "s": 1.0}, default=None
    )
    v = (ofs.struct.field("1").cast(pl.Float64, strict=False) * f).cast(pl.String)
    return _add(out, ofs.struct.field("1").is_not_null(), "ntp.offset_s", v)


# ---------------------------------------------------------------- the capture's pids file
PIDS = r"^(\d+) (cmdline|status|chrt|taskset|cgroup|oom_score_adj|oom_score|io|environ|gone)(?: (.*))?$"


def pids(df: pl.DataFrame) -> pl.DataFrame:
    """``<pid> <what> <line>`` from the capture (``PIDS_SH``): chrt/taskset -> source
    ``sched`` (``sched.<pid>.policy``, ``.priority``, ``.affinity_list``); everything else
    -> source ``process`` (``process.<pid>.status.VmRSS``, ``.cgroup.memory``, ``.io.rchar``,
    ``.environ.CUDA_VISIBLE_DEVICES``, ``.oom_score``, ``.cmdline``, ``.gone``)."""
    g = L.str.extract_groups(PIDS)
    pid, kind, rest = g.struct.field("1"), g.struct.field("2"), g.struct.field("3").fill_null("")
    base = pl.concat_str(pl.lit("process."), pid, pl.lit("."), kind)
    status = rest.str.extract_groups(r"^([^:]+):\s*(.*)$")
    cur = rest.str.extract_groups(r"current ([^:]+): (.*)$")
    sched_label = snake(cur.struct.field("1")).str.replace(r"^scheduling_", "")
    cgl = rest.str.extract_groups(r"^(\d+):([^:]*):(.*)$")
    ctrl = (
        pl.when(cgl.struct.field("2") == "")
        .then(pl.lit("unified"))
        .otherwise(cgl.struct.field("2"))
    )
    env = rest.str.extract_groups(r"^([^=]+)=(.*)$")
    sched = kind.is_in(["chrt", "taskset"])
    key = (
        pl.when(sched & sched_label.is_not_null())
        .then(pl.concat_str(pl.lit("sched."), pid, pl.lit("."), sched_label))
        .when(sched)
        .then(pl.concat_str(pl.lit("sched."), pid, pl.lit("."), kind, pl.lit("_message")))
        .when(kind.is_in(["status", "io"]) & status.struct.field("1").is_not_null())
        .then(pl.concat_str(base, pl.lit("."), status.struct.field("1")))
        .when((kind == "cgroup") & cgl.struct.field("1").is_not_null())
        .then(pl.concat_str(base, pl.lit("."), ctrl))
        .when((kind == "environ") & env.struct.field("1").is_not_null())
        .then(pl.concat_str(base, pl.lit("."), env.struct.field("1")))
        .when(kind.is_in(["cmdline", "oom_score_adj", "oom_score", "gone"]))
        .then(base)
        .when(kind.is_not_null())
        .then(pl.concat_str(base, pl.lit("_line")))
    )
    val = (
        pl.when(sched & sched_label.is_not_null())
        .then(cur.struct.field("2").str.strip_chars())
        .when(kind.is_in(["status", "io"]) & status.struct.field("1").is_not_null())
        .then(squash(status.struct.field("2")))
        .when((kind == "cgroup") & cgl.struct.field("1").is_not_null())
        .then(cgl.struct.field("3"))
        .when((kind == "environ") & env.struct.field("1").is_not_null())
        .then(env.struct.field("2"))
        .when(kind == "gone")
        .then(pl.lit("true"))
        .otherwise(rest.str.strip_chars())
    )
    empty = kind.is_in(["environ", "cmdline"]) & (rest.str.strip_chars() == "")
    return df.with_columns(
        verdict(key.is_not_null(), (empty, "blank")).alias("what"),
        pl.when(sched).then(pl.lit("sched")).otherwise(pl.lit("process")).alias("source"),
        *one(key, val),
    )


# ---------------------------------------------------------------- nvidia-smi
_SEP = "\x1f"
ANSI = r"\x1b\[[0-9;]*m"


def nvidia_topo(df: pl.DataFrame) -> pl.DataFrame:
    """``nvidia-smi topo -m``: ``nvidia_topo.GPU0.GPU1`` = ``NV18``, ``.cpu_affinity``,
    ``.numa_affinity``, ``.gpu_numa_id``; NIC legend ``nvidia_topo.NIC0.device``."""
    df = df.with_columns(L.str.replace_all(ANSI, "").alias("line"))
    header: list[str] = []
    for ln in df["line"]:
        if re.match(r"^\s+GPU0\b", ln):
            header = [h.strip() for h in re.split(r"\t|\s{2,}", ln.strip()) if h.strip()]
            break
    names = [
        re.sub(r"[^a-z0-9]+", "_", h.lower()).strip("_")
        if not re.match(r"^(?:GPU\d+|NIC\d+|mlx\S*)$", h)
        else h
        for h in header
    ]
    cells = (
        L.str.replace_all(r"(?:\t|\s{2,})+", _SEP)
        .str.strip_chars(_SEP + " ")
        .str.split(_SEP)
        .list.eval(pl.element().str.strip_chars())
    )
    row = L.str.extract(r"^(GPU\d+|NIC\d+|mlx\S+)\s", 1)
    ok = row.is_not_null() & (cells.list.len() >= 2) & pl.lit(bool(names))
    nic = L.str.extract_groups(r"^\s+(NIC\d+):\s*(\S+)\s*$")
    in_legend = (
        pl.when(L.str.contains(r"^[A-Za-z ]*Legend:\s*$"))
        .then(pl.lit(True))
        .when(L.str.contains(r"^\S"))
        .then(pl.lit(False))
        .forward_fill()
        .fill_null(False)
    )
    all_keys = pl.concat_list(
        [pl.concat_str(pl.lit("nvidia_topo."), row, pl.lit("." + n)) for n in names] or [pl.lit("")]
    )
    vals_ok = cells.list.slice(1, len(names))
    keys = (
        pl.when(ok)
        .then(all_keys.list.head(vals_ok.list.len()))
        .when(nic.struct.field("1").is_not_null())
        .then(
            pl.concat_list(
                pl.concat_str(pl.lit("nvidia_topo."), nic.struct.field("1"), pl.lit(".device"))
            )
        )
    )
    vals = (
        pl.when(ok)
        .then(vals_ok)
        .when(nic.struct.field("1").is_not_null())
        .then(pl.concat_list(nic.struct.field("2")))
    )
    return df.with_columns(
        verdict(
            keys.is_not_null(),
            (L.str.contains(r"^\s+GPU0\b"), "header"),
            (in_legend & nic.struct.field("1").is_null(), "legend"),
            (L.str.contains(_NOISE), "noise"),
        ).alias("what"),
        pl.lit("nvidia_topo").alias("source"),
        keys.alias("keys"),
        vals.alias("vals"),
    )


def nvidia_list(df: pl.DataFrame) -> pl.DataFrame:
    """``nvidia-smi -L``: ``nvidia.gpu0.name``, ``nvidia.gpu0.uuid``; MIG devices
    ``nvidia.gpu0.mig1.profile`` / ``.uuid``."""
    gpu = L.str.extract_groups(r"^GPU (\d+): (.*?) \(UUID: ([^)]+)\)\s*$")
    mig = L.str.extract_groups(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)\s*$")
    df = df.with_columns(gpu.struct.field("1").forward_fill().alias("_gpu"))
    gk = pl.concat_str(pl.lit("nvidia.gpu"), gpu.struct.field("1"))
    mk = pl.concat_str(pl.lit("nvidia.gpu"), pl.col("_gpu"), pl.lit(".mig"), mig.struct.field("2"))
    keys = (
        pl.when(gpu.struct.field("1").is_not_null())
        .then(
            pl.concat_list(pl.concat_str(gk, pl.lit(".name")), pl.concat_str(gk, pl.lit(".uuid")))
        )
        .when(mig.struct.field("1").is_not_null() & pl.col("_gpu").is_not_null())
        .then(
            pl.concat_list(
                pl.concat_str(mk, pl.lit(".profile")), pl.concat_str(mk, pl.lit(".uuid"))
            )
        )
    )
    vals = (
        pl.when(gpu.struct.field("1").is_not_null())
        .then(pl.concat_list(gpu.struct.field("2"), gpu.struct.field("3")))
        .otherwise(pl.concat_list(mig.struct.field("1"), mig.struct.field("3")))
    )
    return df.with_columns(
        verdict(keys.is_not_null(), (L.str.contains(_NOISE), "noise")).alias("what"),
        pl.lit("nvidia_list").alias("source"),
        keys.alias("keys"),
        vals.alias("vals"),
    ).drop("_gpu")


def nvidia_csv(df: pl.DataFrame) -> pl.DataFrame:
    """``nvidia-smi --query-gpu=... --format=csv`` (source ``nvidia_query``, keys
    ``nvidia.gpu<index>.<field>``) and ``--query-compute-apps=...`` (source
    ``nvidia_apps``, keys ``nvidia_apps.<pid>.<field>``). A unit in the header
    (``used_memory [MiB]``) goes into the key (``used_memory_mib``) and is removed from
    the values; ``[N/A]``-style values are kept as printed."""
    head = next((ln for ln in df["line"] if ln.strip()), "")
    fields = [f.strip() for f in head.split(",")]
    names, units = [], []
    for f in fields:
        m = re.match(r"^(.*?)\s*\[(.+)\]$", f)
        unit = m.group(2) if m else ""
        base = (m.group(1) if m else f).strip()
        names.append(
            base + ("_" + re.sub(r"[^a-z0-9]+", "_", unit.lower()).strip("_") if unit else "")
        )
        units.append(unit)
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
    prefix = (
        pl.concat_str(pl.lit("nvidia_apps."), ident)
        if apps
        else pl.concat_str(pl.lit("nvidia.gpu"), pl.coalesce(ident, row))
    )
    vals = pl.concat_list(
        [
            cells.list.get(i, null_on_oob=True).str.replace(r"\s+" + re.escape(u) + "$", "")
            if u
            else cells.list.get(i, null_on_oob=True)
            for i, u in enumerate(units)
        ]
    )
    return df.with_columns(
        verdict(
            ok, (head == L, "header"), (L.str.contains(r"^No devices were found|^\S+: "), "noise")
        ).alias("what"),
        pl.lit("nvidia_apps" if apps else "nvidia_query").alias("source"),
        pl.concat_list([pl.concat_str(prefix, pl.lit("." + n)) for n in names]).alias("keys"),
        vals.alias("vals"),
    )
