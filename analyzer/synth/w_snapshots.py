"""The one-shot snapshots of ``snap/<name>.<phase>.out`` (bundle-format.md, "Snapshots"),
consistent with the simulated host: its CPUs, memory, disks (lsblk/df/mounts), GPUs
(nvidia-smi), target processes (ps/pids) and cgroup limits.

`snapshots(w, phase)` returns ``{name: text}`` for one phase; the manifest entries are
made from the same names (`analyzer.synth.w_manifest`).
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta
from importlib import resources
from string import Template

import polars as pl

from analyzer.synth.common import ARCH, KERNEL, OS_NAME
from analyzer.synth.devices import GPU_FB_TOTAL, disk_names, gpu_ids, procs
from analyzer.synth.model import World
from analyzer.synth.w_samplers import CGROUP

NVIDIA_DRIVER = "550.127.05"
START_ONLY = [
    "uname",
    "os_release",
    "cmdline",
    "lscpu",
    "numactl",
    "lsblk",
    "sysctl",
    "thp",
    "cpufreq",
    "irq_affinity",
    "mounts",
    "dmesg_full",
]
BOTH = [
    "df",
    "mountstats",
    "interrupts",
    "softirqs",
    "buddyinfo",
    "ps_cpu",
    "ps_rss",
    "pids",
    "cgroup_limits",
]
GPU_START = ["nvidia_list", "nvidia_smi_q", "nvidia_topo", "nvidia_apps", "nvidia_ecc"]
GPU_END = ["nvidia_smi_q", "nvidia_apps", "nvidia_ecc"]


def clock(w: World, phase: str) -> str:
    t = w.start_epoch if phase == "start" else w.start_epoch + w.spec.seconds + 2.31
    up = t - w.boot_epoch
    utc = datetime.fromtimestamp(int(t), UTC)
    return (
        f"epoch_s={t:.9f}\nuptime_s={up:.2f}\nboot_epoch_s={w.boot_epoch:.3f}\n"
        f"utc={utc:%Y-%m-%dT%H:%M:%SZ}\nlocal={utc:%Y-%m-%dT%H:%M:%S}+0000\ntimezone=Etc/UTC\n"
        "utc_offset=+0000\nclocksource=tsc\nntp_source=chronyc\nntp_synchronized=true\n"
        "ntp_offset_s=-0.000012345\n"
    )


def ntp(w: World, phase: str) -> str:
    t = datetime.fromtimestamp(
        int(w.start_epoch) - 37 + (w.spec.seconds if phase == "end" else 0), UTC
    )
    return (
        "Reference ID    : A9FEA97B (169.254.169.123)\nStratum         : 4\n"
        f"Ref time (UTC)  : {t:%a %b %d %H:%M:%S %Y}\n"
        "System time     : 0.000012345 seconds slow of NTP time\nLast offset     : -0.000003102 seconds\n"
        "RMS offset      : 0.000021342 seconds\nFrequency       : 12.345 ppm fast\n"
        "Residual freq   : -0.001 ppm\nSkew            : 0.021 ppm\nRoot delay      : 0.000412 seconds\n"
        "Root dispersion : 0.000311 seconds\nUpdate interval : 16.1 seconds\nLeap status     : Normal\n"
    )


def _static(w: World) -> dict[str, str]:
    c, host = w.spec.cpus, w.spec.hostname
    half = max(c // 2, 1)
    node0, node1 = (f"0-{half - 1}", f"{half}-{c - 1}") if c > 1 else ("0", "")
    mem_mb = w.mem_total_kb // 1024
    disks = disk_names(w.spec.disks)
    lsblk = ["NAME        MAJ:MIN RM   SIZE RO TYPE MOUNTPOINTS"]
    for i, (name, major, minor) in enumerate(disks):
        if i == 0:
            lsblk += [
                f"{name:<11} {major}:{minor:<4} 0   1.7T  0 disk ",
                f"├─{name}p1 {major}:{minor + 1:<4} 0     1G  0 part /boot/efi",
                f"└─{name}p2 {major}:{minor + 2:<4} 0   1.7T  0 part /",
            ]
        else:
            mnt = "/data" if i == 1 else f"/data{i}"
            lsblk.append(f"{name:<11} {major}:{minor:<4} 0   7.0T  0 disk {mnt}")
    sysctl = [
        "vm.admin_reserve_kbytes = 8192",
        "vm.dirty_background_bytes = 0",
        "vm.dirty_background_ratio = 10",
        "vm.dirty_bytes = 0",
        "vm.dirty_expire_centisecs = 3000",
        "vm.dirty_ratio = 20",
        "vm.dirty_writeback_centisecs = 500",
        "vm.dirtytime_expire_seconds = 43200",
        "vm.lowmem_reserve_ratio = 256\t256\t32\t0\t0",
        "vm.max_map_count = 1048576",
        "vm.min_free_kbytes = 90112",
        "vm.overcommit_memory = 0",
        "vm.overcommit_ratio = 50",
        "vm.panic_on_oom = 0",
        "vm.swappiness = 60",
        "vm.vfs_cache_pressure = 100",
        "vm.watermark_scale_factor = 10",
        "vm.zone_reclaim_mode = 0",
        "kernel.sched_autogroup_enabled = 1",
        "kernel.sched_cfs_bandwidth_slice_us = 5000",
        "kernel.numa_balancing = 1",
        "kernel.hung_task_panic = 0",
        "kernel.hung_task_timeout_secs = 120",
        "kernel.hung_task_warnings = 10",
        "kernel.watchdog_thresh = 10",
        "kernel.nmi_watchdog = 0",
        "kernel.panic = 0",
        "kernel.panic_on_oops = 0",
        "kernel.pid_max = 4194304",
        "kernel.threads-max = 4123456",
        "kernel.dmesg_restrict = 1",
        "fs.file-max = 9223372036854775807",
        "fs.file-nr = 14336\t0\t9223372036854775807",
    ]
    thp = "/sys/kernel/mm/transparent_hugepage/"
    cpu_dir = "/sys/devices/system/cpu/"
    cpufreq = [
        f"{cpu_dir}online 0-{c - 1}",
        f"{cpu_dir}offline ",
        f"{cpu_dir}isolated ",
        f"{cpu_dir}nohz_full  (null)",
        f"{cpu_dir}intel_pstate/status active",
        f"{cpu_dir}intel_pstate/no_turbo 0",
    ]
    for i in range(c):
        cpufreq += [
            f"{cpu_dir}cpu{i}/cpufreq/scaling_governor performance",
            f"{cpu_dir}cpu{i}/cpufreq/scaling_cur_freq 3400000",
        ]
    irqs = [f"/proc/irq/default_smp_affinity {'f' * max(1, -(-c // 4))}"]
    for n in range(24, 24 + min(c, 32)):
        irqs += [
            f"/proc/irq/{n}/smp_affinity_list 0-{c - 1}",
            f"/proc/irq/{n}/effective_affinity_list {n % c}",
        ]
    mounts = [
        "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0",
        "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
        f"/dev/{disks[0][0]}p2 / ext4 rw,relatime 0 0",
        f"/dev/{disks[0][0]}p1 /boot/efi vfat rw,relatime,fmask=0077,dmask=0077 0 0",
        "tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0",
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0",
    ]
    for i, (name, _, _) in enumerate(disks[1:], start=1):
        mounts.append(f"/dev/{name} {'/data' if i == 1 else f'/data{i}'} ext4 rw,noatime 0 0")
    return {
        "uname": f"Linux {host} {KERNEL} #49-Ubuntu SMP PREEMPT_DYNAMIC Mon Nov  4 02:06:24 UTC 2024 {ARCH} {ARCH} {ARCH} GNU/Linux\n",
        "os_release": f'PRETTY_NAME="{OS_NAME}"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nVERSION="24.04.1 LTS (Noble Numbat)"\nVERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\nUBUNTU_CODENAME=noble\n',
        "cmdline": f"BOOT_IMAGE=/boot/vmlinuz-{KERNEL} root=UUID=6f1c2a9e-3b1d-4c55-9f0e-2a7b4c8d9e01 ro quiet splash iommu=pt\n",
        "lscpu": (
            f"Architecture:                         {ARCH}\nCPU op-mode(s):                       32-bit, 64-bit\n"
            f"CPU(s):                               {c}\nOn-line CPU(s) list:                  0-{c - 1}\n"
            "Vendor ID:                            GenuineIntel\nModel name:                           Intel(R) Xeon(R) Platinum 8480+\n"
            f"Thread(s) per core:                   2\nCore(s) per socket:                   {max(c // 4, 1)}\nSocket(s):                            2\n"
            f"NUMA node(s):                         2\nNUMA node0 CPU(s):                    {node0}\nNUMA node1 CPU(s):                    {node1}\n"
        ),
        "numactl": (
            f"available: 2 nodes (0-1)\nnode 0 cpus: {' '.join(map(str, range(half)))}\nnode 0 size: {mem_mb // 2} MB\n"
            f"node 0 free: {mem_mb // 6} MB\nnode 1 cpus: {' '.join(map(str, range(half, c)))}\nnode 1 size: {mem_mb // 2} MB\n"
            f"node 1 free: {mem_mb // 6} MB\nnode distances:\nnode   0   1 \n  0:  10  21 \n  1:  21  10 \n"
        ),
        "lsblk": "\n".join(lsblk) + "\n",
        "sysctl": "\n".join(sysctl) + "\n",
        "thp": "".join(
            f"{thp}{k} {v}\n"
            for k, v in [
                ("enabled", "always [madvise] never"),
                ("defrag", "always defer defer+madvise [madvise] never"),
                ("shmem_enabled", "always within_size advise [never] deny force"),
                ("use_zero_page", "1"),
                ("khugepaged/defrag", "1"),
                ("khugepaged/max_ptes_none", "511"),
                ("khugepaged/pages_to_scan", "4096"),
                ("khugepaged/scan_sleep_millisecs", "10000"),
            ]
        ),
        "cpufreq": "\n".join(cpufreq) + "\n",
        "irq_affinity": "\n".join(irqs) + "\n",
        "mounts": "\n".join(mounts) + "\n",
    }


def _df(w: World, phase: str) -> str:
    disks = disk_names(w.spec.disks)
    grow = (
        17_000_000
        if phase == "end" and any(i.kind == "checkpoint_stall" for i in w.spec.incidents)
        else 0
    )
    lines = [
        "Filesystem     1024-blocks       Used  Available Capacity Mounted on",
        f"/dev/{disks[0][0]}p2   1844177344  211223112 1539031080      13% /",
        "tmpfs             32937148     524288   32412860       2% /dev/shm",
    ]
    for i, (name, _, _) in enumerate(disks[1:], start=1):
        used = 3_112_456_788 + (grow if i == 1 else 0)
        lines.append(
            f"/dev/{name}     7501265280 {used:>10} {7501265280 - used - 381_000_000:>10}      {used * 100 // 7501265280 + 1}% {'/data' if i == 1 else f'/data{i}'}"
        )
    return "\n".join(lines) + "\n"


def _mountstats(w: World) -> str:
    disks = disk_names(w.spec.disks)
    lines = [
        "device sysfs mounted on /sys with fstype sysfs",
        "device proc mounted on /proc with fstype proc",
        f"device /dev/{disks[0][0]}p2 mounted on / with fstype ext4",
    ]
    lines += [
        f"device /dev/{n} mounted on {'/data' if i == 1 else f'/data{i}'} with fstype ext4"
        for i, (n, _, _) in enumerate(disks[1:], start=1)
    ]
    return "\n".join(lines) + "\n"


def _interrupts(w: World, phase: str, soft: bool) -> str:
    c = w.spec.cpus
    scale = 1.0 if phase == "start" else 1.0 + w.spec.seconds / (w.start_epoch - w.boot_epoch)
    head = " " * (20 if soft else 11) + "".join(f"{f'CPU{i}':<11}" for i in range(c)).rstrip()
    rows = [head]
    if soft:
        for j, name in enumerate(
            [
                "HI",
                "TIMER",
                "NET_TX",
                "NET_RX",
                "BLOCK",
                "IRQ_POLL",
                "TASKLET",
                "SCHED",
                "HRTIMER",
                "RCU",
            ]
        ):
            base = [
                0,
                9_000_000,
                40_000,
                2_000_000,
                300_000,
                0,
                12_000,
                6_000_000,
                20_000,
                3_000_000,
            ][j]
            rows.append(
                f"{name + ':':>12}"
                + "".join(f" {int(base * scale * (1.3 if i == 0 else 1)):>10}" for i in range(c))
            )
    else:
        for n in range(24, 24 + min(c, 16)):
            vals = "".join(f" {int((900_000 if i == n % c else 0) * scale):>10}" for i in range(c))
            rows.append(
                f"{n:>4}:{vals}  IR-PCI-MSIX-0000:5e:00.0 {n - 24}-edge      mlx5_comp{n - 24}@pci:0000:5e:00.0"
            )
        for name, base, desc in [
            ("NMI", 1_200, "Non-maskable interrupts"),
            ("LOC", 40_000_000, "Local timer interrupts"),
            ("RES", 2_000_000, "Rescheduling interrupts"),
            ("CAL", 900_000, "Function call interrupts"),
        ]:
            rows.append(
                f"{name + ':':>4}"
                + "".join(f" {int(base * scale):>10}" for _ in range(c))
                + f"   {desc}"
            )
        rows += [" ERR:          0", " MIS:          0"]
    return "\n".join(rows) + "\n"


def _buddyinfo() -> str:
    return (
        "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n"
        "Node 0, zone    DMA32      7      6      5      6      7      5      6      5      6      5    714 \n"
        "Node 0, zone   Normal  21345  12042   8123   4410   2207   1100    512    230    101     43   2210 \n"
        "Node 1, zone   Normal  19874  11021   7740   4102   2003    998    470    211     95     40   2370 \n"
    )


def _ps(w: World, phase: str, sort: str) -> str:
    hdr = "    PID    PPID USER     PRI  NI PSR STAT %CPU %MEM   RSS    VSZ NLWP ELAPSED COMMAND         COMMAND"
    rows = []
    k = 0 if phase == "start" else w.n
    p = w.procs.filter(pl.col("k") == k)  # type: ignore[union-attr]
    for i, pr in enumerate(procs(w)):
        r = p.filter(pl.col("p") == i)
        if r.height == 0 or not r["alive"][0]:
            continue
        cpu, rss, vsz = r["usr"][0] + r["sys"][0], int(r["rss"][0]), int(r["vsz"][0])
        nlwp = 96 if pr.role == "trainer" else 4
        ppid = 4201 if pr.role == "trainer" else 4242
        rows.append(
            (
                cpu,
                rss,
                f"{pr.pid:>7} {ppid:>7} ml        19   0 {pr.cpu:>3} Rl   {cpu:>4.1f} {100 * rss / w.mem_total_kb:>4.1f} {rss:>5} {vsz:>6} {nlwp:>4} {int(w.start_epoch - w.boot_epoch) - 600:>7} {pr.comm:<15} {pr.args}",
            )
        )
    rows.append(
        (
            1.1,
            22_596,
            "   2686    2685 root      39  19   0 SNl   1.1  0.0 22596 336856    4      0 nvidia-smi      nvidia-smi dmon -o DT -d 1 -s pucvmet",
        )
    )
    rows.append(
        (
            0.2,
            14_208,
            "      1       0 root      19   0   3 Ss    0.2  0.0 14208  23652    1 1996310 systemd         /sbin/init splash",
        )
    )
    rows.sort(key=lambda x: -(x[0] if sort == "cpu" else x[1]))
    return "\n".join([hdr] + [r[2] for r in rows]) + "\n"


def _pids(w: World, phase: str) -> str:
    out = []
    k = 0 if phase == "start" else w.n
    p = w.procs.filter(pl.col("k") == k)  # type: ignore[union-attr]
    for i, pr in enumerate(procs(w)):
        r = p.filter(pl.col("p") == i)
        if r.height == 0 or not r["alive"][0]:
            out.append(f"{pr.pid} gone")
            continue
        rss = int(r["rss"][0])
        out += [
            f"{pr.pid} cmdline {pr.args} ",
            f"{pr.pid} status Name:\t{pr.comm}",
            f"{pr.pid} status State:\tR (running)",
            f"{pr.pid} status Pid:\t{pr.pid}",
            f"{pr.pid} status VmRSS:\t{rss:>8} kB",
            f"{pr.pid} status Threads:\t{96 if pr.role == 'trainer' else 4}",
            f"{pr.pid} chrt pid {pr.pid}'s current scheduling policy: SCHED_OTHER",
            f"{pr.pid} chrt pid {pr.pid}'s current scheduling priority: 0",
            f"{pr.pid} taskset pid {pr.pid}'s current affinity list: 0-{w.spec.cpus - 1}",
            f"{pr.pid} cgroup 0::/train.slice",
            f"{pr.pid} oom_score_adj 0",
            f"{pr.pid} oom_score {666 + i}",
            f"{pr.pid} io rchar: 91234567890",
            f"{pr.pid} environ HOME=/home/ml",
            f"{pr.pid} environ HF_TOKEN=***",
            f"{pr.pid} environ CUDA_VISIBLE_DEVICES={','.join(map(str, range(w.spec.gpus)))}",
        ]
    return "\n".join(out) + "\n"


def _cgroup_limits(w: World) -> str:
    lim = {
        "cpu.max": "max 100000",
        "cpu.weight": "100",
        "cpuset.cpus.effective": f"0-{w.spec.cpus - 1}",
        "memory.max": "max",
        "memory.high": "max",
        "memory.low": "0",
        "memory.min": "0",
        "memory.swap.max": "max",
        "memory.oom.group": "0",
        "io.max": "",
        "io.weight": "default 100",
        "pids.max": "max",
    } | w.cg_limits
    return "".join(f"{CGROUP}/{k} {v}".rstrip(" ") + "\n" for k, v in lim.items())


def _nvidia(w: World, phase: str) -> dict[str, str]:
    g = w.spec.gpus
    k = 0 if phase == "start" else w.n
    gpus = w.gpus.filter(pl.col("k") == k).sort("g")  # type: ignore[union-attr]
    tmpl = Template(
        resources.files("analyzer.synth").joinpath("templates/nvidia_smi_q_gpu.txt").read_text()
    )
    stamp = datetime.fromtimestamp(
        int(w.start_epoch) + (w.spec.seconds if phase == "end" else 0) + 1, UTC
    )
    smi = [
        f"\n==============NVSMI LOG==============\n\nTimestamp                                              : {stamp:%a %b %d %H:%M:%S %Y}\n"
        f"Driver Version                                         : {NVIDIA_DRIVER}\nCUDA Version                                           : 12.4\n\n"
        f"Attached GPUs                                          : {g}\n"
    ]
    lst, apps, ecc = (
        [],
        ["gpu_bus_id, gpu_uuid, pid, process_name, used_gpu_memory [MiB]"],
        [
            "index, pci.bus_id, uuid, ecc.mode.current, ecc.errors.corrected.volatile.total, ecc.errors.uncorrected.volatile.total, "
            "ecc.errors.corrected.aggregate.total, ecc.errors.uncorrected.aggregate.total, retired_pages.pending, remapped_rows.correctable, "
            "remapped_rows.uncorrectable, remapped_rows.pending, remapped_rows.failure"
        ],
    )
    topo = (
        "\t"
        + "\t".join(f"GPU{i}" for i in range(g))
        + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    )
    for i in range(g):
        bus, uuid = gpu_ids(w, i)
        row = gpus.filter(pl.col("g") == i)
        fb = int(row["fb"][0])
        procs_text = (
            "    Processes\n        GPU instance ID                   : N/A\n        Compute instance ID               : N/A\n"
            f"        Process ID                        : 4242\n            Type                          : C\n"
            f"            Name                          : python3\n            Used GPU Memory                   : {fb - 520} MiB\n"
        )
        smi.append(
            tmpl.substitute(
                bus=bus,
                serial=1653924043040 + i,
                uuid=uuid,
                pdi=f"0x{zlib.crc32(uuid.encode()):08x}{zlib.crc32(bus.encode()):08x}",
                minor=i,
                module=i + 1,
                busno=bus[9:11].lower(),
                tx=700 + i,
                rx=580 + i,
                idle="Not Active",
                swcap="Active" if row["pviol"][0] > 0 else "Not Active",
                capus=108656871 + i,
                fbused=fb,
                fbfree=GPU_FB_TOTAL - 616 - fb,
                util=int(row["sm"][0]),
                memutil=int(row["mem"][0]),
                temp=int(row["gtemp"][0]),
                mtemp=int(row["mtemp"][0]),
                pwr=f"{row['pwr'][0]:.2f}",
                clk=int(row["pclk"][0]),
                processes=procs_text,
            )
        )
        lst.append(f"GPU {i}: NVIDIA H200 (UUID: {uuid})")
        apps.append(f"{bus}, {uuid}, 4242, python3, {fb - 520} MiB")
        ecc.append(f"{i}, {bus}, {uuid}, Enabled, 0, 0, 0, 0, [N/A], 0, 0, No, No")
        half = max(w.spec.cpus // 2, 1)
        node = 0 if i < max(g // 2, 1) else 1
        aff = f"0-{half - 1}" if node == 0 else f"{half}-{w.spec.cpus - 1}"
        topo += (
            f"GPU{i}\t"
            + "\t".join(" X " if j == i else "NV18" for j in range(g))
            + f"\t{aff}\t{node}\t\tN/A\n"
        )
    topo += "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    out = {
        "nvidia_smi_q": "".join(smi),
        "nvidia_apps": "\n".join(apps) + "\n",
        "nvidia_ecc": "\n".join(ecc) + "\n",
    }
    if phase == "start":
        out |= {"nvidia_list": "\n".join(lst) + "\n", "nvidia_topo": topo}
    return out


def snapshots(w: World, phase: str, dmesg_full: str) -> dict[str, str]:
    """``{name: text}`` of every snapshot taken in ``phase`` (start or end), in capture order."""
    out: dict[str, str] = {}
    if phase == "start":
        out |= {"ntp": ntp(w, phase), "clock": clock(w, phase)}
        if w.spec.gpus:
            out["nvidia_list"] = ""
        out |= _static(w)
        out["dmesg_full"] = dmesg_full
    out |= {
        "df": _df(w, phase),
        "mountstats": _mountstats(w),
        "interrupts": _interrupts(w, phase, False),
        "softirqs": _interrupts(w, phase, True),
        "buddyinfo": _buddyinfo(),
        "ps_cpu": _ps(w, phase, "cpu"),
        "ps_rss": _ps(w, phase, "rss"),
        "pids": _pids(w, phase),
        "cgroup_limits": _cgroup_limits(w),
    }
    if w.spec.gpus:
        nv = _nvidia(w, phase)
        for name in GPU_START if phase == "start" else GPU_END:
            out[name] = nv[name]
    if phase == "end":
        out |= {"ntp": ntp(w, phase), "clock": clock(w, phase)}
    return out


def end_time(w: World) -> datetime:
    return w.spec.start + timedelta(seconds=w.spec.seconds + 2)
