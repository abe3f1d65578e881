"""Before/after comparison of findings and host configuration (for `hindsight diff`).

`compare_findings(before, after)`: per finding key, counts, total duration and GPU-seconds
lost on each side, with a status: ``gone`` (only before, and its detector was evaluated
after), ``new``, ``fewer``, ``more``, ``same``, or ``not evaluated before/after`` when the
detector could not run on the side without the finding (so absence proves nothing).

`compare_config(before, after)`: the ``host_config`` facts that describe tuning —
sysctls, THP, CPU frequency/isolation, kernel command line, cgroup limits (``cpu.max``,
``memory.max``...), IRQ affinity, scheduling policy and CPU affinity of the target
processes, kernel release, GPU driver facts — compared key by key (the ``start``
snapshot, else ``end``). Process keys are renamed from PID to process name
(``sched.python.policy``), since PIDs differ between captures. Counters and volatile
values (``fs.file-nr``, ``kernel.random.*``, current CPU frequencies, ECC counts, clock
anchors) are left out. Each change is ``changed`` / ``added`` / ``removed``, with
``raised`` / ``lowered`` for numbers (``max`` = unlimited counts as highest).
"""

from __future__ import annotations

import re
from typing import Any

import duckdb

SOURCES = (
    "sysctl", "thp", "cpufreq", "cpu", "cmdline", "cgroup_limits", "irq_affinity",
    "sched", "uname", "nvidia_query", "nvidia_list",
)  # fmt: skip
VOLATILE = re.compile(
    r"^(fs\.(file-nr|dentry-state|inode-nr|inode-state|aio-nr)|kernel\.random\..*|kernel\.ns_last_pid|"
    r".*\.scaling_cur_freq|.*\.ecc\.errors\..*|.*\.retired_pages.*|.*\.remapped_rows\.(correctable|uncorrectable)|"
    r"uname\.kernel_version)$"
)
GROUPS = {
    "sysctl": "sysctl", "thp": "transparent hugepages", "cpufreq": "CPU frequency",
    "cpu": "CPU isolation", "cmdline": "kernel command line", "cgroup_limits": "cgroup limits",
    "irq_affinity": "IRQ affinity", "sched": "scheduling / affinity", "uname": "kernel",
    "nvidia_query": "GPU", "nvidia_list": "GPU",
}  # fmt: skip
UNLIMITED = {"max", "unlimited", "-1"}
NOUNS = {
    "CPU_THROTTLE": "throttling", "CHECKPOINT_STALL": "checkpoint stalls",
    "GPU_STARVATION": "GPU starvation", "OOM_KILL": "OOM kills", "MEMORY_PRESSURE": "memory pressure",
    "CPU_CONTENTION": "CPU contention", "IO_SATURATION": "I/O saturation",
    "GPU_THROTTLE": "GPU throttling", "GPU_XID": "GPU Xid errors", "HUNG_TASK": "hung tasks",
    "IRQ_HOTSPOT": "IRQ hotspot", "NET_ERRORS": "network errors", "SWAP_ACTIVITY": "swapping",
    "SAMPLING_GAP": "sampling gaps",
}  # fmt: skip


def _has(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(
        con.sql(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", params=[table]
        ).fetchall()[0][0]
    )


def noun(key: str) -> str:
    """Words for a finding key in a sentence (``CPU_THROTTLE`` -> ``throttling``)."""
    return NOUNS.get(key, key.lower().replace("_", " "))


def _findings(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    if not _has(con, "findings"):
        return {}
    rows = con.sql(
        "SELECT key, any_value(kind), count(*), sum(duration_s), sum(gpu_seconds_lost), "
        "min(CASE severity WHEN 'critical' THEN 0 WHEN 'major' THEN 1 WHEN 'minor' THEN 2 ELSE 3 END), "
        "any_value(title) FROM findings GROUP BY key"
    ).fetchall()
    sev = ("critical", "major", "minor", "info")
    return {
        r[0]: {"kind": r[1], "count": int(r[2]), "duration_s": float(r[3] or 0),
               "gpu_seconds_lost": r[4], "severity": sev[int(r[5])], "title": r[6]}
        for r in rows
    }  # fmt: skip


def _detectors(con: duckdb.DuckDBPyConnection) -> dict[str, str] | None:
    if not _has(con, "detector_status"):
        return None
    return {
        str(d): str(s)
        for d, s in con.sql("SELECT detector, status FROM detector_status").fetchall()
    }


def compare_findings(
    before: duckdb.DuckDBPyConnection,
    after: duckdb.DuckDBPyConnection,
    quiet: dict[str, set[str]] | None = None,
) -> list[dict[str, Any]]:
    """One row per finding key present on either side (see module docstring).

    ``quiet`` maps ``"before"``/``"after"`` to the signals captured on that side that
    stayed at 0 throughout: a detector that could not run there (no CPU quota, so no CFS
    counters) still proves the finding absent when its `QUIET_SIGNAL` is among them.
    """
    fb, fa = _findings(before), _findings(after)
    db, da = _detectors(before), _detectors(after)
    quiet = quiet or {}
    rows = []
    for key in sorted(set(fb) | set(fa)):
        b, a = fb.get(key), fa.get(key)
        kind = (b or a or {}).get("kind")
        note = None
        if b and not a:
            status, note = _absent(da, kind, quiet.get("after", set()), "after")
            status = status or "gone"
        elif a and not b:
            status, note = _absent(db, kind, quiet.get("before", set()), "before")
            status = status or "new"
        else:
            nb, na = b["count"], a["count"]  # type: ignore[index]
            status = "fewer" if na < nb else "more" if na > nb else "same"
        rows.append(
            {"key": key, "kind": kind, "noun": noun(key), "status": status, "note": note,
             "title": (a or b or {}).get("title"), "before": b, "after": a}
        )  # fmt: skip
    return rows


QUIET_SIGNAL = {"cpu_throttle": "throttled_ms_per_s"}


def _absent(
    status: dict[str, str] | None, kind: str | None, quiet: set[str], side: str
) -> tuple[str | None, str | None]:
    """(None, None) when the side without the finding evaluated its detector; else the
    status to report instead and why."""
    if _evaluated(status, kind):
        return None, None
    signal = QUIET_SIGNAL.get(kind or "")
    if signal and signal in quiet:
        return None, f"detector not evaluated {side}, but {signal} stayed at 0 throughout"
    return f"not evaluated {side}", None


def _evaluated(status: dict[str, str] | None, kind: str | None) -> bool:
    if status is None or kind is None:
        return False
    return status.get(kind) == "evaluated"


def _config(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]] | None:
    if not _has(con, "host_config"):
        return None
    sources = ", ".join(f"'{s}'" for s in SOURCES)
    rows = con.sql(
        f"""SELECT source, key, value, raw FROM host_config WHERE source IN ({sources})
        ORDER BY key, CASE snapshot WHEN 'start' THEN 0 WHEN 'end' THEN 1 ELSE 2 END"""
    ).fetchall()
    names = _process_names(con)
    out: dict[str, dict[str, Any]] = {}
    for source, key, value, raw in rows:
        if VOLATILE.match(key):
            continue
        label = key
        if source == "sched":
            parts = key.split(".", 2)
            if len(parts) == 3:
                label = f"sched.{names.get(parts[1], 'pid ' + parts[1])}.{parts[2]}"
        elif source == "cgroup_limits":
            label = _cgroup_label(key, raw)
        entry = out.get(label)
        if entry is None:
            out[label] = {"source": source, "key": key, "values": {value}, "first": True}
        elif entry["key"] == key:
            continue  # same key from a later snapshot: the start value counts
        else:  # several PIDs of one process name
            entry["values"].add(value)
    return {
        k: {"source": v["source"], "value": ",".join(sorted(map(str, v["values"])))}
        for k, v in out.items()
    }


def _process_names(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    rows = con.sql(
        "SELECT key, value FROM host_config WHERE key LIKE 'process.%.status.Name' "
        "ORDER BY CASE snapshot WHEN 'start' THEN 0 ELSE 1 END"
    ).fetchall()
    names: dict[str, str] = {}
    for key, value in rows:
        pid = key.split(".")[1]
        names.setdefault(pid, str(value))
    return names


def _cgroup_label(key: str, raw: str | None) -> str:
    """``cgroup.train.slice.cpu.quota_us`` from ``.../train.slice/cpu.max`` -> ``cpu.max quota_us (train.slice)``."""
    path = (raw or "").split(" ", 1)[0]
    if "/" in path:
        folder, file = path.rsplit("/", 1)
        cg = folder.split("/sys/fs/cgroup/", 1)[-1] or "/"
        field = key.rsplit(".", 1)[-1]
        label = file if file in key else f"{file} {field}"
        if file == "cpu.max":
            label = f"cpu.max {field.replace('_us', '')}"
        return f"{label} ({cg})"
    return key


def compare_config(
    before: duckdb.DuckDBPyConnection, after: duckdb.DuckDBPyConnection
) -> dict[str, Any]:
    """``{"changes": [...], "missing": [side...], "compared": n}`` (see module docstring)."""
    cb, ca = _config(before), _config(after)
    missing = [side for side, c in (("before", cb), ("after", ca)) if c is None]
    if cb is None or ca is None:
        return {"changes": [], "missing": missing, "compared": 0}
    changes = []
    for label in sorted(set(cb) | set(ca)):
        b, a = cb.get(label), ca.get(label)
        vb, va = (b or {}).get("value"), (a or {}).get("value")
        if vb == va:
            continue
        source = (a or b or {})["source"]
        change = "added" if b is None else "removed" if a is None else "changed"
        changes.append(
            {"group": GROUPS.get(source, source), "source": source, "key": label,
             "before": vb, "after": va, "change": change, "direction": direction(vb, va)}
        )  # fmt: skip
    return {"changes": changes, "missing": [], "compared": len(set(cb) | set(ca))}


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    v = value.strip().lower()
    if v in UNLIMITED:
        return float("inf")
    try:
        return float(v)
    except ValueError:
        return None


def direction(before: str | None, after: str | None) -> str | None:
    """``raised`` / ``lowered`` when both values are numbers (``max`` = unlimited).

    >>> direction("200000", "max"), direction("20", "10"), direction("a", "b")
    ('raised', 'lowered', None)
    """
    nb, na = _number(before), _number(after)
    if nb is None or na is None or nb == na:
        return None
    return "raised" if na > nb else "lowered"
