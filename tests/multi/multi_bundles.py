"""Small capture-format bundles for the multi-bundle tests (diff, fleet, query).

Writes a bundle directory the way hindsight-capture.sh lays it out (manifest.json,
series/*.out in the real tool formats, snap/*.start.out), with per-second values the
test chooses: GPU utilisation per GPU, cgroup CPU throttling, I/O latency, CPU PSI. The
values are exact (no noise) unless ``jitter`` is set, so tests can assert numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)
Curve = Callable[[int], float]  # second index -> value


def const(v: float) -> Curve:
    return lambda _t: v


@dataclass
class HostSpec:
    hostname: str = "gpu01"
    seconds: int = 120
    start: datetime = START
    cpus: int = 16
    gpus: int = 2
    gpu_util: Curve = field(default_factory=lambda: const(90.0))
    gpu_util_per_gpu: Callable[[int, int], float] | None = None  # (t, gpu) -> %
    throttled_pct: Curve = field(default_factory=lambda: const(0.0))
    sm_clock_mhz: Curve = field(default_factory=lambda: const(1980.0))
    w_await_ms: Curve = field(default_factory=lambda: const(1.0))
    psi_cpu_pct: Curve = field(default_factory=lambda: const(1.0))
    runq: Curve = field(default_factory=lambda: const(4.0))
    cpu_max: str = "max 100000"
    sysctls: dict[str, str] = field(
        default_factory=lambda: {"vm.dirty_ratio": "20", "vm.swappiness": "60"}
    )
    thp_enabled: str = "always [madvise] never"
    policy: str = "SCHED_OTHER"
    affinity: str = "0-15"
    ntp: dict[str, object] | None = field(
        default_factory=lambda: {"source": "chronyc", "synchronized": True, "offset_s": 0.0004}
    )
    cgroup: str = "train.slice"


def _epoch(t: datetime) -> float:
    return t.timestamp()


def write_bundle(root: Path, spec: HostSpec) -> Path:
    """Write the bundle directory ``root/hindsight-<host>-<time>`` and return it."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", spec.hostname)[:64]  # as the capture names it
    name = f"hindsight-{safe}-{spec.start:%Y%m%dT%H%M%SZ}"
    b = root / name
    (b / "series").mkdir(parents=True)
    (b / "snap").mkdir()
    secs = range(spec.seconds)
    times = [spec.start + timedelta(seconds=i + 1) for i in secs]
    _vmstat(b, spec, times)
    _dmon(b, spec, times)
    _cgroup(b, spec, times)
    _psi(b, spec, times)
    _iostat(b, spec, times)
    _snaps(b, spec)
    _manifest(b, spec)
    return b


def _vmstat(b: Path, spec: HostSpec, times: Sequence[datetime]) -> None:
    lines = [
        "--procs-- -----------------------memory---------------------- ---swap-- -----io---- -system-- ----------cpu---------- -----timestamp-----",
        "   r    b         swpd         free         buff        cache   si   so    bi    bo   in   cs  us  sy  id  wa  st  gu                 UTC",
    ]
    for i, t in enumerate(times):
        r = round(spec.runq(i))
        lines.append(
            f"{r:4d} {0:4d} {0:12d} {100000000:12d} {25000:12d} {2000000:12d} {0:4d} {0:4d} {0:5d} {100:5d} {1000:4d} {2000:4d}  40  10  50   0   0   0 {t:%Y-%m-%d %H:%M:%S}"
        )
    (b / "series" / "vmstat.out").write_text("\n".join(lines) + "\n")


def _dmon(b: Path, spec: HostSpec, times: Sequence[datetime]) -> None:
    lines = [
        "#Date        Time         gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk  pviol  tviol     fb   bar1   ccpm  sbecc  dbecc    pci  rxpci  txpci ",
        "#YYYYMMDD    HH:MM:SS     Idx      W      C      C      %      %      %      %      %      %    MHz    MHz      %   bool     MB     MB     MB   errs   errs   errs   MB/s   MB/s ",
    ]
    for i, t in enumerate(times):
        for g in range(spec.gpus):
            u = spec.gpu_util_per_gpu(i, g) if spec.gpu_util_per_gpu else spec.gpu_util(i)
            lines.append(
                f" {t:%Y%m%d}    {t:%H:%M:%S}  {g:6d}  {400:5d}  {55:5d}  {60:5d}  {round(u):5d}  {30:5d}      0      0      0      0   3201  {round(spec.sm_clock_mhz(i)):5d}      0      0  40000      1      0      0      0      0      0      0 "
            )
    (b / "series" / "nvidia_dmon.out").write_text("\n".join(lines) + "\n")


def _cgroup(b: Path, spec: HostSpec, times: Sequence[datetime]) -> None:
    path = f"/sys/fs/cgroup/{spec.cgroup}/cpu.stat"
    periods = throttled = thr_us = usage = 0
    lines = []
    for i, t in enumerate(times):
        e = _epoch(t)
        if i:
            periods += 10
            throttled += round(spec.throttled_pct(i) / 10)
            thr_us += round(spec.throttled_pct(i) * 10_000)  # share of the second, µs
            usage += 4_000_000
        for k, v in (
            ("usage_usec", usage),
            ("user_usec", usage * 3 // 4),
            ("system_usec", usage // 4),
            ("nr_periods", periods),
            ("nr_throttled", throttled),
            ("throttled_usec", thr_us),
        ):
            lines.append(f"{e:.6f} {path} {k} {v}")
    (b / "series" / "cgroup.out").write_text("\n".join(lines) + "\n")


def _psi(b: Path, spec: HostSpec, times: Sequence[datetime]) -> None:
    totals = {"cpu": 0, "io": 0, "memory": 0}
    lines = []
    for i, t in enumerate(times):
        e = _epoch(t)
        if i:
            totals["cpu"] += round(spec.psi_cpu_pct(i) * 10_000)
        for res in ("cpu", "memory", "io"):
            some = totals[res]
            avg = spec.psi_cpu_pct(i) if res == "cpu" else 0.0
            lines.append(
                f"{e:.6f} /proc/pressure/{res} some avg10={avg:.2f} avg60=0.00 avg300=0.00 total={some}"
            )
            lines.append(
                f"{e:.6f} /proc/pressure/{res} full avg10=0.00 avg60=0.00 avg300=0.00 total=0"
            )
    (b / "series" / "psi.out").write_text("\n".join(lines) + "\n")


def _iostat(b: Path, spec: HostSpec, times: Sequence[datetime]) -> None:
    head = "Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util"
    out = [
        f"Linux 6.8.0-49-generic ({spec.hostname}) \t{spec.start:%Y-%m-%d} \t_x86_64_\t({spec.cpus} CPU)",
        "",
    ]
    for i, t in enumerate(times):
        w = spec.w_await_ms(i)
        out += [
            "",
            f"{t:%Y-%m-%dT%H:%M:%S}+0000",
            "avg-cpu:  %user   %nice %system %iowait  %steal   %idle",
            "          40.00    0.00   10.00    0.00    0.00   50.00",
            "",
            head,
            f"nvme0n1          0.00      0.00     0.00   0.00    0.00     0.00  100.00  51200.00     0.00   0.00 {w:7.2f}   512.00    0.00      0.00     0.00   0.00    0.00     0.00    0.00    0.00    1.00  20.00",
            "",
        ]
    (b / "series" / "iostat.out").write_text("\n".join(out) + "\n")


def _snaps(b: Path, spec: HostSpec) -> None:
    s = b / "snap"
    cg = f"/sys/fs/cgroup/{spec.cgroup}"
    s.joinpath("cgroup_limits.start.out").write_text(
        f"{cg}/cpu.max {spec.cpu_max}\n{cg}/memory.max max\n"
    )
    s.joinpath("sysctl.start.out").write_text(
        "".join(f"{k} = {v}\n" for k, v in spec.sysctls.items())
    )
    s.joinpath("thp.start.out").write_text(
        f"/sys/kernel/mm/transparent_hugepage/enabled {spec.thp_enabled}\n"
    )
    s.joinpath("pids.start.out").write_text(
        "4242 cmdline python train.py --epochs 3\n"
        "4242 status Name:\tpython\n"
        f"4242 chrt pid 4242's current scheduling policy: {spec.policy}\n"
        "4242 chrt pid 4242's current scheduling priority: 0\n"
        f"4242 taskset pid 4242's current affinity list: {spec.affinity}\n"
    )
    e = _epoch(spec.start)
    ntp = spec.ntp or {"source": "none", "synchronized": None, "offset_s": None}
    s.joinpath("clock.start.out").write_text(
        f"epoch_s={e:.6f}\nuptime_s=5000.00\nboot_epoch_s={e - 5000:.3f}\n"
        f"utc={spec.start:%Y-%m-%dT%H:%M:%SZ}\nlocal={spec.start:%Y-%m-%dT%H:%M:%S}+0000\n"
        "timezone=Etc/UTC\nutc_offset=+0000\nclocksource=tsc\n"
        f"ntp_source={ntp['source']}\nntp_synchronized={_js(ntp['synchronized'])}\n"
        f"ntp_offset_s={_js(ntp['offset_s'])}\n"
    )


def _js(v: object) -> str:
    return json.dumps(v)


def _manifest(b: Path, spec: HostSpec) -> None:
    end = spec.start + timedelta(seconds=spec.seconds)
    ntp = spec.ntp or {"source": "none", "synchronized": None, "offset_s": None}
    doc = {
        "format": "hindsight-bundle",
        "format_version": 1,
        "capture_version": "0.1.0",
        "host": {
            "hostname": spec.hostname,
            "kernel": "6.8.0-49-generic",
            "os": "Ubuntu 24.04.1 LTS",
            "arch": "x86_64",
            "cpus": spec.cpus,
        },
        "start_utc": f"{spec.start:%Y-%m-%dT%H:%M:%SZ}",
        "end_utc": f"{end:%Y-%m-%dT%H:%M:%SZ}",
        "updated_utc": f"{end:%Y-%m-%dT%H:%M:%SZ}",
        "interval_s": 1,
        "duration_s": spec.seconds,
        "timezone": "Etc/UTC",
        "utc_offset": "+0000",
        "clock": {
            "start_epoch_s": _epoch(spec.start),
            "start_uptime_s": 5000.0,
            "boot_epoch_s": _epoch(spec.start) - 5000,
            "end_epoch_s": _epoch(end),
            "end_uptime_s": 5000.0 + spec.seconds,
            "clocksource": "tsc",
            "ntp": ntp,
        },
        "user": {"uid": 0, "root": True},
        "interrupted": False,
        "complete": True,
        "stop_reason": "duration",
        "targets": {
            "pids": ["4242"],
            "pids_auto": False,
            "cgroups": [f"/sys/fs/cgroup/{spec.cgroup}"],
        },
        "collectors": [],
    }
    (b / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")
