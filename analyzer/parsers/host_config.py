"""Host configuration snapshots -> ``host_config (ts, snapshot, source, key, value, raw)``.

One long table of key/value facts read from the capture's one-shot snapshots
(``snap/<name>.start.out`` / ``.end.out``) or from the same commands' plain output
dropped into a hand-made bundle. The file kind is told by content (the name is a hint):

=================  ==============================================  =====================
source             input                                           keys (examples)
=================  ==============================================  =====================
sysctl             ``sysctl -a``; the capture's ``key = value``    ``vm.swappiness``
thp                ``<path> <value>`` dump of transparent_hugepage ``thp.enabled`` = the
                                                                   [selected] word
cpufreq / cpu      dump of /sys/devices/system/cpu                 ``cpufreq.cpu0.scaling_governor``,
                                                                   ``cpu.isolated``
irq_affinity       dump of /proc/irq                               ``irq.24.smp_affinity_list``
cgroup_limits      dump of cgroup limit files (v1 and v2)          ``cgroup.<path>.cpu.quota_us``
cmdline            ``cat /proc/cmdline``                           ``cmdline.isolcpus``
uname              ``uname -a``                                    ``uname.kernel_release``
os_release         ``cat /etc/os-release``                         ``os_release.pretty_name``
lscpu              ``lscpu`` (flat or tree layout)                 ``lscpu.model_name``, ``lscpu.cpus``
numactl            ``numactl -H``                                  ``numactl.node0.size_mb``
clock              the capture's clock anchors (``key=value``)     ``clock.boot_epoch_s``
ntp                ``chronyc -n tracking``, ``timedatectl show`` /  ``ntp.synchronized``,
                   ``status``, ``ntpq -pn``                        ``ntp.offset_s``
sched / process    the capture's per-PID file (``pids``)           ``sched.<pid>.policy``,
                                                                   ``process.<pid>.status.VmRSS``
nvidia_topo        ``nvidia-smi topo -m``                          ``nvidia_topo.GPU0.GPU1``
nvidia_list        ``nvidia-smi -L``                               ``nvidia.gpu0.uuid``
nvidia_query/apps  ``nvidia-smi --query-gpu|--query-compute-apps   ``nvidia.gpu0.ecc.mode.current``
                   ... --format=csv``
=================  ==============================================  =====================

cgroup limits, v1 and v2 in ONE vocabulary (the cgroup path is the directory below
``/sys/fs/cgroup`` without the v1 controller mount, ``/`` for the root):
``cpu.max`` ``max 100000`` -> ``cpu.quota_us`` = ``max`` and ``cpu.period_us`` = ``100000``;
``cpu.cfs_quota_us`` ``-1`` -> ``cpu.quota_us`` = ``max``; ``cpu.cfs_period_us`` ->
``cpu.period_us``; ``cpu.shares`` -> ``cpu.weight`` = 1 + ((shares - 2) * 9999) // 262142;
``memory.max`` / ``memory.limit_in_bytes`` -> ``memory.max_bytes`` (``max`` or >= 2**62,
e.g. 9223372036854771712, -> ``max``); ``memory.high`` -> ``memory.high_bytes`` (likewise
``low``, ``min``, ``swap.max`` -> ``swap_max_bytes``, v1 ``soft_limit_in_bytes`` ->
``soft_limit_bytes``, ``memsw.limit_in_bytes`` -> ``memsw_max_bytes``); ``io.max``
``259:0 rbps=max wbps=1048576 ...`` and v1 ``blkio.throttle.{read,write}_{bps,iops}_device``
``8:0 1048576`` -> ``io.max.<maj:min>.<rbps|wbps|riops|wiops>``; other files keep their name.

``ts``: the snapshot time (manifest start/end for ``.start``/``.end`` files; the clock
file's own ``epoch_s``); NULL for hand-made files (noted). ``value`` is the printed value
with runs of whitespace collapsed (normalised where stated above); ``raw`` is the line.

Sample input (``snap/thp.start.out`` and ``snap/cgroup_limits.start.out``)::

    /sys/kernel/mm/transparent_hugepage/enabled always [madvise] never
    /sys/kernel/mm/transparent_hugepage/khugepaged/defrag 1
    /sys/fs/cgroup/train.slice/cpu.max max 100000
    /sys/fs/cgroup/train.slice/memory.max 8589934592
    /sys/fs/cgroup/memory/train/memory.limit_in_bytes 9223372036854771712
    /sys/fs/cgroup/cpu,cpuacct/train/cpu.shares 1024
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _snap_kv as kv
from analyzer.parsers import _snap_kv2 as kv2
from analyzer.parsers._snap_common import account, ends_with_newline, lines, snapshot_time

TABLES: dict[str, base.Table] = {
    "host_config": base.table(
        "one row per configuration fact of a host snapshot",
        ("ts", base.TS, "", "snapshot time (UTC); NULL when unknown"),
        ("snapshot", pl.String, "", "'start' or 'end' (capture phase); NULL for hand-made files"),
        ("source", pl.String, "", "what the fact comes from: sysctl, thp, cpufreq, cmdline..."),
        ("key", pl.String, "", "normalised key, e.g. vm.swappiness, thp.enabled"),
        ("value", pl.String, "", "value as printed (whitespace collapsed) or normalised"),
        ("raw", pl.String, "", "the original line"),
        ("line_no", pl.UInt32, "", "1-based line number in the file"),
    )
}

_HINTS = {
    "sysctl": "sysctl",
    "thp": "dump",
    "cpufreq": "dump",
    "irq_affinity": "dump",
    "cgroup_limits": "dump",
    "cmdline": "cmdline",
    "uname": "uname",
    "os_release": "os_release",
    "lscpu": "lscpu",
    "numactl": "numactl",
    "clock": "clock",
    "pids": "pids",
    "nvidia_topo": "nvidia_topo",
    "nvidia_list": "nvidia_list",
    "nvidia_apps": "nvidia_csv",
    "nvidia_ecc": "nvidia_csv",
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


def detect(head: str, name: str) -> tuple[str | None, float]:
    """(kind, confidence) of a host snapshot from its first bytes and file name."""
    lns = [re.sub(kv2.ANSI, "", ln.rstrip("\r")) for ln in head.splitlines()[:300] if ln.strip()]
    stem = re.split(r"\.(?:start|end)\b", name.rsplit("__", 1)[-1], maxsplit=1)[0]
    hint = _HINTS.get(stem)
    if not lns:
        return hint, 0.0
    text = "\n".join(lns)
    found: list[tuple[str, float]] = []
    if re.search(r"^epoch_s=[\d.]+$", text, re.M) and re.search(r"^uptime_s=", text, re.M):
        found.append(("clock", 0.95))
    if re.search(r"^available: \d+ nodes?|^No NUMA available", text, re.M):
        found.append(("numactl", 0.95))
    if re.search(r"^Architecture:\s", text, re.M) and re.search(r"^\s*CPU\(s\):\s", text, re.M):
        found.append(("lscpu", 0.95))
    if re.search(r"^Reference ID\s*:", text, re.M) and re.search(r"^Stratum\s*:", text, re.M):
        found.append(("chronyc", 0.95))
    if re.search(r"^\s+remote\s+refid\s+st\s+t\s+when", text, re.M):
        found.append(("ntpq", 0.95))
    if re.search(r"^\s*Local time:", text, re.M) and re.search(r"^\s*Universal time:", text, re.M):
        found.append(("timedatectl_status", 0.9))
    if re.search(r"^\s+GPU0\b", text, re.M) and re.search(r"Legend:|CPU Affinity", text):
        found.append(("nvidia_topo", 0.95))
    if re.search(r"^GPU \d+: .*\(UUID: GPU-", text, re.M):
        found.append(("nvidia_list", 0.95))
    if _CSV_HEAD.match(lns[0]):
        found.append(("nvidia_csv", 0.9))
    assigns = _share(lns, kv.ASSIGN)
    if assigns >= 0.8 and re.search(r"^(?:NAME|ID|PRETTY_NAME|VERSION_ID)=", text, re.M):
        found.append(("os_release", 0.9))
    if assigns >= 0.8 and re.search(
        r"^(?:Timezone|NTPSynchronized|LocalRTC|CanNTP|NTP)=", text, re.M
    ):
        found.append(("timedatectl_show", 0.9))
    if _share(lns, r"^[A-Za-z][\w\-]*\.[\w.\-/:]+ = ") >= 0.8:
        found.append(("sysctl", 0.9))
    if _share(lns, r"^/(?:sys|proc)/\S+(?: .*)?$") >= 0.8:
        found.append(("dump", 0.9))
    if _share(lns, kv2.PIDS) >= 0.8:
        found.append(("pids", 0.9))
    if len(lns) <= 2 and re.match(kv.UNAME, lns[0].strip()) and lns[0].startswith("Linux "):
        found.append(("uname", 0.9))
    if len(lns) <= 2 and "=" not in lns[0][:1] and _CMDLINE_WORDS.search(lns[0]):
        found.append(("cmdline", 0.85 if hint == "cmdline" or "BOOT_IMAGE=" in lns[0] else 0.7))
    elif len(lns) == 1 and hint == "cmdline":
        found.append(("cmdline", 0.6))
    if not found:
        return hint, 0.0
    kind, score = max(found, key=lambda f: f[1])
    if hint is not None and any(k == hint or _HINTS.get(stem) == k for k, _ in found):
        kind = hint if hint in {k for k, _ in found} else kind
        score = min(1.0, score + 0.05)
    return kind, score


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is one of the host snapshots listed in the docstring."""
    return detect(head, name)[1]


def _tokenize(kind: str, df: pl.DataFrame) -> pl.DataFrame:
    if kind == "sysctl":
        return kv.sysctl(df)
    if kind == "dump":
        return kv.dump(df)
    if kind == "cmdline":
        return kv.cmdline(df)
    if kind == "uname":
        return kv.uname(df)
    if kind in ("os_release", "clock"):
        return kv.assign(df, kind)
    if kind == "lscpu":
        return kv.labelled(df, "lscpu")
    if kind == "numactl":
        return kv2.numactl(df)
    if kind in ("chronyc", "ntpq", "timedatectl_show", "timedatectl_status"):
        return kv2.ntp(df, kind)
    if kind == "pids":
        return kv2.pids(df)
    if kind == "nvidia_topo":
        return kv2.nvidia_topo(df)
    if kind == "nvidia_list":
        return kv2.nvidia_list(df)
    return kv2.nvidia_csv(df)


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one host snapshot file into ``host_config``."""
    cov = base.Coverage()
    name = ctx.file_name or path.name
    kind, score = detect(_read.read_head(path), name)
    df = lines(path, cov.notes)
    if df.height == 0 or df["line"].str.strip_chars().eq("").all():
        account(cov, pl.Series(["blank"] * df.height, dtype=pl.String), kv.REASONS)
        return base.ParseResult(
            {"host_config": pl.DataFrame(schema=TABLES["host_config"].schema)}, cov
        )
    if kind is None:
        raise ParseError(f"{name}: not a host configuration snapshot")
    if score == 0.0:
        cov.notes.append(f"content not recognised; read as {kind} from the file name")
    phase, ts = snapshot_time(path, ctx, cov.notes)
    out = _tokenize(kind, df)
    if not ends_with_newline(path) and df.height > 1:
        out = out.with_columns(
            pl.when(pl.col("line_no") == df.height)
            .then(pl.lit("truncated"))
            .otherwise(pl.col("what"))
            .alias("what")
        )
    account(cov, out["what"], kv.REASONS)
    rows = out.filter(pl.col("what") == "parsed")
    cols = ["line_no", "line", "source", "keys", "vals"] + (
        ["prefix"] if "prefix" in rows.columns else []
    )
    rows = kv.finish_keys(rows.select(cols).explode(["keys", "vals"]))
    rows = rows.filter(pl.col("keys").is_not_null())
    if kind == "clock":
        epoch = rows.filter(pl.col("keys") == "clock.epoch_s")["vals"].cast(
            pl.Float64, strict=False
        )
        if epoch.len() and epoch[0] is not None:
            try:
                ts = datetime.fromtimestamp(float(epoch[0]), UTC)
                cov.notes = [n for n in cov.notes if "ts NULL" not in n]
            except (OverflowError, OSError, ValueError):  # a damaged number: keep the phase time
                cov.notes.append(
                    f"clock.epoch_s {epoch[0]} is not a time: ts from the capture phase"
                )
    table = rows.select(
        pl.lit(ts, dtype=base.TS).alias("ts"),
        pl.lit(phase, dtype=pl.String).alias("snapshot"),
        pl.col("source"),
        pl.col("keys").alias("key"),
        pl.col("vals").alias("value"),
        pl.col("line").alias("raw"),
        pl.col("line_no"),
    )
    table = TABLES["host_config"].conform(table).collect()
    meta: dict[str, object] = {"kind": kind}
    facts = dict(zip(table["key"].to_list(), table["value"].to_list(), strict=True))
    for k, m in (
        ("uname.nodename", "host"),
        ("uname.kernel_release", "kernel"),
        ("lscpu.cpus", "cpus"),
    ):
        if facts.get(k) is not None:
            meta[m] = facts[k]
    return base.ParseResult({"host_config": table}, cov, meta)
