#!/usr/bin/env python3
"""Recompute the numbers of a finding's evidence from the raw files of its bundle.

Used by tests/real/library_score.py: for every evidence row of a finding (and the
``mean``/``median``/``max`` its note quotes beside the value, and the sample count it
names), this module computes the same statistic over the finding's window from the raw
text, through observe.py's parsers only (it imports nothing from analyzer/), and says
whether the two agree within `REL_TOL` (or `ABS_TOL` of the unit, the precision the
report prints). A number it cannot recompute is listed with the reason, never counted
as agreeing.

What is recomputed is the *value* of each evidence row, as its note defines it (median,
mean, max / peak, min, increase over the window), over the window the finding reports
(``[start, end)``; an OOM kill's "60 s before the kill": the 60 whole seconds before the
kill's second and that second). Baselines are not: their definition ("median outside the
detector's windows") depends on every finding of the kind.

Which samples a window holds is the report's rule, stated in docs/tables.md for
``signals``: a window lists the samples *stamped* in its seconds; a sample spanning s
seconds (a 10 s histogram, a 5 s sampler) also counts for the s - 1 seconds before its
stamp; a counter's rate between two readings is stamped at the later one. (vmstat,
iostat and mpstat stamp a sample at the end of the second it averages, so a window's
times are up to one sample later than the real time of what it shows.)

    python samples/real/recompute.py samples/real/BUNDLE.tgz   # needs the analyzer to list findings
"""

from __future__ import annotations

import contextlib
import itertools
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import observe

Bundle = observe.Bundle

#: relative agreement the issue asks for
REL_TOL = 0.05
#: absolute agreement by unit: the report rounds to one decimal (counts to whole ones)
ABS_TOL = {"count": 0.5, "tasks": 0.05, "pid": 0.0}
DEFAULT_ABS_TOL = 0.11
_WHOLE = re.compile(r"^(dm-|md|loop|ram|zram)")
_STATS = ("median", "mean", "max", "peak", "min", "increase")


@dataclass
class Check:
    """One number of a finding: as reported, as recomputed, and whether they agree."""

    signal: str
    stat: str
    reported: float | str | None
    recomputed: float | str | None = None
    agree: bool | None = None  # None: not recomputed (``why`` says why)
    why: str = ""


class NotRecomputed(Exception):
    """The raw files do not give this number independently (the message says why)."""


Series = list[tuple[float, float]]


# ------------------------------------------------------------------ raw series
def _overlap(samples: list[tuple[float, Any]], a: float, z: float, iv: float) -> list[Any]:
    """Values of the samples the window lists: stamped at its seconds (module docstring);
    a sample spanning ``iv`` s counts when one of the seconds it fills is inside."""
    return [v for t, v in samples if t >= a and t - iv + 1 < z]


def _rates(samples: list[tuple[float, dict[str, float]]], keys: list[str]) -> Series:
    """Per-second rate of the sum of ``keys`` between consecutive samples (at the later)."""
    out = []
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if t1 > t0 and any(k in v1 for k in keys):
            d = sum(v1.get(k, 0.0) - v0.get(k, 0.0) for k in keys)
            out.append((t1, d / (t1 - t0)))
    return out


def _rates_inside(series: Series, a: float, z: float) -> list[float]:
    """Rates (stamped at the later sample) whose seconds (previous stamp, stamp] reach
    into the window's seconds [a, z)."""
    out = []
    for (t0, _), (t1, r) in itertools.pairwise(
        [(series[0][0] - 1, 0.0), *series] if series else []
    ):
        if t1 >= a and t0 + 1 < z:
            out.append(r)
    return out


def _points(samples: list[tuple[float, dict[str, float]]], a: float, z: float, iv: float) -> list:
    """Readings of a sampler (every ``iv`` s) that fill a second of the window."""
    return _overlap(samples, a, z, iv)


def _agg(xs: list[float], stat: str) -> float:
    xs = [x for x in xs if x is not None]
    if not xs:
        raise NotRecomputed("no raw samples in the window")
    if stat == "median":
        return statistics.median(xs)
    if stat == "mean":
        return statistics.fmean(xs)
    if stat in ("max", "peak"):
        return max(xs)
    if stat == "min":
        return min(xs)
    raise NotRecomputed(f"statistic {stat!r} is not one of {_STATS}")


def _disks(b: Bundle) -> list[tuple[float, dict[str, dict[str, float]]]]:
    return [
        (t, {k: v for k, v in d.items() if k != "_cpu" and not _WHOLE.match(k)})
        for t, d in b.get("iostat")
    ]


def _psi_rates(b: Bundle, res: str, kind: str) -> Series:
    return [(t, 100 * r / 1e6) for t, r in _rates(b.get("psi"), [f"{res}.{kind}.total"])]


def _hist_p99(b: Bundle, rel: str) -> Series:
    """p99 (upper bucket bound, us) of every histogram of a bpftrace file, all maps summed."""
    out: Series = []
    t, buckets = None, {}

    def flush() -> None:
        if t is not None and buckets:
            n, acc = sum(c for _, c in buckets.values()), 0
            for lo in sorted(buckets):
                acc += buckets[lo][1]
                if acc >= 0.99 * n:
                    out.append((t, buckets[lo][0]))
                    break

    for line in b.text(rel).splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z$", line.strip())
        if m:
            flush()
            t, buckets = observe._utc(m.group(1), "%Y-%m-%dT%H:%M:%S"), {}
            continue
        m = re.match(r"\[([\d.]+[KMG]?)(?:,\s*([\d.]+[KMG]?))?[)\]]\s+(\d+)", line.strip())
        if m and t is not None:
            lo = observe._num(m.group(1))
            hi = observe._num(m.group(2)) if m.group(2) else lo * 2
            prev = buckets.get(lo, (hi, 0))
            buckets[lo] = (hi, prev[1] + int(m.group(3)))
    flush()
    return out


def _pidstat(b: Bundle) -> dict[int, list[tuple[float, dict[str, float]]]]:
    if "pidstat" in b.cache:
        return b.cache["pidstat"]
    by: dict[int, list[tuple[float, dict[str, float]]]] = {}
    cols: list[str] = []
    for line in b.text("series/pidstat.out").splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "#":
            cols = f[2:]
            continue
        if cols and f[0].isdigit() and len(f) >= len(cols) + 1:
            row = {}
            for c, v in zip(cols[:-1], f[1 : len(cols)], strict=False):
                with contextlib.suppress(ValueError):
                    row[c] = float(v)
            by.setdefault(int(row.get("PID", -1)), []).append((float(f[0]), row))
    b.cache["pidstat"] = by
    return by


def _cgroup(b: Bundle, name: str, ctl: str) -> list[tuple[float, dict[str, float]]]:
    """Samples of cgroup ``name`` (as the report spells it, e.g. /hs-x) under ``ctl``."""
    path = f"/sys/fs/cgroup/{ctl}{name}"
    series = b.get("cgroup")
    if path not in series:
        raise NotRecomputed(f"no {ctl} samples of {name} in series/cgroup.out")
    return series[path]


def _limit(b: Bundle, name: str, ctl: str, file: str) -> float:
    v = b.get("limits").get(f"/sys/fs/cgroup/{ctl}{name}/{file}")
    if v is None:
        raise NotRecomputed(f"{file} of {name} not in snap/cgroup_limits.start.out")
    return float(v)


def _delta(
    samples: list[tuple[float, dict[str, float]]], keys: list[str], a: float, z: float
) -> tuple[float, float]:
    total, secs = 0.0, None
    for k in keys:
        d = observe.delta(samples, k, a, z)
        if d is None:
            continue
        total += d[0]
        secs = d[1]
    if secs is None:
        raise NotRecomputed(f"no samples of {keys[0]} around the window")
    return total, secs


# ------------------------------------------------------------------ per signal
Ctx = dict[str, Any]  # b, a, z, iv, finding, evidence


def _vm(col: str) -> Callable[[Ctx, str], float]:
    return lambda c, stat: _agg(
        [v[col] for v in _overlap(c["b"].get("vmstat"), c["a"], c["z"], c["iv"])], stat
    )


def _mp_all(fn: Callable[[dict[str, float]], float]) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        rows = _overlap(c["b"].get("mpstat"), c["a"], c["z"], c["iv"])
        return _agg([fn(d["all"]) for d in rows if "all" in d], stat)

    return get


def _mp_cpu(c: Ctx, stat: str) -> float:
    cpu, what = re.match(r"cpu(\d+)[ _](.*)", c["signal"]).groups()  # type: ignore[union-attr]
    rows = [d[cpu] for d in _overlap(c["b"].get("mpstat"), c["a"], c["z"], c["iv"]) if cpu in d]
    if what == "idle_pct":
        return _agg([d["%idle"] for d in rows], stat)
    if what == "irq+soft_pct":
        return _agg([d["%irq"] + d["%soft"] for d in rows], stat)
    raise NotRecomputed(f"unknown per-CPU signal {what!r}")


def _cpu_count(c: Ctx, stat: str) -> float:
    return float(len({k for _, d in c["b"].get("mpstat") for k in d if k != "all"}))


def _psi(res: str, kind: str) -> Callable[[Ctx, str], float]:
    return lambda c, stat: _agg(_rates_inside(_psi_rates(c["b"], res, kind), c["a"], c["z"]), stat)


def _hist(rel: str, span_s: float = 10.0) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        if not c["b"].text(rel):
            raise NotRecomputed(f"no {rel}")
        return _agg(_overlap(_hist_p99(c["b"], rel), c["a"], c["z"], span_s), stat)

    return get


def _disk_sum(col: str) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        rows = _overlap(_disks(c["b"]), c["a"], c["z"], c["iv"])
        return _agg([sum(v.get(col, 0.0) for v in d.values()) for d in rows if d], stat)

    return get


def _disk_max(col: str) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        rows = _overlap(_disks(c["b"]), c["a"], c["z"], c["iv"])
        return _agg([max(v.get(col, 0.0) for v in d.values()) for d in rows if d], stat)

    return get


_IOSTAT_COL = {
    "w_await_ms": "w_await",
    "r_await_ms": "r_await",
    "aqu_sz": "aqu-sz",
    "util_pct": "%util",
    "write_kb_s": "wkB/s",
    "read_kb_s": "rkB/s",
    "w_per_s": "w/s",
    "r_per_s": "r/s",
}


def _device(c: Ctx, stat: str) -> float:
    dev, what = c["signal"].split(" ", 1)
    col = _IOSTAT_COL.get(what)
    if col is None:
        raise NotRecomputed(f"unknown device signal {what!r}")
    rows = [d[dev] for d in _overlap(c["b"].get("iostat"), c["a"], c["z"], c["iv"]) if dev in d]
    c["samples"] = len(rows)
    return _agg([v[col] for v in rows if col in v], stat)


def _meminfo(key: str | tuple[str, ...]) -> Callable[[Ctx, str], float]:
    keys = (key,) if isinstance(key, str) else key

    def get(c: Ctx, stat: str) -> float:
        rows = _points(c["b"].get("meminfo"), c["a"], c["z"], c["mem_iv"])
        return _agg([sum(v.get(k, 0.0) for k in keys) for v in rows if keys[0] in v], stat)

    return get


def _page_cache_growth(c: Ctx, stat: str) -> float:
    mi = [
        (t, v.get("Dirty", 0.0) + v.get("Writeback", 0.0))
        for t, v in c["b"].get("meminfo")
        if "Dirty" in v
    ]
    rates = [
        (t1, (v1 - v0) / (t1 - t0)) for (t0, v0), (t1, v1) in itertools.pairwise(mi) if t1 > t0
    ]
    return _agg(_rates_inside(rates, c["a"], c["z"]), stat)


_RECLAIM_WHO = ("kswapd", "direct", "khugepaged", "proactive")


def _vmstat_keys(c: Ctx, family: str) -> tuple[list[str], list[str]]:
    """The /proc/vmstat keys of ``family`` (pgscan, pgsteal): by who (kswapd, direct,
    khugepaged, proactive), and by what (anon, file)."""
    keys = set().union(*(v.keys() for _, v in c["b"].get("proc_vmstat")[:3]))
    who = [k for k in keys if k.startswith(family + "_") and k.split("_", 1)[1] in _RECLAIM_WHO]
    what = [k for k in (f"{family}_anon", f"{family}_file") if k in keys]
    return who, what


def _reclaim_rate(family: str) -> Callable[[Ctx, str], float]:
    """max(kswapd + direct + khugepaged + proactive, anon + file) per sample."""

    def get(c: Ctx, stat: str) -> float:
        who, what = _vmstat_keys(c, family)
        pv = c["b"].get("proc_vmstat")
        a = dict(_rates(pv, who)) if who else {}
        b = dict(_rates(pv, what)) if what else {}
        both = sorted((t, max(a.get(t, 0.0), b.get(t, 0.0))) for t in set(a) | set(b))
        return _agg(_rates_inside(both, c["a"], c["z"]), stat)

    return get


def _reclaim_mean(family: str) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        who, what = _vmstat_keys(c, family)
        pv = c["b"].get("proc_vmstat")
        d1, _ = _delta(pv, who, c["a"], c["z"]) if who else (0.0, 1.0)
        d2, _ = _delta(pv, what, c["a"], c["z"]) if what else (0.0, 1.0)
        return max(d1, d2) / (c["z"] - c["a"])

    return get


def _vmstat_rate(keys: list[str], scale: float = 1.0) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        pv = c["b"].get("proc_vmstat")
        return _agg([r * scale for r in _rates_inside(_rates(pv, keys), c["a"], c["z"])], stat)

    return get


def _vmstat_pages_mib(key: str) -> Callable[[Ctx, str], float]:
    return lambda c, stat: _delta(c["b"].get("proc_vmstat"), [key], c["a"], c["z"])[0] * 4 / 1024


def _pid(c: Ctx) -> tuple[int, list[dict[str, float]]]:
    m = re.match(r"pid (\d+) ", c["note"])
    if not m:
        raise NotRecomputed("the note names no pid")
    rows = _overlap(_pidstat(c["b"]).get(int(m.group(1)), []), c["a"], c["z"], c["iv"])
    c["samples"] = len(rows)
    return int(m.group(1)), rows


def _pid_col(col: str) -> Callable[[Ctx, str], float]:
    return lambda c, stat: _agg([r[col] for r in _pid(c)[1] if col in r], stat)


def _reports(c: Ctx) -> int:
    """pidstat reports (distinct stamps, any process) in the window."""
    stamps = {t for rows in _pidstat(c["b"]).values() for t, _ in rows}
    n = len(_overlap([(t, t) for t in sorted(stamps)], c["a"], c["z"], 1))
    if not n:
        raise NotRecomputed("no pidstat report in the window")
    return n


def _pid_share(col: str) -> Callable[[Ctx, str], float]:
    """Mean of ``col`` over the window's pidstat reports, a report without the process
    counting 0 (pidstat without -p prints only active tasks)."""
    return lambda c, stat: sum(r.get(col, 0.0) for r in _pid(c)[1]) / _reports(c)


def _pid_extra(c: Ctx, label: str) -> float:
    """The note's other numbers about the process: MB written, %system up to, %wait mean."""
    rows = _pid(c)[1]
    if label == "MB written":
        return sum(r.get("kB_wr/s", 0.0) for r in rows) * c["iv"] / 1024
    if label == "%system up to":
        return _agg([r["%system"] for r in rows], "max")
    if label == "mean %wait":
        return sum(r.get("%wait", 0.0) for r in rows) / _reports(c)
    if label == "mean kB_wr/s":  # the writers' note: "(mean N; ... MB written ...)"
        return sum(r.get("kB_wr/s", 0.0) for r in rows) / _reports(c)
    raise NotRecomputed(label)


def _throttle(c: Ctx, stat: str) -> float:
    name = c["finding"]["impact"].get("cgroup") or _cgroup_in(c)
    s = _cgroup(c["b"], name, "cpu")
    per = []
    for (t0, v0), (t1, v1) in itertools.pairwise(s):
        if t1 > c["a"] and t0 < c["z"]:
            p = v1.get("cpu.stat:nr_periods", 0) - v0.get("cpu.stat:nr_periods", 0)
            th = v1.get("cpu.stat:nr_throttled", 0) - v0.get("cpu.stat:nr_throttled", 0)
            ms = (v1.get("cpu.stat:throttled_time", 0) - v0.get("cpu.stat:throttled_time", 0)) / 1e6
            if c["signal"] == "throttled_pct" and p > 0:
                per.append(100 * th / p)
            elif c["signal"] == "throttled_ms_per_s":
                per.append(ms / (t1 - t0))
    return _agg(per, stat)


def _cgroup_in(c: Ctx) -> str:
    for text in (c["note"], c["finding"].get("title", ""), c["finding"].get("summary", "")):
        m = re.search(r"(/[\w.@:-]+(?:/[\w.@:-]+)*)", text or "")
        if m:
            return m.group(1).rstrip(":")
    raise NotRecomputed("no cgroup named")


def _cpu_usage(c: Ctx, stat: str) -> float:
    name = c["finding"]["impact"].get("cgroup") or _cgroup_in(c)
    s = _cgroup(c["b"], name, "cpuacct")
    r = _rates(s, ["cpuacct.usage"])
    return _agg([100 * x / 1e9 for x in _rates_inside(r, c["a"], c["z"])], stat)


def _quota(c: Ctx, stat: str) -> float:
    name = _cgroup_in(c)
    return _limit(c["b"], name, "cpu", "cpu.cfs_quota_us") / _limit(
        c["b"], name, "cpu", "cpu.cfs_period_us"
    )


def _memcg(c: Ctx) -> str:
    for e in c["finding"]["evidence"]:
        if e["signal"] in ("cgroup", "memcg") and e.get("note", "").startswith("/"):
            return e["note"].split()[0]
    return c["finding"]["impact"].get("memcg") or _cgroup_in(c)


def _memcg_series(c: Ctx, key: str, scale: float, stat: str) -> float:
    s = _cgroup(c["b"], _memcg(c), "memory")
    rows = _points(s, c["a"], c["z"], c["mem_iv"])
    return _agg([v[key] * scale for v in rows if key in v], stat)


def _memcg_increase(
    keys: list[str], scale: float = 1.0, per_s: bool = False
) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        s = _cgroup(c["b"], _memcg(c), "memory")
        present = [k for k in keys if any(k in v for _, v in s[:3])]
        if not present:
            raise NotRecomputed(f"no {keys[0]} in the cgroup's samples")
        d, _secs = _delta(s, present, c["a"], c["z"])
        return d * scale / ((c["z"] - c["a"]) if per_s else 1.0)

    return get


def _mib(x: float) -> float:
    return x / 2**20


def _memcg_limit(c: Ctx, stat: str) -> float:
    return _mib(_limit(c["b"], _memcg(c), "memory", "memory.limit_in_bytes"))


def _memcg_peak(c: Ctx, stat: str) -> float:
    s = _cgroup(c["b"], _memcg(c), "memory")
    after = [v for t, v in s if t >= c["kill"] and "memory.max_usage_in_bytes" in v]
    if not after:
        raise NotRecomputed("no sample after the kill")
    return _mib(after[0]["memory.max_usage_in_bytes"])


def _memcg_hits_to_kill(c: Ctx, stat: str) -> float:
    s = _cgroup(c["b"], _memcg(c), "memory")
    after = next((t for t, _ in s if t >= c["kill"]), c["kill"])
    return _delta(s, ["memory.failcnt"], c["kill"] - 60, after)[0]


def _swap_change(c: Ctx, stat: str) -> float:
    s = _cgroup(c["b"], _memcg(c), "memory")
    key = "memory.stat:swap"
    pts = [v[key] for v in _points(s, c["a"], c["z"], c["mem_iv"]) if key in v]
    if not pts:
        raise NotRecomputed("no cgroup swap samples in the window")
    return _mib(pts[-1] - pts[0])


def _swap_growth(c: Ctx, stat: str) -> float:
    s = _cgroup(c["b"], _memcg(c), "memory")
    v = [
        x["memory.stat:swap"]
        for x in _points(s, c["a"], c["z"], c["mem_iv"])
        if "memory.stat:swap" in x
    ]
    if not v:
        raise NotRecomputed("no cgroup swap samples in the window")
    return _mib(max(v) - v[0])


def _limit_reclaim(c: Ctx, stat: str) -> float:
    pv = c["b"].get("proc_vmstat")
    who, what = _vmstat_keys(c, "pgsteal")
    d_what, _ = _delta(pv, what, c["a"], c["z"])
    d_who, _ = _delta(pv, who, c["a"], c["z"])
    return (d_what - d_who) / (c["z"] - c["a"])


def _limit_reclaim_part(part: str) -> Callable[[Ctx, str], float]:
    """MiB of ``part`` (file/anon) taken by memory-cgroup limit reclaim: the limit share of
    /proc/vmstat pgsteal (anon + file − kswapd − direct − …), split as pgsteal_file : _anon."""

    def get(c: Ctx, stat: str) -> float:
        pv = c["b"].get("proc_vmstat")
        who, what = _vmstat_keys(c, "pgsteal")
        typed, _ = _delta(pv, what, c["a"], c["z"])
        glob, _ = _delta(pv, who, c["a"], c["z"])
        mine, _ = _delta(pv, [f"pgsteal_{part}"], c["a"], c["z"])
        return max(typed - glob, 0.0) * (mine / typed if typed else 0.0) * 4 / 1024

    return get


#: a CPU this busy (100 − %idle − %iowait) is saturated (the contention detector's rule)
HOT_CPU_PCT = 90.0


def _cpu_wait(c: Ctx, stat: str) -> float:
    """Mean over the window's seconds of the largest sum of pidstat %wait of the tasks on
    one saturated CPU (0 in a second without one)."""
    busy = {
        (int(t), cpu): 100 - d["%idle"] - d["%iowait"]
        for t, dd in c["b"].get("mpstat")
        for cpu, d in dd.items()
        if cpu != "all"
    }
    per: dict[tuple[int, str], float] = {}
    for rows in _pidstat(c["b"]).values():
        for t, r in rows:
            if "%wait" in r and "CPU" in r:
                key = (int(t), str(int(r["CPU"])))
                per[key] = per.get(key, 0.0) + r["%wait"]
    secs = range(int(c["a"]), int(c["z"]))
    best = [
        max(
            (w for (t, cpu), w in per.items() if t == s and busy.get((s, cpu), 0) >= HOT_CPU_PCT),
            default=0.0,
        )
        for s in secs
    ]
    return _agg(best, stat)


_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\) total-vm:(\d+)kB, anon-rss:(\d+)kB")


def _kills(b: Bundle) -> list[tuple[float, re.Match[str]]]:
    """The kernel's 'Killed process' lines, from the capture's log and the ring buffer."""
    lines = b.get("dmesg") + b.get("dmesg_full")
    return sorted(((t, m) for t, line in lines if (m := _KILLED.search(line))), key=lambda x: x[0])


def _kill_line(c: Ctx) -> re.Match[str]:
    for t, m in _kills(c["b"]):
        if abs(t - c["kill"]) <= 1.5:
            return m
    raise NotRecomputed("no 'Killed process' line within 1.5 s of the finding")


def _kill_field(i: int) -> Callable[[Ctx, str], float]:
    return lambda c, stat: float(_kill_line(c).group(i))


def _gap(c: Ctx, stat: str) -> float:
    m = re.match(r"series/(\w+)\.out", c["note"])
    if not m:
        raise NotRecomputed("the note names no collector file")
    ts = c["b"].stamps(m.group(1))
    if not ts:
        raise NotRecomputed(f"observe.py has no stamps for {m.group(1)}")
    inside = [t1 - t0 for t0, t1 in itertools.pairwise(ts) if t1 >= c["a"] and t0 < c["z"]]
    tail = [c["z"] - ts[-1]] if ts[-1] < c["z"] else []
    return _agg(inside + tail, "max")


def _softirq(c: Ctx, stat: str) -> float:
    cpu, name = re.match(r"cpu(\d+) softirq (\w+)", c["signal"]).groups()  # type: ignore[union-attr]
    # the detector averages the 10 s samples stamped inside the window
    rows = [d[cpu] for d in _overlap(c["b"].get("mpstat_irq"), c["a"], c["z"], 1) if cpu in d]
    return _agg([d[f"{name}/s"] for d in rows if f"{name}/s" in d], stat)


def _not(reason: str) -> Callable[[Ctx, str], float]:
    def get(c: Ctx, stat: str) -> float:
        raise NotRecomputed(reason)

    return get


#: (finding kinds or "*", signal pattern) -> recomputation; the first match wins
RULES: list[tuple[tuple[str, ...], str, Callable[[Ctx, str], float], str]] = [
    (("*",), r"runq", _vm("r"), "median"),
    (("*",), r"runq_max", _vm("r"), "max"),
    (("*",), r"cs_per_s", _vm("cs"), "mean"),
    (("*",), r"cpu_busy_pct", _mp_all(lambda d: 100 - d["%idle"] - d["%iowait"]), "mean"),
    (("*",), r"cpu_sys_pct", _mp_all(lambda d: d["%sys"] + d["%irq"] + d["%soft"]), "max"),
    (("*",), r"iowait_pct", _mp_all(lambda d: d["%iowait"]), "mean"),
    (("*",), r"cpu\d+[ _](idle_pct|irq\+soft_pct)", _mp_cpu, "median"),
    (("*",), r"cpus", _cpu_count, "count"),
    (("*",), r"psi_cpu_some_pct", _psi("cpu", "some"), "mean"),
    (("*",), r"psi_mem_some_pct", _psi("memory", "some"), "mean"),
    (("*",), r"psi_mem_full_pct", _psi("memory", "full"), "mean"),
    (("*",), r"psi_io_some_pct", _psi("io", "some"), "max"),
    (("*",), r"psi_io_full_pct", _psi("io", "full"), "max"),
    (("*",), r"runqlat_p99_us", _hist("series/bpf_runqlat.out"), "max"),
    (("*",), r"biolat_p99_us", _hist("series/bpf_biolat.out"), "max"),
    (("checkpoint_stall",), r"disk_write_kb_s", _disk_sum("wkB/s"), "max"),
    (("memory_pressure",), r"disk_read_kb_s", _disk_sum("rkB/s"), "mean"),
    (("*",), r"disk_w_await_max_ms", _disk_max("w_await"), "max"),
    (("*",), r"disk_aqu_sz_max", _disk_max("aqu-sz"), "max"),
    (("*",), r"disk_util_max_pct", _disk_max("%util"), "max"),
    (
        ("*",),
        r"\S+ (w_await_ms|r_await_ms|aqu_sz|util_pct|write_kb_s|read_kb_s|w_per_s|r_per_s)",
        _device,
        "median",
    ),
    (("*",), r"dirty_kb", _meminfo("Dirty"), "max"),
    (("*",), r"writeback_kb", _meminfo("Writeback"), "max"),
    (("*",), r"mem_available_kb", _meminfo("MemAvailable"), "min"),
    (("*",), r"page_cache_write_kb_s", _page_cache_growth, "max"),
    (("*",), r"process_write_kb_s", _pid_col("kB_wr/s"), "max"),
    (("*",), r"process_read_kb_s", _pid_col("kB_rd/s"), "mean"),
    (("*",), r"process_cpu_pct", _pid_share("%CPU"), "mean"),
    (("cpu_throttle",), r"throttled_pct|throttled_ms_per_s", _throttle, "mean"),
    (("cpu_throttle",), r"usage_pct", _cpu_usage, "mean"),
    (("cpu_throttle",), r"cpu\.quota", _quota, "value"),
    (("*",), r"pgscan_per_s", _reclaim_rate("pgscan"), "max"),
    (("*",), r"pgsteal_per_s", _reclaim_rate("pgsteal"), "max"),
    (("*",), r"pgscan_direct_per_s", _vmstat_rate(["pgscan_direct"]), "max"),
    (("*",), r"pgscan_kswapd_per_s", _vmstat_rate(["pgscan_kswapd"]), "max"),
    (
        ("*",),
        r"refault_per_s",
        _vmstat_rate(["workingset_refault_anon", "workingset_refault_file"]),
        "max",
    ),
    (("*",), r"pgmajfault_per_s", _vmstat_rate(["pgmajfault"]), "max"),
    (("*",), r"swap_in_kb_s", _vm("si"), "mean"),
    (("*",), r"swap_out_kb_s", _vm("so"), "mean"),
    (("*",), r"pgscan_all_keys", _reclaim_mean("pgscan"), "mean"),
    (("*",), r"pgsteal_all_keys", _reclaim_mean("pgsteal"), "mean"),
    (("*",), r"pgsteal_cgroup_limit", _limit_reclaim, "mean"),
    (("*",), r"pswpin_mb", _vmstat_pages_mib("pswpin"), "increase"),
    (("*",), r"pswpout_mb", _vmstat_pages_mib("pswpout"), "increase"),
    (("*",), r"memory_limit|memcg_limit", _memcg_limit, "value"),
    (
        ("*",),
        r"usage_max|memcg_usage_max",
        lambda c, s: _memcg_series(c, "memory.usage_in_bytes", 2**-20, "max"),
        "max",
    ),
    (
        ("*",),
        r"cache_max",
        lambda c, s: _memcg_series(c, "memory.stat:cache", 2**-20, "max"),
        "max",
    ),
    (("oom_kill",), r"memcg_limit_hits", _memcg_hits_to_kill, "increase"),
    (("oom_kill",), r"memcg_peak", _memcg_peak, "value"),
    (("*",), r"limit_hits", _memcg_increase(["memory.failcnt"]), "increase"),
    (("*",), r"limit_hits_per_s", _memcg_increase(["memory.failcnt"], per_s=True), "mean"),
    (
        ("*",),
        r"cgroup_refault_per_s",
        _memcg_increase(
            ["memory.stat:workingset_refault_file", "memory.stat:workingset_refault_anon"],
            per_s=True,
        ),
        "mean",
    ),
    (
        ("*",),
        r"reread_from_disk",
        _memcg_increase(["memory.stat:workingset_refault_file"], 4 / 1024),
        "increase",
    ),
    (
        ("*",),
        r"swapin_refaults",
        _memcg_increase(["memory.stat:workingset_refault_anon"], 4 / 1024),
        "increase",
    ),
    (("*",), r"swap_growth", _swap_growth, "increase"),
    (("swap_activity",), r"cgroup_swap", _swap_change, "increase"),
    (("*",), r"cache_squeezed_out", _limit_reclaim_part("file"), "increase"),
    (("*",), r"anon_reclaimed", _limit_reclaim_part("anon"), "increase"),
    (("oom_kill",), r"victim", _kill_field(1), "value"),
    (("oom_kill",), r"total_vm_kb", _kill_field(3), "value"),
    (("oom_kill",), r"anon_rss_kb", _kill_field(4), "value"),
    (("sampling_gap",), r"sample_spacing_s", _gap, "max"),
    (("irq_hotspot",), r"cpu\d+ softirq \w+", _softirq, "mean"),
    (("*",), r"net_drop_per_s", _not("sar -n EDEV is not read by observe.py"), "mean"),
    (("*",), r"cpu_wait_pct", _cpu_wait, "mean"),
]

#: evidence rows that carry a name, not a number
TEXT_SIGNALS = {"cgroup", "memcg"}
#: "(mean 3.67, max 76.66)" / "(median 0, max 1212420)" beside the value in a note
_ALSO = re.compile(r"\b(mean|median|max) (-?[\d.]+)(?=[,)])")
_SAMPLES = re.compile(r"over the window's (\d+) iostat samples")
_PROC_EXTRA = re.compile(
    r"(?:(mean %wait) ([\d.]+)%|([\d.]+) (MB written)|(%system up to) ([\d.]+) %"
    r"|\((mean) ([\d.]+);)"
)


def _stat_of(note: str, default: str) -> str:
    first = note.split(" ", 1)[0].rstrip(";:,") if note else ""
    if first in _STATS:
        return first
    m = re.search(r": (peak|mean|median|max|min) ", note or "")
    return m.group(1) if m else default


def _agrees(reported: float, recomputed: float, unit: str) -> bool:
    """Within `REL_TOL`, or within the precision the report printed: a whole number (the
    report rounds rates and counts to units) up to half a unit, else `ABS_TOL`."""
    floor = ABS_TOL.get(unit, DEFAULT_ABS_TOL)
    if float(reported).is_integer() and unit != "pid":
        floor = max(floor, 0.5)
    tol = max(REL_TOL * max(abs(reported), abs(recomputed)), floor)
    return abs(reported - recomputed) <= tol


def check_finding(b: Bundle, f: dict[str, Any], epoch: Callable[[Any], float]) -> list[Check]:
    """Every number of finding ``f`` (the analyzer's finding dict), recomputed from ``b``."""
    a, z = epoch(f["start"]), epoch(f["end"])
    c: Ctx = {"b": b, "a": a, "z": z, "iv": b.interval, "finding": f, "kill": a}
    if f["kind"] == "oom_kill":  # the kernel's time of the kill, not the second it fell in
        c["kill"] = next((t for t, _ in _kills(b) if a <= t < a + 1.5), a)
    c["mem_iv"] = _step(b, "meminfo")
    c["irq_iv"] = _step(b, "mpstat_irq_file")
    out: list[Check] = []
    for e in f.get("evidence", []):
        sig, note, unit = e["signal"], e.get("note") or "", e.get("unit") or ""
        if sig in TEXT_SIGNALS:
            out.append(_check_text(b, f, e, c))
            continue
        rule = next(
            (r for r in RULES if ("*" in r[0] or f["kind"] in r[0]) and re.fullmatch(r[1], sig)),
            None,
        )
        if rule is None:
            out.append(Check(sig, "", e["value"], why="no recomputation for this signal"))
            continue
        _, _, fn, default = rule
        c.update(signal=sig, note=note, a=a, z=z)
        if f["kind"] == "oom_kill" and "60 s before the kill" in note:
            # whole seconds: the second of the kill is the ramp's last (samples later in
            # that second count: the report's grid is one second)
            sec = float(int(c["kill"]))
            c.update(a=sec - 60, z=sec + 1)
        stat = _stat_of(note, default)
        out.append(_run(c, fn, sig, stat, e["value"], unit))
        for name, val in _ALSO.findall(note.split(";")[0] if "iostat samples" in note else ""):
            out.append(_run(c, fn, sig, name, float(val), unit))
        m = _SAMPLES.search(note)
        if m and "samples" in c:
            n = c.pop("samples")
            out.append(Check(sig, "samples", int(m.group(1)), n, int(m.group(1)) == n))
        if sig.startswith("process_"):
            for g in _PROC_EXTRA.findall(note):
                if g[6]:
                    label, val = "mean kB_wr/s", g[7]
                else:
                    label, val = (g[0], g[1]) if g[0] else ((g[3], g[2]) if g[3] else (g[4], g[5]))
                out.append(
                    _run(
                        c,
                        lambda cc, st, lab=label: _pid_extra(cc, lab),
                        sig,
                        label,
                        float(val),
                        unit,
                    )
                )
    return out


def _run(
    c: Ctx, fn: Callable[[Ctx, str], float], sig: str, stat: str, reported: Any, unit: str
) -> Check:
    if reported is None:
        return Check(sig, stat, None, why="reported without a value")
    try:
        got = float(fn(c, stat))
    except NotRecomputed as exc:
        return Check(sig, stat, reported, why=str(exc))
    return Check(sig, stat, reported, round(got, 3), _agrees(float(reported), got, unit))


def _check_text(b: Bundle, f: dict[str, Any], e: dict[str, Any], c: Ctx) -> Check:
    """A cgroup name: the kernel's OOM line names it, or the capture sampled it."""
    name = (e.get("note") or "").split()[0] if e.get("note") else ""
    if not name.startswith("/"):
        return Check(e["signal"], "name", name, why="no name")
    seen = any(p.endswith(f"/memory{name}") or p.endswith(f"/cpu{name}") for p in b.get("cgroup"))
    in_log = any(
        f"oom_memcg={name}" in m or f"task_memcg={name}" in m
        for _, m in b.get("dmesg") + b.get("dmesg_full")
    )
    return Check(e["signal"], "name", name, name if (seen or in_log) else None, seen or in_log)


def _step(b: Bundle, what: str) -> float:
    ts = [t for t, _ in b.get("mpstat_irq")] if what == "mpstat_irq_file" else b.stamps(what)
    gaps = sorted(t1 - t0 for t0, t1 in itertools.pairwise(ts) if t1 > t0)
    return gaps[len(gaps) // 2] if gaps else b.interval


def main(argv: list[str] | None = None) -> int:
    from datetime import UTC

    from analyzer import pipeline

    for path in argv or sys.argv[1:]:
        b = Bundle(Path(path))
        result = pipeline.run(Path(path), pipeline.Options(report=None))
        for f in result.findings:
            print(f"== {f['key']} {f['start']}..{f['end']}")
            for k in check_finding(b, f, lambda t: t.astimezone(UTC).timestamp()):
                mark = {True: "ok", False: "DIFF", None: "--"}[k.agree]
                print(
                    f"  {mark:4s} {k.signal:28s} {k.stat:14s} {k.reported!s:>14} {k.recomputed!s:>14} {k.why}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
