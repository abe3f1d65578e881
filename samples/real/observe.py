#!/usr/bin/env python3
"""Observed evidence for each injected incident, computed from the raw files of a bundle.

    python samples/real/observe.py samples/real/cpu-throttle.tgz [samples/real/cpu-throttle.truth.json]
    python samples/real/observe.py --all [--dir samples/real]     # every *.truth.json there
    add --no-write to only print

Independent of the analyzer (it imports nothing from analyzer/): small explicit parsers
for the raw text of vmstat, iostat -x, mpstat -P ALL, mpstat -I, the samplers (cgroup,
psi, meminfo, /proc/vmstat), dmesg, bpftrace runqlat and the cgroup_limits snapshot. For
each incident it compares the samples inside the incident's window with the samples in
the truth file's quiet windows (the baseline), writes the numbers into the incident's
"observed" field (and a baseline summary into each quiet window) and prints a table.

Sample timing: vmstat, iostat and mpstat stamp a sample with the time it was printed, the
end of the interval it averages: a sample stamped T covers (T - interval, T] and counts as
inside a window [a, b] when that span overlaps it. The samplers read counters at their
stamp: counter increases over a window are taken between the last sample at or before a
and the first at or after b.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import statistics
import sys
import tarfile
from bisect import bisect_left, bisect_right
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


# ------------------------------------------------------------------ bundle access
class Bundle:
    def __init__(self, path: Path) -> None:
        self.files: dict[str, str] = {}
        with tarfile.open(path, "r:gz") as tf:
            for m in tf.getmembers():
                if not m.isfile():
                    continue
                parts = m.name.split("/", 1)
                rel = (
                    parts[1]
                    if len(parts) == 2 and not m.name.startswith(("series/", "snap/"))
                    else m.name
                )
                if rel.startswith(("series/", "snap/")) or rel == "manifest.json":
                    f = tf.extractfile(m)
                    if f:
                        self.files[rel] = f.read().decode("utf-8", "replace")
        self.manifest = json.loads(self.files["manifest.json"])
        self.interval = float(self.manifest.get("interval_s") or 1)
        self.cache: dict[str, Any] = {}

    def text(self, rel: str) -> str:
        return self.files.get(rel, "")

    def get(self, name: str) -> Any:
        if name not in self.cache:
            self.cache[name] = getattr(self, "_parse_" + name)()
        return self.cache[name]

    # -- vmstat -t -w: columns ... UTC date time at the end; the first row is since boot
    def _parse_vmstat(self) -> list[tuple[float, dict[str, float]]]:
        rows, cols = [], None
        for line in self.text("series/vmstat.out").splitlines():
            f = line.split()
            if not f:
                continue
            if f[0] == "r" and "b" in f:
                cols = f[:-1] if f[-1] in ("UTC", "CET") else f
                continue
            if cols and len(f) >= len(cols) + 2 and re.match(r"\d{4}-\d\d-\d\d$", f[-2]):
                t = _utc(f[-2] + " " + f[-1], "%Y-%m-%d %H:%M:%S")
                rows.append((t, {c: float(v) for c, v in zip(cols, f[: len(cols)], strict=False)}))
        return rows[1:]  # drop the since-boot row

    # -- iostat -t -x -y: an ISO time line, avg-cpu, then Device rows
    def _parse_iostat(self) -> list[tuple[float, dict[str, dict[str, float]]]]:
        out: list[tuple[float, dict[str, dict[str, float]]]] = []
        t, cols, mode = None, None, None
        for line in self.text("series/iostat.out").splitlines():
            s = line.strip()
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)([+-]\d{4})$", s)
            if m:
                t = _utc(m.group(1), "%Y-%m-%dT%H:%M:%S") - _tzoff(m.group(2))
                out.append((t, {}))
                mode = None
                continue
            if s.startswith("avg-cpu:"):
                mode = "cpu"
                cpu_cols = s.split()[1:]
                continue
            if s.startswith("Device"):
                cols, mode = s.split()[1:], "dev"
                continue
            if not s or t is None:
                mode = None if not s else mode
                continue
            if mode == "cpu":
                out[-1][1]["_cpu"] = dict(zip(cpu_cols, map(float, s.split()), strict=False))
                mode = None
            elif mode == "dev" and cols:
                f = s.split()
                out[-1][1][f[0]] = dict(zip(cols, map(float, f[1:]), strict=False))
        return out

    # -- mpstat -P ALL: banner date, HH:MM:SS rows (UTC)
    def _mp_rows(self, rel: str) -> list[tuple[float, list[str], list[str]]]:
        """(epoch, header columns, row fields) for every data row of an mpstat file."""
        txt = self.text(rel)
        m = re.search(r"\s(\d{4}-\d\d-\d\d)\s", txt.split("\n", 1)[0] if txt else "")
        if not m:
            return []
        day = datetime.strptime(m.group(1), "%Y-%m-%d").replace(tzinfo=UTC)
        out, cols, last = [], None, None
        for line in txt.splitlines()[1:]:
            f = line.split()
            if len(f) < 3 or not re.match(r"\d\d:\d\d:\d\d$", f[0]):
                continue
            if f[1] == "CPU":
                cols = f[2:]
                continue
            hh, mm, ss = map(int, f[0].split(":"))
            t = day + timedelta(hours=hh, minutes=mm, seconds=ss)
            if last is not None and t < last - timedelta(hours=12):  # past midnight
                day += timedelta(days=1)
                t += timedelta(days=1)
            last = t
            if cols:
                out.append((t.timestamp(), cols, f[1:]))
        return out

    def _parse_mpstat(self) -> list[tuple[float, dict[str, dict[str, float]]]]:
        by: dict[float, dict[str, dict[str, float]]] = {}
        for t, cols, f in self._mp_rows("series/mpstat.out"):
            by.setdefault(t, {})[f[0]] = dict(zip(cols, map(float, f[1:]), strict=False))
        return sorted(by.items())

    def _parse_mpstat_irq(self) -> list[tuple[float, dict[str, dict[str, float]]]]:
        by: dict[float, dict[str, dict[str, float]]] = {}
        for t, cols, f in self._mp_rows("series/mpstat_irq.out"):
            by.setdefault(t, {}).setdefault(f[0], {}).update(
                zip(cols, map(float, f[1:]), strict=False)
            )
        return sorted(by.items())

    # -- samplers: "<epoch> <path> <raw line>"
    def _sampler(self, rel: str) -> list[tuple[float, str, str]]:
        out = []
        for line in self.text(rel).splitlines():
            p = line.split(" ", 2)
            if len(p) >= 2:
                try:
                    out.append((float(p[0]), p[1], p[2] if len(p) == 3 else ""))
                except ValueError:
                    continue
        return out

    def _parse_meminfo(self) -> list[tuple[float, dict[str, float]]]:
        by: dict[float, dict[str, float]] = {}
        for t, _p, rest in self._sampler("series/meminfo.out"):
            k, _, v = rest.partition(":")
            if v.split():
                by.setdefault(t, {})[k] = float(v.split()[0])  # kB
        return sorted(by.items())

    def _parse_proc_vmstat(self) -> list[tuple[float, dict[str, float]]]:
        by: dict[float, dict[str, float]] = {}
        for t, _p, rest in self._sampler("series/proc_vmstat.out"):
            f = rest.split()
            if len(f) == 2:
                by.setdefault(t, {})[f[0]] = float(f[1])
        return sorted(by.items())

    def _parse_psi(self) -> list[tuple[float, dict[str, float]]]:
        """{'cpu.some.total': us, 'memory.some.avg10': %, ...} per sample (system only)."""
        by: dict[float, dict[str, float]] = {}
        for t, p, rest in self._sampler("series/psi.out"):
            if not p.startswith("/proc/pressure/"):
                continue
            res = p.rsplit("/", 1)[1]
            f = rest.split()
            for kv in f[1:]:
                k, _, v = kv.partition("=")
                by.setdefault(t, {})[f"{res}.{f[0]}.{k}"] = float(v)
        return sorted(by.items())

    def _parse_cgroup(self) -> dict[str, list[tuple[float, dict[str, float]]]]:
        """Per cgroup directory: samples of {file or file:key: value}."""
        by: dict[str, dict[float, dict[str, float]]] = {}
        for t, p, rest in self._sampler("series/cgroup.out"):
            d, fname = p.rsplit("/", 1)
            f = rest.split()
            vals = by.setdefault(d, {}).setdefault(t, {})
            if len(f) == 1:
                with contextlib.suppress(ValueError):
                    vals[fname] = float(f[0])
            elif len(f) == 2:
                with contextlib.suppress(ValueError):
                    vals[f"{fname}:{f[0]}"] = float(f[1])
        return {d: sorted(s.items()) for d, s in by.items()}

    def _parse_dmesg(self) -> list[tuple[float, str]]:
        return self.kernel_lines("series/dmesg.out")

    def _parse_dmesg_full(self) -> list[tuple[float, str]]:
        """The whole ring buffer at the start (kills from before the capture are there)."""
        return self.kernel_lines("snap/dmesg_full.start.out")

    def kernel_lines(self, rel: str) -> list[tuple[float, str]]:
        """(epoch, message) of each line of a ``dmesg --time-format iso`` file."""
        out = []
        for line in self.text(rel).splitlines():
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d+)([+-]\d\d):?(\d\d)\s+(.*)", line)
            if m:
                t = _utc(m.group(1), "%Y-%m-%dT%H:%M:%S") + int(m.group(2)) / 10 ** len(m.group(2))
                t -= (1 if m.group(3)[0] == "+" else -1) * (
                    abs(int(m.group(3))) * 3600 + int(m.group(4)) * 60
                )
                out.append((t, m.group(5)))
        return out

    def _parse_runqlat(self) -> list[tuple[float, float | None]]:
        """(time, p99 in us, upper bucket bound) per 10 s histogram."""
        out: list[tuple[float, float | None]] = []
        t, buckets = None, []

        def flush() -> None:
            if t is not None:
                out.append((t, _hist_pct(buckets, 0.99)))

        for line in self.text("series/bpf_runqlat.out").splitlines():
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z$", line.strip())
            if m:
                flush()
                t, buckets = _utc(m.group(1), "%Y-%m-%dT%H:%M:%S"), []
                continue
            m = re.match(r"\[([\d.]+[KMG]?)(?:,\s*([\d.]+[KMG]?))?[)\]]\s+(\d+)", line.strip())
            if m and t is not None:
                lo = _num(m.group(1))
                hi = _num(m.group(2)) if m.group(2) else lo + 1
                buckets.append((lo, hi, int(m.group(3))))
        flush()
        return out

    def _parse_limits(self) -> dict[str, str]:
        out = {}
        for line in self.text("snap/cgroup_limits.start.out").splitlines():
            p, _, v = line.partition(" ")
            out[p] = v.strip()
        return out

    def stamps(self, rel: str) -> list[float]:
        """Sample times of one collector file (for gaps)."""
        if rel == "vmstat":
            return [t for t, _ in self.get("vmstat")]
        if rel == "iostat":
            return [t for t, _ in self.get("iostat")]
        if rel == "mpstat":
            return [t for t, _ in self.get("mpstat")]
        if rel in ("psi", "meminfo", "proc_vmstat", "cgroup"):
            return sorted({t for t, _p, _r in self._sampler(f"series/{rel}.out")})
        if rel == "pidstat":
            ts = set()
            for line in self.text("series/pidstat.out").splitlines():
                f = line.split()
                if f and f[0].isdigit() and len(f[0]) >= 9:
                    ts.add(float(f[0]))
            return sorted(ts)
        if rel == "sar":  # the -w section (proc/s cswch/s): one row per report
            txt = self.text("series/sar.out")
            m = re.search(r"\s(\d{4}-\d\d-\d\d)\s", txt.split("\n", 1)[0] if txt else "")
            if not m:
                return []
            day = _utc(m.group(1), "%Y-%m-%d")
            out, want, last = [], False, None
            for line in txt.splitlines()[1:]:
                f = line.split()
                if len(f) >= 3 and re.match(r"\d\d:\d\d:\d\d$", f[0]):
                    if f[1] == "proc/s":
                        want = True
                        continue
                    if want:
                        hh, mi, ss = map(int, f[0].split(":"))
                        t = day + hh * 3600 + mi * 60 + ss
                        if last is not None and t < last - 43200:
                            day += 86400
                            t += 86400
                        out.append(t)
                        last, want = t, False
            return out
        return []


def _utc(s: str, fmt: str) -> float:
    return datetime.strptime(s, fmt).replace(tzinfo=UTC).timestamp()


def _tzoff(s: str) -> float:
    sign = 1 if s[0] == "+" else -1
    return sign * (int(s[1:3]) * 3600 + int(s[3:5]) * 60)


def _num(s: str) -> float:
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}
    return float(s[:-1]) * mult[s[-1]] if s[-1] in mult else float(s)


def _hist_pct(buckets: list[tuple[float, float, int]], q: float) -> float | None:
    n = sum(c for *_, c in buckets)
    if not n:
        return None
    acc = 0
    for _lo, hi, c in buckets:
        acc += c
        if acc >= q * n:
            return hi
    return buckets[-1][1]


# ------------------------------------------------------------------ window helpers
def inside(
    samples: list[tuple[float, Any]], a: float, b: float, iv: float
) -> list[tuple[float, Any]]:
    """Interval-averaged samples (stamped at the end of their interval) overlapping [a, b]."""
    return [(t, v) for t, v in samples if t > a and t - iv < b]


def in_windows(
    samples: list[tuple[float, Any]], wins: list[tuple[float, float]], iv: float
) -> list[tuple[float, Any]]:
    out = []
    for a, b in wins:
        out += [(t, v) for t, v in samples if t - iv >= a and t <= b]
    return out


def delta(
    samples: list[tuple[float, dict[str, float]]], key: str, a: float, b: float
) -> tuple[float, float] | None:
    """(increase of a counter, seconds) between the last sample <= a and the first >= b."""
    ts = [t for t, _ in samples]
    i = bisect_right(ts, a) - 1
    j = bisect_left(ts, b)
    if i < 0:
        i = 0
    if j >= len(ts):
        j = len(ts) - 1
    if j <= i:
        return None
    v0, v1 = samples[i][1].get(key), samples[j][1].get(key)
    if v0 is None or v1 is None:
        return None
    return v1 - v0, ts[j] - ts[i]


def med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def mx(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(max(xs), 3) if xs else None


def mn(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(min(xs), 3) if xs else None


def r3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def rate_series(
    samples: list[tuple[float, dict[str, float]]], key: str
) -> list[tuple[float, float]]:
    """Per-second rate of a counter between consecutive samples, stamped at the later one."""
    out = []
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if key in v0 and key in v1 and t1 > t0:
            out.append((t1, (v1[key] - v0[key]) / (t1 - t0)))
    return out


def sampled_inside(samples: list[tuple[float, float]], a: float, b: float) -> list[float]:
    return [v for t, v in samples if a < t <= b + 1.5]


# ------------------------------------------------------------------ per-kind evidence
def cgroup_dir(inc: dict[str, Any], ctl: str) -> str | None:
    for c in inc.get("cgroup") or []:
        if f"/sys/fs/cgroup/{ctl}/" in c:
            return c
    return None


def obs_throttle(
    b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]
) -> dict[str, Any]:
    cg = cgroup_dir(inc, "cpu")
    ca = cgroup_dir(inc, "cpuacct")
    series = b.get("cgroup")
    s = series.get(cg or "", [])
    a, z = inc["start"], inc["end"]
    o: dict[str, Any] = {"cgroup": cg}
    dp = delta(s, "cpu.stat:nr_periods", a, z)
    dt = delta(s, "cpu.stat:nr_throttled", a, z)
    dtt = delta(s, "cpu.stat:throttled_time", a, z)
    if dp and dt:
        o["periods"] = dp[0]
        o["throttled_periods"] = dt[0]
        o["throttled_pct"] = r3(100 * dt[0] / dp[0]) if dp[0] else None
        o["throttled_ms_per_s"] = r3(dtt[0] / 1e6 / dtt[1]) if dtt else None
    if ca:
        du = delta(series.get(ca, []), "cpuacct.usage", a, z)
        if du:
            o["usage_pct_of_one_cpu"] = r3(100 * du[0] / 1e9 / du[1])
    # per sample shares
    per = []
    for (t0, v0), (t1, v1) in itertools.pairwise(s):
        if a < t1 and t0 < z:
            p = v1.get("cpu.stat:nr_periods", 0) - v0.get("cpu.stat:nr_periods", 0)
            th = v1.get("cpu.stat:nr_throttled", 0) - v0.get("cpu.stat:nr_throttled", 0)
            if p > 0:
                per.append(100 * th / p)
    o["per_sample_throttled_pct"] = {
        "median": med(per),
        "max": mx(per),
        "samples": len(per),
        "samples_ge_10pct": sum(1 for x in per if x >= 10),
    }
    outside = [0.0, 0.0]
    for qa, qz in quiet:
        dp2 = delta(s, "cpu.stat:nr_periods", qa, qz)
        dt2 = delta(s, "cpu.stat:nr_throttled", qa, qz)
        if dp2 and dt2:
            outside[0] += dp2[0]
            outside[1] += dt2[0]
    o["quiet_periods"] = outside[0]
    o["quiet_throttled_pct"] = (
        r3(100 * outside[1] / outside[0]) if outside[0] else 0.0
    )  # no periods: idle
    lim = b.get("limits")
    if cg:
        o["limit_quota_us"] = lim.get(f"{cg}/cpu.cfs_quota_us")
        o["limit_period_us"] = lim.get(f"{cg}/cpu.cfs_period_us")
    o["visible"] = bool(o.get("throttled_periods")) and (o.get("throttled_pct") or 0) > 1 + 5 * (
        o["quiet_throttled_pct"] or 0
    )
    return o


def cpu_common(b: Bundle, a: float, z: float, quiet: list[tuple[float, float]]) -> dict[str, Any]:
    iv = b.interval
    vm = b.get("vmstat")
    vin, vq = inside(vm, a, z, iv), in_windows(vm, quiet, iv)
    mp = b.get("mpstat")
    min_, mq = inside(mp, a, z, iv), in_windows(mp, quiet, iv)
    cpus = sorted({c for _, d in mp for c in d if c != "all"}, key=int)
    o: dict[str, Any] = {
        "vmstat_r": {
            "median": med([v["r"] for _, v in vin]),
            "max": mx([v["r"] for _, v in vin]),
            "quiet_median": med([v["r"] for _, v in vq]),
        },
        "idle_pct_all": {
            "median": med([d["all"]["%idle"] for _, d in min_ if "all" in d]),
            "quiet_median": med([d["all"]["%idle"] for _, d in mq if "all" in d]),
        },
        "per_cpu_idle_median": {c: med([d[c]["%idle"] for _, d in min_ if c in d]) for c in cpus},
        "per_cpu_idle_quiet_median": {
            c: med([d[c]["%idle"] for _, d in mq if c in d]) for c in cpus
        },
    }
    psi = b.get("psi")
    d = delta(psi, "cpu.some.total", a, z)
    dq = [delta(psi, "cpu.some.total", qa, qz) for qa, qz in quiet]
    dq = [x for x in dq if x]
    o["psi_cpu_some_pct"] = r3(100 * d[0] / 1e6 / d[1]) if d else None
    o["psi_cpu_some_pct_quiet"] = (
        r3(100 * sum(x[0] for x in dq) / 1e6 / sum(x[1] for x in dq)) if dq else None
    )
    rq = b.get("runqlat")
    if rq:
        # a histogram stamped T covers (T - 10, T]: those fully inside the window
        o["runqlat_p99_us"] = {
            "inside_max": mx([p for t, p in rq if t - 10 >= a - 1 and t <= z + 1]),
            "quiet_median": med([p for t, p in rq for qa, qz in quiet if t - 10 >= qa and t <= qz]),
        }
    o["vmstat_samples_inside"] = len(vin)
    return o


def obs_contention(
    b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]
) -> dict[str, Any]:
    o = cpu_common(b, inc["start"], inc["end"], quiet)
    r, rq = o["vmstat_r"]["median"], o["vmstat_r"]["quiet_median"]
    idle = o["per_cpu_idle_median"]
    idle_q = o["per_cpu_idle_quiet_median"]
    drop = any(
        idle[c] is not None and idle_q.get(c) is not None and idle_q[c] - idle[c] >= 15
        for c in idle
    )
    o["visible"] = bool(r is not None and rq is not None and (r >= rq + 2 or drop))
    return o


def disk_name(b: Bundle) -> str:
    tot: dict[str, float] = {}
    for _, d in b.get("iostat"):
        for k, v in d.items():
            if k != "_cpu":
                tot[k] = tot.get(k, 0) + v.get("wkB/s", 0) + v.get("rkB/s", 0)
    return max(tot, key=tot.get) if tot else "vda"  # type: ignore[arg-type]


def obs_io(b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]) -> dict[str, Any]:
    iv = b.interval
    a, z = inc["start"], inc["end"]
    dev = disk_name(b)
    io_ = [(t, d[dev]) for t, d in b.get("iostat") if dev in d]
    ins, q = inside(io_, a, z, iv), in_windows(io_, quiet, iv)

    def col(rows: list[tuple[float, dict[str, float]]], c: str) -> list[float]:
        return [v.get(c) for _, v in rows if c in v]  # type: ignore[misc]

    w_mb = [x / 1024 for x in col(ins, "wkB/s")]
    qw = [x / 1024 for x in col(q, "wkB/s")]
    base = med(qw) or 0
    thr = max(50.0, 5 * base)
    burst = [t - a for (t, v) in ins if v.get("wkB/s", 0) / 1024 >= thr]
    o: dict[str, Any] = {
        "device": dev,
        "write_mb_s": {"peak": mx(w_mb), "quiet_median": r3(base), "quiet_max": mx(qw)},
        "written_mb": r3(sum(w_mb) * iv),
        "read_mb_s_peak": mx([x / 1024 for x in col(ins, "rkB/s")]),
        "w_s_peak": mx(col(ins, "w/s")),
        "w_await_ms": {"max": mx(col(ins, "w_await")), "quiet_median": med(col(q, "w_await"))},
        "aqu_sz": {
            "max": mx(col(ins, "aqu-sz")),
            "median": med(col(ins, "aqu-sz")),
            "quiet_median": med(col(q, "aqu-sz")),
        },
        "util_pct": {
            "max": mx(col(ins, "%util")),
            "median": med(col(ins, "%util")),
            "quiet_median": med(col(q, "%util")),
            "samples_ge_90": sum(1 for x in col(ins, "%util") if x >= 90),
        },
        "discard_mb_peak": mx([x / 1024 for x in col(ins, "dkB/s")]),
        "burst_threshold_mb_s": r3(thr),
        "burst_samples": len(burst),
        "burst_span_s_from_start": [r3(min(burst) - iv), r3(max(burst))] if burst else None,
        "samples_inside": len(ins),
    }
    mi = b.get("meminfo")
    mi_in = [(t, v) for t, v in mi if a - iv <= t <= z + iv]
    mi_q = [v for t, v in mi for qa, qz in quiet if qa <= t <= qz]
    dirty = [(v.get("Dirty", 0) + v.get("Writeback", 0)) / 1024 for _, v in mi_in]
    o["dirty_writeback_mb"] = {
        "peak": mx(dirty),
        "quiet_median": med([(v.get("Dirty", 0) + v.get("Writeback", 0)) / 1024 for v in mi_q]),
    }
    grow = [
        (v1.get("Dirty", 0) + v1.get("Writeback", 0) - v0.get("Dirty", 0) - v0.get("Writeback", 0))
        / 1024
        / (t1 - t0)
        for (t0, v0), (t1, v1) in itertools.pairwise(mi_in)
        if t1 > t0
    ]
    o["dirty_growth_mb_s_max"] = mx(grow)
    vm = inside(b.get("vmstat"), a, z, iv)
    o["vmstat_wa_max"] = mx([v["wa"] for _, v in vm])
    o["vmstat_b_max"] = mx([v["b"] for _, v in vm])
    psi = b.get("psi")
    d = delta(psi, "io.some.total", a, z)
    o["psi_io_some_pct"] = r3(100 * d[0] / 1e6 / d[1]) if d else None
    mc = memcg_dirty_phases(b, inc)
    if mc:
        o["memcg_dirty"] = mc
    peak = o["write_mb_s"]["peak"] or 0
    o["visible"] = bool(
        peak >= thr
        or (o["dirty_growth_mb_s_max"] or 0) >= 100
        or (o["util_pct"]["max"] or 0) >= 90
        or (o["w_s_peak"] or 0) >= 5 * (med(col(q, "w/s")) or 1)
    )
    return o


def memcg_dirty_phases(b: Bundle, inc: dict[str, Any]) -> dict[str, Any] | None:
    """The writer's own memory cgroup (only it writes there): dirty + writeback pages over
    time, sampled each interval. Gives the page-cache fill and the writeback to disk
    without the other writers of the machine mixed in (as /proc/meminfo Dirty has them)."""
    cg = cgroup_dir(inc, "memory")
    s = b.get("cgroup").get(cg or "", [])
    a, z = inc["start"], inc["end"]
    pts = [
        (t, (v.get("memory.stat:dirty", 0) + v.get("memory.stat:writeback", 0)) / 2**20)
        for t, v in s
        if a - 2 * b.interval <= t <= z + 2 * b.interval
    ]
    if not pts or max(v for _, v in pts) < 10:
        return None
    peak = max(v for _, v in pts)
    t_peak = next(t for t, v in pts if v == peak)
    rise = next((t for t, v in pts if v >= 0.05 * peak), None)
    full = next((t for t, v in pts if v >= 0.95 * peak), None)
    last_high = max((t for t, v in pts if v >= 0.95 * peak), default=None)
    gone = next((t for t, v in pts if t > t_peak and v <= 0.05 * peak), None)
    return {
        "cgroup": cg,
        "peak_mb": r3(peak),
        "first_sample_ge_5pct_s": r3(rise - a) if rise else None,
        "first_sample_ge_95pct_s": r3(full - a) if full else None,
        "last_sample_ge_95pct_s": r3(last_high - a) if last_high else None,
        "first_sample_le_5pct_after_peak_s": r3(gone - a) if gone else None,
        "note": "offsets from the incident start; samples every interval (the change happened between "
        "the sample before and the one given)",
    }


def mem_common(b: Bundle, a: float, z: float, quiet: list[tuple[float, float]]) -> dict[str, Any]:
    pv = b.get("proc_vmstat")
    o: dict[str, Any] = {}
    keys = [
        "pgscan_kswapd",
        "pgscan_direct",
        "pgsteal_kswapd",
        "pgsteal_direct",
        "pgscan_file",
        "pgscan_anon",
        "allocstall_normal",
        "allocstall_movable",
        "workingset_refault_file",
        "workingset_activate_file",
        "pgmajfault",
        "pswpin",
        "pswpout",
        "oom_kill",
        "compact_stall",
        "drop_pagecache",
    ]
    for k in keys:
        d = delta(pv, k, a, z)
        if d and d[0]:
            o[f"{k}_per_s"] = r3(d[0] / d[1])
            o[f"{k}_total"] = d[0]
    qrate = {}
    for k in ("pgscan_kswapd", "pgscan_direct", "pgscan_file", "workingset_refault_file"):
        ds = [delta(pv, k, qa, qz) for qa, qz in quiet]
        ds = [x for x in ds if x]
        if ds:
            qrate[k] = r3(sum(x[0] for x in ds) / sum(x[1] for x in ds))
    o["quiet_per_s"] = qrate
    # when reclaim ran: samples whose pgscan (kswapd + direct + file/anon) rate is high
    scan = []
    for (t0, v0), (t1, v1) in itertools.pairwise(pv):
        if a - 1 < t1 <= z + 1.5 and t1 > t0:
            n = sum(v1.get(k, 0) - v0.get(k, 0) for k in ("pgscan_kswapd", "pgscan_direct"))
            scan.append((t1, n / (t1 - t0)))
    busy = [t for t, r in scan if r >= 1000]
    o["reclaim_samples_ge_1000_pages_s"] = len(busy)
    o["reclaim_span_s_from_start"] = [r3(min(busy) - a), r3(max(busy) - a)] if busy else None
    o["pgscan_per_s_max"] = mx([r for _, r in scan])
    psi = b.get("psi")
    for kind in ("some", "full"):
        d = delta(psi, f"memory.{kind}.total", a, z)
        o[f"psi_mem_{kind}_pct"] = r3(100 * d[0] / 1e6 / d[1]) if d else None
    o["psi_mem_some_avg10_max"] = mx(
        [v.get("memory.some.avg10") for t, v in psi if a <= t <= z + 10]
    )
    mi = b.get("meminfo")
    mi_in = [v for t, v in mi if a - 1 <= t <= z + 1]
    if mi_in:
        o["mem_available_mb"] = {
            "start": r3(mi_in[0]["MemAvailable"] / 1024),
            "min": mn([v["MemAvailable"] / 1024 for v in mi_in]),
        }
        o["mem_free_mb_min"] = mn([v["MemFree"] / 1024 for v in mi_in])
        o["cached_mb"] = {
            "start": r3(mi_in[0]["Cached"] / 1024),
            "min": mn([v["Cached"] / 1024 for v in mi_in]),
            "end": r3(mi_in[-1]["Cached"] / 1024),
        }
        o["anon_mb_max"] = mx([v.get("AnonPages", 0) / 1024 for v in mi_in])
        o["swap_used_mb_max"] = mx(
            [(v.get("SwapTotal", 0) - v.get("SwapFree", 0)) / 1024 for v in mi_in]
        )
    return o


def memcg_obs(b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]) -> dict[str, Any]:
    cg = cgroup_dir(inc, "memory")
    s = b.get("cgroup").get(cg or "", [])
    a, z = inc["start"], inc["end"]
    o: dict[str, Any] = {"cgroup": cg}
    lim = b.get("limits").get(f"{cg}/memory.limit_in_bytes")
    o["limit_mb"] = r3(float(lim) / 2**20) if lim and float(lim) < 2**62 else None
    d = delta(s, "memory.failcnt", a, z)
    if d:
        o["failcnt_increase"] = d[0]
        o["failcnt_per_s"] = r3(d[0] / d[1])
    d = delta(s, "memory.oom_control:oom_kill", a, z + 5)
    o["memcg_oom_kill_increase"] = d[0] if d else None
    us = [v.get("memory.usage_in_bytes") for t, v in s if a - 1 <= t <= z + 1]
    o["usage_mb_max"] = mx([u / 2**20 for u in us if u is not None])
    if o["limit_mb"] and o["usage_mb_max"]:
        o["usage_max_pct_of_limit"] = r3(100 * o["usage_mb_max"] / o["limit_mb"])
    for k in ("memory.stat:cache", "memory.stat:rss", "memory.stat:swap"):
        v = [x.get(k) for t, x in s if a - 1 <= t <= z + 1]
        o[k.split(":")[1] + "_mb_max"] = mx([x / 2**20 for x in v if x is not None])
    d = delta(s, "memory.stat:total_pgmajfault", a, z)
    o["memcg_pgmajfault_increase"] = d[0] if d else None
    qf = [delta(s, "memory.failcnt", qa, qz) for qa, qz in quiet]
    o["quiet_failcnt_increase"] = sum(x[0] for x in qf if x)
    # the first sample whose failcnt is above the one before: the limit's first hit
    fc = [(t, v["memory.failcnt"]) for t, v in s if "memory.failcnt" in v and a - 1 <= t <= z + 1]
    hit = next((t1 for (_, v0), (t1, v1) in itertools.pairwise(fc) if v1 > v0), None)
    o["limit_first_hit"] = round(hit, 3) if hit is not None else None
    o["limit_first_hit_offset_s"] = r3(hit - a) if hit is not None else None
    return o


def obs_memory(b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]) -> dict[str, Any]:
    o = mem_common(b, inc["start"], inc["end"], quiet)
    if cgroup_dir(inc, "memory") and "reclaim" not in (cgroup_dir(inc, "memory") or ""):
        o["memcg"] = memcg_obs(b, inc, quiet)
    kq = o["quiet_per_s"]
    host = (
        o.get("pgscan_kswapd_per_s", 0) > 5 * (kq.get("pgscan_kswapd") or 0) + 100
        or o.get("pgscan_direct_per_s", 0) > 100
        or (o.get("psi_mem_some_pct") or 0) >= 1
    )
    memcg = bool(o.get("memcg", {}).get("failcnt_increase"))
    o["visible"] = bool(host or memcg)
    return o


def obs_oom(b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]) -> dict[str, Any]:
    a, z = inc["start"], inc["end"]
    o = memcg_obs(b, inc, quiet)
    cgname = (cgroup_dir(inc, "memory") or "").rsplit("/", 1)[-1]
    kills = [
        (t, m)
        for t, m in b.get("dmesg")
        if "Killed process" in m or ("oom-kill:" in m and cgname and cgname in m)
    ]
    mine = [(t, m) for t, m in kills if a - 5 <= t <= z + 30]
    o["dmesg_lines"] = [
        {"t": round(t, 3), "offset_from_start_s": r3(t - a), "line": m[:300]} for t, m in mine
    ]
    killed = [t for t, m in mine if "Killed process" in m]
    o["kill_time"] = round(killed[0], 3) if killed else None
    o["kill_offset_from_start_s"] = r3(killed[0] - a) if killed else None
    d = delta(b.get("proc_vmstat"), "oom_kill", a, z + 5)
    o["proc_vmstat_oom_kill_increase"] = d[0] if d else None
    o["visible"] = bool(killed) or bool(o.get("memcg_oom_kill_increase"))
    return o


def obs_swap(b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]) -> dict[str, Any]:
    iv = b.interval
    a, z = inc["start"], inc["end"]
    vm = b.get("vmstat")
    vin, vq = inside(vm, a, z, iv), in_windows(vm, quiet, iv)
    o: dict[str, Any] = {
        "vmstat_si_kb_s": {
            "max": mx([v["si"] for _, v in vin]),
            "mean": r3(statistics.mean([v["si"] for _, v in vin])) if vin else None,
            "quiet_max": mx([v["si"] for _, v in vq]),
        },
        "vmstat_so_kb_s": {
            "max": mx([v["so"] for _, v in vin]),
            "mean": r3(statistics.mean([v["so"] for _, v in vin])) if vin else None,
            "quiet_max": mx([v["so"] for _, v in vq]),
        },
        "samples_si_plus_so_ge_1mib_s": sum(1 for _, v in vin if v["si"] + v["so"] >= 1024),
    }
    pv = b.get("proc_vmstat")
    for k in ("pswpin", "pswpout"):
        d = delta(pv, k, a, z)
        o[f"{k}_mb"] = r3(d[0] * 4 / 1024) if d else None
    o.update(
        {
            k: v
            for k, v in mem_common(b, a, z, quiet).items()
            if k.startswith(("swap_used", "pgmajfault", "psi_mem"))
        }
    )
    if cgroup_dir(inc, "memory"):
        mc = memcg_obs(b, inc, quiet)
        o["memcg"] = {
            k: mc.get(k)
            for k in (
                "cgroup",
                "limit_mb",
                "usage_mb_max",
                "swap_mb_max",
                "rss_mb_max",
                "failcnt_increase",
            )
        }
    o["visible"] = (o.get("pswpin_mb") or 0) + (o.get("pswpout_mb") or 0) >= 10
    return o


GAP_FILES = (
    "vmstat",
    "iostat",
    "mpstat",
    "pidstat",
    "sar",
    "psi",
    "cgroup",
    "meminfo",
    "proc_vmstat",
)


def obs_gap(b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]) -> dict[str, Any]:
    a, z = inc["start"], inc["end"]
    iv = b.interval
    o: dict[str, Any] = {"largest_gap_s": {}, "gap_span": {}}
    for f in GAP_FILES:
        ts = b.stamps(f)
        best, span = 0.0, None
        for t0, t1 in itertools.pairwise(ts):
            if t1 >= a and t0 <= z + iv and t1 - t0 > best:
                best, span = t1 - t0, [round(t0 - a, 3), round(t1 - a, 3)]
        o["largest_gap_s"][f] = r3(best) if ts else None
        o["gap_span"][f] = span
    o["collectors_with_gap_gt_2x_interval"] = [
        f for f, g in o["largest_gap_s"].items() if g and g > 2 * iv + 0.5
    ]
    target = inc["params"]["stopped_s"]
    o["visible"] = any((g or 0) >= 0.8 * target for g in o["largest_gap_s"].values())
    return o


def obs_irq(b: Bundle, inc: dict[str, Any], quiet: list[tuple[float, float]]) -> dict[str, Any]:
    iv = b.interval
    a, z = inc["start"], inc["end"]
    mp = b.get("mpstat")
    ins, q = inside(mp, a, z, iv), in_windows(mp, quiet, iv)
    cpus = sorted({c for _, d in mp for c in d if c != "all"}, key=int)
    o: dict[str, Any] = {"soft_pct": {}, "irq_pct": {}, "soft_plus_irq_pct": {}}
    for c in cpus:
        o["soft_pct"][c] = {
            "median": med([d[c]["%soft"] for _, d in ins if c in d]),
            "max": mx([d[c]["%soft"] for _, d in ins if c in d]),
            "quiet_median": med([d[c]["%soft"] for _, d in q if c in d]),
        }
        o["irq_pct"][c] = {"max": mx([d[c]["%irq"] for _, d in ins if c in d])}
        o["soft_plus_irq_pct"][c] = {
            "max": mx([d[c]["%soft"] + d[c]["%irq"] for _, d in ins if c in d])
        }
    o["max_soft_any_cpu"] = mx([d[c]["%soft"] for _, d in ins for c in cpus if c in d])
    irq = b.get("mpstat_irq")
    rx = {}
    for c in cpus:
        v = [d[c].get("NET_RX/s") for t, d in irq if c in d and t - 10 >= a - 1 and t <= z + 1]
        vq = [
            d[c].get("NET_RX/s")
            for t, d in irq
            if c in d
            for qa, qz in quiet
            if t - 10 >= qa and t <= qz
        ]
        rx[c] = {"inside_max": mx(v), "quiet_median": med(vq)}
    o["net_rx_per_s"] = rx
    base = max((o["soft_pct"][c]["quiet_median"] or 0) for c in cpus) if cpus else 0
    o["visible"] = (o["max_soft_any_cpu"] or 0) >= 3 * base + 10
    return o


KIND = {
    "cpu_throttle": obs_throttle,
    "cpu_contention": obs_contention,
    "checkpoint_stall": obs_io,
    "io_saturation": obs_io,
    "memory_pressure": obs_memory,
    "oom_kill": obs_oom,
    "swap_activity": obs_swap,
    "sampling_gap": obs_gap,
    "irq_hotspot": obs_irq,
}


def quiet_summary(b: Bundle, w: dict[str, float]) -> dict[str, Any]:
    iv = b.interval
    a, z = w["start"], w["end"]
    vm = in_windows(b.get("vmstat"), [(a, z)], iv)
    dev = disk_name(b)
    io_ = [(t, d[dev]) for t, d in b.get("iostat") if dev in d]
    ins = in_windows(io_, [(a, z)], iv)
    mp = in_windows(b.get("mpstat"), [(a, z)], iv)
    soft = [d[c]["%soft"] for _, d in mp for c in d if c != "all"]
    return {
        "vmstat_r_median": med([v["r"] for _, v in vm]),
        "vmstat_r_max": mx([v["r"] for _, v in vm]),
        "idle_pct_all_median": med([d["all"]["%idle"] for _, d in mp if "all" in d]),
        "write_mb_s_median": med([v.get("wkB/s", 0) / 1024 for _, v in ins]),
        "write_mb_s_max": mx([v.get("wkB/s", 0) / 1024 for _, v in ins]),
        "util_pct_max": mx([v.get("%util", 0) for _, v in ins]),
        "max_soft_pct_any_cpu": mx(soft),
        "si_so_kb_s_max": mx([v["si"] + v["so"] for _, v in vm]),
    }


# ------------------------------------------------------------------ main
def headline(inc: dict[str, Any]) -> str:
    o = inc.get("observed") or {}
    k = inc["kind"]
    if k == "cpu_throttle":
        return (
            f"throttled {o.get('throttled_pct')}% of {o.get('periods')} periods (quiet "
            f"{o.get('quiet_throttled_pct')}%), {o.get('throttled_ms_per_s')} ms/s, usage {o.get('usage_pct_of_one_cpu')}% CPU"
        )
    if k == "cpu_contention":
        return (
            f"r median {o['vmstat_r']['median']} max {o['vmstat_r']['max']} (quiet {o['vmstat_r']['quiet_median']}), "
            f"idle per CPU {o['per_cpu_idle_median']} (quiet {o['per_cpu_idle_quiet_median']}), "
            f"CPU PSI {o.get('psi_cpu_some_pct')}% (quiet {o.get('psi_cpu_some_pct_quiet')}%)"
        )
    if k in ("checkpoint_stall", "io_saturation"):
        return (
            f"write peak {o['write_mb_s']['peak']} MB/s (quiet median {o['write_mb_s']['quiet_median']}), "
            f"{o['written_mb']} MB, w_await max {o['w_await_ms']['max']} ms, aqu-sz max {o['aqu_sz']['max']}, "
            f"util max {o['util_pct']['max']}% ({o['util_pct']['samples_ge_90']} s >= 90), "
            f"Dirty+WB peak {o['dirty_writeback_mb']['peak']} MB, bursts at {o['burst_span_s_from_start']}"
        )
    if k == "memory_pressure" and not o.get("memcg"):
        return (
            f"host reclaim: pgscan kswapd {o.get('pgscan_kswapd_total')} direct {o.get('pgscan_direct_total')} pages "
            f"({o.get('reclaim_samples_ge_1000_pages_s')} samples >= 1000/s, span {o.get('reclaim_span_s_from_start')} s), "
            f"allocstall {o.get('allocstall_normal_total')}, PSI mem some {o.get('psi_mem_some_pct')}% full "
            f"{o.get('psi_mem_full_pct')}%, Cached {o.get('cached_mb')} MB, MemAvailable min "
            f"{o.get('mem_available_mb', {}).get('min')} MB"
        )
    if k == "memory_pressure":
        mc = o.get("memcg") or {}
        return (
            f"failcnt +{mc.get('failcnt_increase')} ({mc.get('failcnt_per_s')}/s), usage max {mc.get('usage_mb_max')} MB"
            f" of {mc.get('limit_mb')}; PSI mem some {o.get('psi_mem_some_pct')}% full {o.get('psi_mem_full_pct')}%, "
            f"pgscan_kswapd {o.get('pgscan_kswapd_per_s')}/s direct {o.get('pgscan_direct_per_s')}/s, "
            f"refault_file {o.get('workingset_refault_file_per_s')}/s, MemAvailable min {o.get('mem_available_mb', {}).get('min')} MB"
        )
    if k == "oom_kill":
        return (
            f"kill at +{o.get('kill_offset_from_start_s')} s, memcg oom_kill +{o.get('memcg_oom_kill_increase')}, "
            f"failcnt +{o.get('failcnt_increase')}, usage max {o.get('usage_mb_max')} MB of {o.get('limit_mb')}"
        )
    if k == "swap_activity":
        return (
            f"so max {o['vmstat_so_kb_s']['max']} kB/s, si max {o['vmstat_si_kb_s']['max']} kB/s, "
            f"pswpout {o.get('pswpout_mb')} MB, pswpin {o.get('pswpin_mb')} MB, "
            f"{o['samples_si_plus_so_ge_1mib_s']} samples >= 1 MiB/s"
        )
    if k == "sampling_gap":
        g = {f: v for f, v in o["largest_gap_s"].items() if v and v > 1.5}
        return f"largest gaps (s): {g}"
    if k == "irq_hotspot":
        return (
            f"%soft per CPU median/max { ({c: (v['median'], v['max']) for c, v in o['soft_pct'].items()}) }, "
            f"quiet medians { ({c: v['quiet_median'] for c, v in o['soft_pct'].items()}) }"
        )
    return ""


def observe(bundle_path: Path, truth_path: Path, write: bool) -> dict[str, Any]:
    b = Bundle(bundle_path)
    t = json.loads(truth_path.read_text())
    quiet = [(w["start"], w["end"]) for w in t.get("quiet_windows", [])]
    for inc in t["incidents"]:
        fn = KIND.get(inc["kind"])
        inc["observed"] = fn(b, inc, quiet) if fn else {"note": "no observer for this kind"}
        inc["observed"]["computed_by"] = "samples/real/observe.py (raw files, no analyzer code)"
    for w in t.get("quiet_windows", []):
        w["observed"] = quiet_summary(b, w)
    if write:
        truth_path.write_text(json.dumps(t, indent=1) + "\n")
    cs = t["made_with"]["capture_start_epoch"]
    print(
        f"== {t['scenario']} ({bundle_path.name}, {bundle_path.stat().st_size // 1024} KiB, "
        f"interval {b.interval:g} s, {len(t['incidents'])} incidents, {len(quiet)} quiet windows)"
    )
    for inc in t["incidents"]:
        o = inc["observed"]
        print(
            f"  {inc['id']:26s} {inc['kind']:16s} +{inc['start'] - cs:6.1f}s {inc['end'] - inc['start']:6.1f}s "
            f"visible={o.get('visible')}  {headline(inc)}"
        )
    for w in t.get("quiet_windows", []):
        q = w["observed"]
        print(
            f"  quiet +{w['start'] - cs:6.1f}..+{w['end'] - cs:6.1f}s  r med {q['vmstat_r_median']} max {q['vmstat_r_max']}, "
            f"idle {q['idle_pct_all_median']}%, write med {q['write_mb_s_median']} max {q['write_mb_s_max']} MB/s, "
            f"util max {q['util_pct_max']}%, soft max {q['max_soft_pct_any_cpu']}%, si+so max {q['si_so_kb_s_max']}"
        )
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", nargs="?")
    ap.add_argument("truth", nargs="?")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--dir", default=str(HERE))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    pairs = []
    if a.all:
        for tp in sorted(Path(a.dir).glob("*.truth.json")):
            pairs.append((tp.with_name(tp.name.replace(".truth.json", ".tgz")), tp))
    elif a.bundle:
        bp = Path(a.bundle)
        tp = Path(a.truth) if a.truth else bp.with_name(bp.name.replace(".tgz", ".truth.json"))
        pairs.append((bp, tp))
    else:
        ap.print_help()
        return 2
    bad = 0
    for bp, tp in pairs:
        t = observe(bp, tp, not a.no_write)
        bad += sum(1 for i in t["incidents"] if not (i.get("observed") or {}).get("visible"))
    if bad:
        print(f"{bad} incident(s) not visible in their data", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
