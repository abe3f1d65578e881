"""``manifest.json`` and ``capture.log`` exactly as ``capture/hindsight-capture.sh`` writes
them (bundle-format.md, "manifest.json"): the collectors in the script's order with
their commands, statuses, exit codes, reasons and output sizes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from analyzer.synth.common import ARCH, KERNEL, OS_NAME, Outcome, utc
from analyzer.synth.devices import procs
from analyzer.synth.model import World
from analyzer.synth.w_samplers import CGROUP
from analyzer.synth.w_snapshots import BOTH, GPU_END, GPU_START, START_ONLY

SERIES_TOOLS = {
    "vmstat": "vmstat",
    "iostat": "iostat",
    "iostat_json": "iostat_json",
    "mpstat": "mpstat",
    "mpstat_irq": "mpstat_irq",
    "sar": "sar",
    "pidstat": "pidstat",
    "psi": "psi",
    "cgroup": "cgroup",
    "meminfo": "meminfo",
    "proc_vmstat": "proc_vmstat",
    "dmesg": "dmesg",
    "bpf_runqlat": "bpftrace",
    "bpf_biolat": "bpftrace",
    "nvidia_dmon": "nvidia_dmon",
}
SNAP_TOOLS = {
    "uname": "uname",
    "os_release": "os_release",
    "cmdline": "cmdline",
    "lscpu": "lscpu",
    "numactl": "numactl",
    "lsblk": "lsblk",
    "sysctl": "host_config",
    "thp": "host_config",
    "cpufreq": "host_config",
    "irq_affinity": "host_config",
    "mounts": "mounts",
    "dmesg_full": "dmesg",
    "df": "df",
    "mountstats": "mountstats",
    "interrupts": "interrupts",
    "softirqs": "softirqs",
    "buddyinfo": "buddyinfo",
    "ps_cpu": "ps",
    "ps_rss": "ps",
    "pids": "pids",
    "cgroup_limits": "host_config",
    "nvidia_list": "nvidia_smi",
    "nvidia_smi_q": "nvidia_smi",
    "nvidia_topo": "nvidia_smi",
    "nvidia_apps": "nvidia_smi",
    "nvidia_ecc": "nvidia_smi",
    "ntp": "chronyc",
    "clock": "clock",
}
PS = "ps -eo pid,ppid,user,pri,ni,psr,stat,pcpu,pmem,rss,vsz,nlwp,etimes,comm,args --sort=-{} | head -n 101 | mask"
ECC = (
    "nvidia-smi --query-gpu=index,pci.bus_id,uuid,ecc.mode.current,ecc.errors.corrected.volatile.total,"
    "ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.aggregate.total,ecc.errors.uncorrected.aggregate.total,"
    "retired_pages.pending,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv"
)


@dataclass
class Entry:
    name: str
    kind: str
    tool: str
    command: str | None
    output: str | None
    stderr: str | None
    status: str
    exit_code: int | None
    reason: str | None
    bytes: int = 0

    def as_json(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False)


def series_command(w: World, name: str) -> str:
    i, n = w.interval, w.n
    pids = ",".join(str(p.pid) for p in procs(w))
    files = {"psi": 7, "cgroup": 7, "meminfo": 1, "proc_vmstat": 1}
    if name in files:
        return f"sampler: every {i} s read {files[name]} files listed in bundle-format.md ({name})"
    return {
        "vmstat": f"vmstat -t -w -n {i} {n + 1}",
        "iostat": f"iostat -t -x -y {i} {n}",
        "iostat_json": f"iostat -t -x -y -o JSON {i} {n}",
        "mpstat": f"mpstat -P ALL {i} {n}",
        "mpstat_irq": f"mpstat -I SUM,SCPU -P ALL {w.spec.irq_interval_s} {w.spec.irq_samples}",
        "sar": f"sar -n DEV,EDEV,SOFT -q -B -w {i} {n}",
        "pidstat": f"pidstat -u -r -d -w -h -H -p {pids} {i} {n}",
        "dmesg": "dmesg -W --time-format iso",
        "bpf_runqlat": "bpftrace -B line -e <capture/bpftrace/runqlat.bt>",
        "bpf_biolat": "bpftrace -B line -e <capture/bpftrace/biolat.bt>",
        "nvidia_dmon": f"nvidia-smi dmon -o DT -d {i} -s pucvmet",
    }[name]


def snap_command(name: str) -> str:
    cmds = {
        "uname": "uname -a",
        "os_release": "cat /etc/os-release",
        "cmdline": "cat /proc/cmdline",
        "lscpu": "lscpu",
        "numactl": "numactl -H",
        "lsblk": "lsblk",
        "mounts": "cat /proc/self/mounts",
        "dmesg_full": "dmesg --time-format iso",
        "df": "df -Pk",
        "mountstats": "cat /proc/self/mountstats",
        "interrupts": "cat /proc/interrupts",
        "softirqs": "cat /proc/softirqs",
        "buddyinfo": "cat /proc/buddyinfo",
        "ps_cpu": PS.format("pcpu"),
        "ps_rss": PS.format("rss"),
        "pids": "for each PID: /proc/PID/{cmdline,status,cgroup,oom_score_adj,oom_score,io,environ}, chrt -p, taskset -pc | mask",
        "cgroup_limits": "read the limit files of the target cgroups (.state/cglimits.list)",
        "nvidia_list": "nvidia-smi -L",
        "nvidia_smi_q": "nvidia-smi -q",
        "nvidia_topo": "nvidia-smi topo -m",
        "nvidia_apps": "nvidia-smi --query-compute-apps=gpu_bus_id,gpu_uuid,pid,process_name,used_memory --format=csv",
        "nvidia_ecc": ECC,
        "ntp": "chronyc -n tracking",
        "clock": "date +%s.%N; cat /proc/uptime",
        "sysctl": "read /proc/sys/vm/* /proc/sys/kernel/sched* /proc/sys/kernel/hung_task* and the sysctls listed in bundle-format.md",
        "thp": "read 8 files: /sys/kernel/mm/transparent_hugepage/{enabled,defrag,shmem_enabled,use_zero_page,khugepaged/*}",
        "cpufreq": "read /sys/devices/system/cpu/{online,offline,isolated,nohz_full,intel_pstate/*} and cpu*/cpufreq/*",
        "irq_affinity": "read /proc/irq/default_smp_affinity and /proc/irq/*/{smp_affinity_list,effective_affinity_list}",
    }
    return cmds[name]


def collectors(w: World, outcomes: dict[str, Outcome], sizes: dict[str, int]) -> list[Entry]:
    """Every collector in the order the capture script registers them."""

    def series(name: str) -> Entry:
        o = outcomes[name]
        stopped = o.rc in (129, 130, 137, 143)
        return Entry(
            name,
            "series",
            SERIES_TOOLS[name],
            series_command(w, name),
            f"series/{name}.out",
            f"series/{name}.err",
            "ok",
            o.rc,
            "stopped by the capture" if stopped else None,
            sizes.get(f"series/{name}.out", 0),
        )

    def snap(name: str, phase: str) -> Entry:
        out = f"snap/{name}.{phase}.out"
        err = None if name == "clock" else f"snap/{name}.{phase}.err"
        return Entry(
            f"{name}.{phase}",
            "snapshot",
            SNAP_TOOLS[name],
            snap_command(name),
            out,
            err,
            "ok",
            0,
            None,
            sizes.get(out, 0),
        )

    ents = [snap("ntp", "start"), snap("clock", "start")]
    for name in [
        "vmstat",
        "iostat",
        "iostat_json",
        "mpstat",
        "mpstat_irq",
        "sar",
        "pidstat",
        "psi",
        "cgroup",
        "meminfo",
        "proc_vmstat",
    ]:
        if name == "iostat_json" and not w.spec.iostat_json:
            ents.append(
                Entry(
                    name,
                    "series",
                    "iostat_json",
                    f"iostat -t -x -y -o JSON {w.interval}",
                    None,
                    None,
                    "skipped",
                    None,
                    "off by default (--iostat-json)",
                )
            )
            continue
        ents.append(series(name))
    ents.append(
        Entry(
            "infiniband",
            "series",
            "infiniband",
            None,
            None,
            None,
            "missing",
            None,
            "no /sys/class/infiniband port counters (no RDMA devices)",
        )
    )
    ents.append(series("dmesg"))
    for name in ("bpf_runqlat", "bpf_biolat"):
        if w.spec.bpf:
            ents.append(series(name))
        else:
            ents.append(
                Entry(
                    name,
                    "series",
                    "bpftrace",
                    f"bpftrace {name[4:]}.bt",
                    None,
                    None,
                    "missing",
                    None,
                    "command not found: bpftrace",
                )
            )
    if w.spec.gpus:
        ents += [snap("nvidia_list", "start"), series("nvidia_dmon")]
    else:
        ents.append(
            Entry(
                "nvidia_dmon",
                "series",
                "nvidia_dmon",
                "nvidia-smi dmon",
                None,
                None,
                "missing",
                None,
                "command not found: nvidia-smi (no NVIDIA driver)",
            )
        )
    for name in START_ONLY:
        ents.append(snap(name, "start"))
        if name == "dmesg_full":
            ents.append(
                Entry(
                    "journal_prev.start",
                    "snapshot",
                    "journalctl",
                    "journalctl -k -b -1 --no-pager -o short-iso-precise -n 50000",
                    None,
                    None,
                    "skipped",
                    None,
                    "no previous boot in the journal: Specifying boot ID or boot offset has no effect, no persistent journal was found.",
                )
            )
            ents.append(
                Entry(
                    "pstore.start",
                    "snapshot",
                    "pstore",
                    None,
                    None,
                    None,
                    "skipped",
                    None,
                    "/sys/fs/pstore is empty (no crash record kept)",
                )
            )
    for phase in ("start", "end"):
        ents += [snap(n, phase) for n in BOTH]
        if w.spec.gpus:
            ents += [
                snap(n, phase)
                for n in (GPU_START if phase == "start" else GPU_END)
                if n != "nvidia_list"
            ]
        if phase == "start":
            ents.append(
                Entry(
                    "history",
                    "history",
                    "sadf",
                    None,
                    None,
                    None,
                    "skipped",
                    None,
                    "no sysstat daily file (sa*) written in the last 6 h in /var/log/sysstat /var/log/sa",
                )
            )
    ents += [snap("ntp", "end"), snap("clock", "end")]
    return ents


def manifest(w: World, ents: list[Entry]) -> str:
    s = w.spec
    end_epoch = w.start_epoch + s.seconds + 2.31
    up0 = w.start_epoch - w.boot_epoch
    v = json.dumps
    end_utc = utc(int(end_epoch))
    pids = [str(p.pid) for p in procs(w)]
    args = (
        ["-d", str(s.seconds), "-i", str(s.interval)]
        + [x for p in pids for x in ("--pid", p)]
        + ["--cgroup", "train.slice"]
        + (["--iostat-json"] if s.iostat_json else [])
        + (["--irq-interval", str(s.irq_interval)] if s.irq_interval is not None else [])
    )
    lines = [
        "{",
        '  "format": "hindsight-bundle",',
        '  "format_version": 1,',
        '  "capture_version": "0.1.0",',
        f'  "host": {{"hostname": {v(s.hostname)}, "kernel": {v(KERNEL)}, "os": {v(OS_NAME)}, "arch": {v(ARCH)}, "cpus": {s.cpus}}},',
        f'  "start_utc": {v(utc(w.t0))},\n  "end_utc": {v(end_utc)},\n  "updated_utc": {v(end_utc)},',
        f'  "interval_s": {s.interval},\n  "duration_s": {s.seconds},',
        '  "timezone": "Etc/UTC",\n  "utc_offset": "+0000",',
        f'  "clock": {{"start_epoch_s": {w.start_epoch:.9f}, "start_uptime_s": {up0:.2f}, "boot_epoch_s": {w.boot_epoch:.3f}, '
        f'"end_epoch_s": {end_epoch:.9f}, "end_uptime_s": {end_epoch - w.boot_epoch:.2f}, "clocksource": "tsc",',
        '            "ntp": {"source": "chronyc", "synchronized": true, "offset_s": -0.000012345}},',
        '  "user": {"uid": 0, "root": true},',
        '  "interrupted": false,\n  "complete": true,\n  "stop_reason": "duration",',
        f'  "options": {{"safe_mode": false, "no_bpf": {v(not s.bpf)}, "no_gpu": false, "max_mb": 500, "min_free_mb": 100, '
        f'"iostat_json": {v(s.iostat_json)}, "irq_interval_s": {s.irq_interval_s}}},',
        f'  "targets": {{"pids": {v(pids)}, "pids_auto": false, "cgroups": {v([CGROUP])}}},',
        f'  "history": {{"hours": 6, "until_utc": {v(utc(w.t0))}, "files": []}},',
        f'  "args": {v(args)},',
        '  "collectors": [' + ",".join("\n    " + e.as_json() for e in ents),
        "  ]",
        "}",
    ]
    return "\n".join(lines) + "\n"


def capture_log(w: World, ents: list[Entry]) -> str:
    s = w.spec
    name = f"/var/tmp/{s.bundle_name}"
    out = [
        f"[+0s] hindsight-capture 0.1.0: {s.seconds} s every {s.interval} s into {name}",
        f"[+0s] following {len(procs(w))} PIDs and 1 cgroup directories (list in manifest targets.cgroups)",
        f"[+0s] starting time series every {s.interval} s",
    ]
    out += [f"[+0s] {e.status}: {e.name} ({e.reason})" for e in ents if e.status not in ("ok",)]
    end = s.seconds
    out += [
        "[+1s] taking start snapshots",
        f"[+{end}s] capture window over; taking end snapshots",
        f"[+{end}s] taking end snapshots",
        f"[+{end + 2}s] capture finished (duration); writing the bundle",
        f"[+{end + 2}s] summary of collectors that did not run fully:",
    ]
    bad = [e for e in ents if e.status != "ok"]
    out += [f"[+{end + 2}s]   {e.status:<8} {e.name:<18} {e.reason}" for e in bad]
    out.append(
        f"[+{end + 2}s]   {len(ents) - len(bad)} collectors ok, {len(bad)} not ok (listed above)"
    )
    return "\n".join(out) + "\n"


def write(w: World, root: Path, outcomes: dict[str, Outcome]) -> None:
    """Write manifest.json, capture.log and every ``.err``/``.status`` companion."""
    sizes = {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*.out")}
    ents = collectors(w, outcomes, sizes)
    for e in ents:
        if e.output and e.status == "ok":
            if e.stderr:
                (root / e.stderr).write_bytes(b"")
            (root / (e.output.removesuffix(".out") + ".status")).write_text(f"rc={e.exit_code}\n")
    (root / "capture.log").write_text(capture_log(w, ents))
    (root / "manifest.json").write_text(manifest(w, ents))
