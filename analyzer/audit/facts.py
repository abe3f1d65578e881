"""What the host snapshot says, as plain facts for the configuration audit.

Reads ``host_config`` (ts, snapshot, source, key, value, raw), ``cgroup_limits`` (cgroup, key,
value, unlimited), ``meminfo``, ``gpu_info``, ``processes``, ``cgroup_cpu`` and ``gpu_dmon``;
every table is optional. Values of the ``start`` snapshot win (the state the incident ran
under); a key whose ``end`` value differs is recorded in :attr:`Facts.changed`.

cgroup limits are understood in both vocabularies and normalised to the cgroup parser's one
(v2 ``cpu.max`` / v1 ``cpu.cfs_quota_us`` → ``cpu.quota_us``; ``memory.max`` /
``memory.limit_in_bytes`` → ``memory.max_bytes``; ``cpu.shares`` → ``cpu.weight``…), see
:data:`CGROUP_ALIASES`; ``max``, ``-1`` and v1's "no limit" (≥ 2**62) mean unlimited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from analyzer.catalog import Catalog
from analyzer.sql import ident

UNLIMITED = "max"
# raw v1 / v2 file name -> normalised key (cpu.max is split into quota and period)
CGROUP_ALIASES = {
    "cpu.cfs_quota_us": "cpu.quota_us",
    "cpu.cfs_period_us": "cpu.period_us",
    "memory.max": "memory.max_bytes",
    "memory.limit_in_bytes": "memory.max_bytes",
    "memory.high": "memory.high_bytes",
    "memory.low": "memory.low_bytes",
    "memory.min": "memory.min_bytes",
    "memory.swap.max": "memory.swap_max_bytes",
    "memory.soft_limit_in_bytes": "memory.soft_limit_bytes",
    "memory.memsw.limit_in_bytes": "memory.memsw_max_bytes",
    "cpuset.cpus.effective": "cpuset.cpus_effective",
}
CGROUP_KEYS = (
    "cpu.quota_us", "cpu.period_us", "cpu.weight", "cpu.weight_nice", "cpu.shares", "cpu.max",
    "memory.max_bytes", "memory.high_bytes", "memory.low_bytes", "memory.min_bytes",
    "memory.swap_max_bytes", "memory.soft_limit_bytes", "memory.memsw_max_bytes",
    "pids.max", "cpuset.cpus", "cpuset.mems", "cpuset.cpus_effective", *CGROUP_ALIASES,
)  # fmt: skip


def normalise_cgroup(key: str, value: str) -> list[tuple[str, str]]:
    """One raw cgroup limit → normalised (key, value) pairs.

    >>> normalise_cgroup("cpu.max", "200000 100000")
    [('cpu.quota_us', '200000'), ('cpu.period_us', '100000')]
    >>> normalise_cgroup("cpu.cfs_quota_us", "-1"), normalise_cgroup("memory.limit_in_bytes", "9223372036854771712")
    ([('cpu.quota_us', 'max')], [('memory.max_bytes', 'max')])
    >>> normalise_cgroup("cpu.shares", "1024")
    [('cpu.weight', '39')]
    """
    value = " ".join(str(value).split())
    if key == "cpu.max":
        parts = value.split()
        out = [("cpu.quota_us", UNLIMITED if not parts or parts[0] == "max" else parts[0])]
        if len(parts) > 1:
            out.append(("cpu.period_us", parts[1]))
        return out
    if key == "cpu.shares" and value.isdigit():
        return [("cpu.weight", str(1 + ((int(value) - 2) * 9999) // 262142))]
    key = CGROUP_ALIASES.get(key, key)
    if value in ("max", "-1") or (value.isdigit() and int(value) >= 2**62):
        value = UNLIMITED
    return [(key, value)]


def cpu_count(cpulist: str | None) -> int | None:
    """``'0-3,8,10-11'`` → 7; None for junk.

    >>> cpu_count("0-3,8,10-11"), cpu_count("0 1 2"), cpu_count(""), cpu_count("x")
    (7, 3, 0, None)
    """
    if cpulist is None:
        return None
    n = 0
    for part in re.split(r"[,\s]+", cpulist.strip()):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            return None
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            return None
        n += hi - lo + 1
    return n


@dataclass
class Facts:
    """Key/value facts of the host snapshot plus the few measured values the audit uses."""

    kv: dict[str, str] = field(default_factory=dict)
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)
    cgroups: dict[str, dict[str, str]] = field(default_factory=dict)
    mem_total_kb: int | None = None
    swap_total_kb: int | None = None
    cpus: int | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    gpu_count: int = 0
    gpu_util_mean: float | None = None
    commands: list[str] = field(default_factory=list)  # process names / command lines seen
    throttled: dict[str, float] = field(default_factory=dict)  # cgroup -> peak throttled %

    def get(self, key: str) -> str | None:
        return self.kv.get(key)

    def number(self, key: str) -> float | None:
        v = self.kv.get(key)
        try:
            return float(str(v).split()[0]) if v not in (None, "") else None
        except (ValueError, IndexError):
            return None

    def prefix(self, prefix: str) -> dict[str, str]:
        return {k[len(prefix) :]: v for k, v in self.kv.items() if k.startswith(prefix)}


def load_facts(store: Catalog) -> Facts:
    facts = Facts()
    if store.usable("host_config", "key", "value"):
        snap = "snapshot" if "snapshot" in store.columns("host_config") else "NULL"
        rows = store.con.sql(
            f"SELECT key, value, {snap} AS s FROM host_config WHERE key IS NOT NULL "
            "ORDER BY CASE s WHEN 'start' THEN 0 WHEN 'end' THEN 2 ELSE 1 END"
        ).fetchall()
        for key, value, s in rows:
            key, value = str(key), "" if value is None else str(value)
            if key not in facts.kv:
                facts.kv[key] = value
            elif (
                s == "end" and facts.kv[key] != value and not key.startswith(("clock.", "process."))
            ):
                facts.changed[key] = (facts.kv[key], value)
    _cgroups(store, facts)
    _measured(store, facts)
    return facts


def _cgroups(store: Catalog, facts: Facts) -> None:
    for key, value in facts.kv.items():
        if not key.startswith("cgroup."):
            continue
        rest = key[len("cgroup.") :]
        name = next(
            (n for n in sorted(CGROUP_KEYS, key=len, reverse=True) if rest.endswith("." + n)), None
        )
        if name is None:
            continue
        path = rest[: -len(name) - 1] or "/"
        for k, v in normalise_cgroup(name, value):
            facts.cgroups.setdefault(path, {}).setdefault(k, v)
    if store.usable("cgroup_limits", "cgroup", "key"):
        have = store.columns("cgroup_limits")
        unl = "coalesce(unlimited, false)" if "unlimited" in have else "false"
        val = "CAST(value AS VARCHAR)" if "value" in have else "NULL"
        for cg, key, value, unlimited in store.con.sql(
            f"SELECT cgroup, key, {val}, {unl} FROM cgroup_limits WHERE key IS NOT NULL"
        ).fetchall():
            v = UNLIMITED if unlimited else ("" if value is None else str(value))
            for k, nv in normalise_cgroup(str(key), v):
                facts.cgroups.setdefault(str(cg or "/"), {}).setdefault(k, nv)


def _measured(store: Catalog, facts: Facts) -> None:
    if store.usable("meminfo", "key", "value_kb"):
        facts.mem_total_kb, facts.swap_total_kb = store.con.sql(
            "SELECT max(value_kb) FILTER (WHERE key = 'MemTotal'), "
            "max(value_kb) FILTER (WHERE key = 'SwapTotal') FROM meminfo"
        ).fetchall()[0]
    facts.cpus = _int(facts.get("lscpu.cpus")) or _int(
        store.scalar("SELECT max(cpus) FROM bundle") if store.usable("bundle", "cpus") else None
    )
    if store.usable("gpu_info", "gpu"):
        cols = store.present("gpu_info", ["gpu", "name", "persistence_mode", "pcie_gen", "pcie_gen_max",
                                          "pcie_width", "pcie_width_max", "enforced_power_limit_w",
                                          "max_power_limit_w", "mig_mode", "retired_pages_pending",
                                          "remapped_rows_pending", "ecc_mode"])  # fmt: skip
        rel = store.con.sql(
            f"SELECT {', '.join(ident(c) for c in cols)} FROM gpu_info WHERE gpu IS NOT NULL "
            + (
                "QUALIFY row_number() OVER (PARTITION BY gpu ORDER BY ts DESC) = 1 "
                if "ts" in store.columns("gpu_info")
                else ""
            )
            + "ORDER BY gpu"
        )
        facts.gpus = [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]
    if store.usable("gpu_dmon", "gpu", "sm_pct"):
        n, mean = store.con.sql("SELECT count(DISTINCT gpu), avg(sm_pct) FROM gpu_dmon").fetchall()[
            0
        ]
        facts.gpu_count, facts.gpu_util_mean = int(n or 0), mean
    facts.gpu_count = max(
        facts.gpu_count,
        len(facts.gpus),
        len({k.split(".")[1] for k in facts.kv if k.startswith("nvidia.gpu")}),
    )
    for key, value in facts.kv.items():
        if key.endswith((".cmdline", ".process_name", ".status.Name")):
            facts.commands.append(value)
    if store.usable("processes", "cpu_pct"):
        cmd = (
            "coalesce(args, comm)"
            if {"args", "comm"} <= set(store.columns("processes"))
            else ("comm" if "comm" in store.columns("processes") else None)
        )
        if cmd:
            facts.commands += [str(r[0]) for r in store.con.sql(
                f"SELECT {cmd} FROM processes WHERE {cmd} IS NOT NULL ORDER BY cpu_pct DESC NULLS LAST LIMIT 40"
            ).fetchall()]  # fmt: skip
    if store.usable("cgroup_cpu", "cgroup", "throttled_pct"):
        for cg, peak in store.con.sql(
            "SELECT cgroup, max(throttled_pct) FROM cgroup_cpu WHERE throttled_pct > 0 GROUP BY ALL"
        ).fetchall():
            facts.throttled[str(cg)] = float(peak)


def _int(v: Any) -> int | None:
    try:
        return int(str(v).split()[0]) if v not in (None, "") else None
    except (ValueError, IndexError):
        return None
