"""Kernel log text: ``dmesg -W --time-format iso`` (new messages during the capture) and
the ``dmesg_full`` snapshot (the boot log so far), plus the message bodies incidents emit
in the formats of kernel 6.8 and the NVIDIA 550+ driver: the memory-cgroup OOM report,
the hung-task report and ``NVRM: Xid`` lines.

Every line is ``YYYY-MM-DDTHH:MM:SS,uuuuuu+00:00 <message>``; the lines of one report
get consecutive microseconds.
"""

from __future__ import annotations

from datetime import UTC, datetime

from analyzer.synth.common import KERNEL, Sink
from analyzer.synth.model import Event, World

XID_TEXT = {
    13: "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address",
    31: "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f29_5b8c9000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "Ch 00000008",
    45: "Ch 00000009",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    74: "NVLink: fatal error detected on link 3(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).",
}


def iso(epoch: float) -> str:
    t = datetime.fromtimestamp(epoch, UTC)
    return f"{t:%Y-%m-%dT%H:%M:%S},{t.microsecond:06d}+00:00"


def render(events: list[Event]) -> str:
    out = []
    for ev in sorted(events, key=lambda e: e.epoch):
        for i, line in enumerate(ev.lines):
            out.append(f"{iso(ev.epoch + i * 7e-6)} {line}")
    return "".join(x + "\n" for x in out)


def write_series(w: World, sink: Sink) -> None:
    sink.write(render(w.events).encode())


def xid_lines(code: int, bus: str, uuid: str, pid: int, comm: str) -> list[str]:
    short = bus[4:14]  # 0000:18:00
    who = f"pid={pid}, name={comm}" if code not in (79, 119) else "pid='<unknown>', name=<unknown>"
    lines = [f"NVRM: GPU at PCI:{short}: {uuid}"]
    lines.append(f"NVRM: Xid (PCI:{short}): {code}, {who}, {XID_TEXT.get(code, 'Ch 00000008')}")
    if code == 13:
        lines.append(
            f"NVRM: Xid (PCI:{short}): 13, {who}, Graphics Exception: ESR 0x50c730=0x11c000e 0x50c734=0x20 0x50c728=0xf81eb60 0x50c72c=0x1174"
        )
        lines.append(f"NVRM: Xid (PCI:{short}): 43, {who}, Ch 00000008")
    if code == 79:
        lines.append(f"NVRM: GPU {bus[4:]}: GPU has fallen off the bus.")
    return lines


def hung_task_lines(comm: str, pid: int, ppid: int, blocked_s: int) -> list[str]:
    return [
        f"INFO: task {comm}:{pid} blocked for more than {blocked_s} seconds.",
        f"      Not tainted {KERNEL} #49-Ubuntu",
        '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
        f"task:{comm:<15} state:D stack:0     pid:{pid:<5} tgid:{pid:<5} ppid:{ppid:<6} flags:0x00004002",
        "Call Trace:",
        " <TASK>",
        " __schedule+0x27c/0x6b0",
        " schedule+0x33/0x110",
        " io_schedule+0x46/0x80",
        " folio_wait_bit_common+0x136/0x330",
        " folio_wait_writeback+0x2b/0x80",
        " __filemap_fdatawait_range+0x80/0xe0",
        " file_write_and_wait_range+0x98/0xc0",
        " ext4_sync_file+0x10b/0x390",
        " __x64_sys_fsync+0x3b/0x70",
        " do_syscall_64+0x81/0x170",
        " entry_SYSCALL_64_after_hwframe+0x78/0x80",
        "RIP: 0033:0x7f8a2e31ea97",
        "RSP: 002b:00007ffd61b0e1c8 EFLAGS: 00000246 ORIG_RAX: 000000000000004a",
        "RAX: ffffffffffffffda RBX: 0000000000000003 RCX: 00007f8a2e31ea97",
        "RDX: 0000000000000000 RSI: 0000000000000000 RDI: 0000000000000003",
        "RBP: 00007ffd61b0e210 R08: 0000000000000000 R09: 0000000000000000",
        "R10: 0000000000000000 R11: 0000000000000246 R12: 0000000000000001",
        "R13: 0000000000000000 R14: 0000000000000000 R15: 0000000000000000",
        " </TASK>",
    ]


def oom_lines(
    victim_pid: int,
    victim_comm: str,
    cgroup: str,
    limit_kb: int,
    tasks: list[tuple[int, int, int, int]],
    cpu: int,
) -> list[str]:
    """Memory-cgroup OOM report of kernel 6.8; ``tasks`` = (pid, uid, total_vm pages,
    rss pages) of the cgroup's processes, the victim among them."""
    v = next(t for t in tasks if t[0] == victim_pid)
    rss_kb = v[3] * 4
    lines = [
        f"{victim_comm} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        f"CPU: {cpu} PID: {victim_pid} Comm: {victim_comm} Not tainted {KERNEL} #49-Ubuntu",
        "Hardware name: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 04/12/2024",
        "Call Trace:",
        " <TASK>",
        " dump_stack_lvl+0x76/0xa0",
        " dump_header+0x43/0x1c0",
        " oom_kill_process.cold+0x8/0x8a",
        " out_of_memory+0x214/0x500",
        " mem_cgroup_out_of_memory+0xc0/0x110",
        " try_charge_memcg+0x422/0x6f0",
        " charge_memcg+0x2f/0x90",
        " __mem_cgroup_charge+0x2c/0x90",
        " do_anonymous_page+0x343/0xa20",
        " __handle_mm_fault+0xa1e/0xf40",
        " handle_mm_fault+0xd0/0x310",
        " do_user_addr_fault+0x1fd/0x690",
        " exc_page_fault+0x77/0x170",
        " asm_exc_page_fault+0x27/0x30",
        "RIP: 0033:0x7f3a1c58c0ba",
        "RSP: 002b:00007ffccee919c8 EFLAGS: 00010206",
        "RAX: 0000000000000000 RBX: 00007ff38de4daf0 RCX: 00000000006f8010",
        "RDX: 00007ff389d9d010 RSI: 0000000000000000 RDI: 00007ff389ea5000",
        "RBP: 00007ff38e11b730 R08: 00000000ffffffff R09: 0000000000000000",
        "R10: 0000000000000022 R11: 0000000000000246 R12: 0000000000800000",
        "R13: 0000000000000000 R14: 0000000000000000 R15: 00007ff38e9c13d0",
        " </TASK>",
        f"memory: usage {limit_kb}kB, limit {limit_kb}kB, failcnt 1843",
        "swap: usage 0kB, limit 9007199254740988kB, failcnt 0",
        f"Memory cgroup stats for {cgroup}:",
        f"anon {limit_kb * 1024 - 312_000_000}",
        "file 245760",
        "kernel 241938432",
        "kernel_stack 1769472",
        "pagetables 131948544",
        "sock 0",
        "shmem 0",
        "file_mapped 0",
        "file_dirty 0",
        "file_writeback 0",
        "pgfault 48219931",
        "pgmajfault 412",
        "Tasks state (memory values in pages):",
        "[  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name",
    ]
    for pid, uid, vm, rss in tasks:
        anon, file = int(rss * 0.99), rss - int(rss * 0.99)
        lines.append(
            f"[{pid:>7}] {uid:>5} {pid:>5} {vm:>8} {rss:>8} {anon:>8} {file:>8} {0:>9} {rss * 8:>14} {0:>8} {0:>13} python3"
        )
    short = cgroup
    lines += [
        f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg={short},task_memcg={short},task={victim_comm},pid={victim_pid},uid={v[1]}",
        f"Memory cgroup out of memory: Killed process {victim_pid} ({victim_comm}) total-vm:{v[2] * 4}kB, anon-rss:{int(rss_kb * 0.99)}kB, file-rss:{rss_kb - int(rss_kb * 0.99)}kB, shmem-rss:0kB, UID:{v[1]} pgtables:{rss_kb // 128}kB oom_score_adj:0",
    ]
    return lines


BOOT_LOG = [
    (
        0.0,
        f"Linux version {KERNEL} (buildd@lcy02-amd64-100) (x86_64-linux-gnu-gcc-13 (Ubuntu 13.2.0-23ubuntu4) 13.2.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #49-Ubuntu SMP PREEMPT_DYNAMIC Mon Nov  4 02:06:24 UTC 2024 (Ubuntu {KERNEL}-49.49-generic 6.8.12)",
    ),
    (
        0.0,
        f"Command line: BOOT_IMAGE=/boot/vmlinuz-{KERNEL} root=UUID=6f1c2a9e-3b1d-4c55-9f0e-2a7b4c8d9e01 ro quiet splash iommu=pt",
    ),
    (0.0, "KERNEL supported cpus:"),
    (0.0, "  Intel GenuineIntel"),
    (0.0, "  AMD AuthenticAMD"),
    (0.000012, "BIOS-provided physical RAM map:"),
    (0.412, "ACPI: Early table checksum verification disabled"),
    (0.835, "smpboot: Allowing {cpus} CPUs, 0 hotplug CPUs"),
    (
        1.205,
        "Memory: {memk}K/{memk}K available (20480K kernel code, 4382K rwdata, 14460K rodata, 4868K init, 4772K bss, 1602112K reserved, 0K cma-reserved)",
    ),
    (1.390, "rcu: Hierarchical RCU implementation."),
    (2.118, "smp: Brought up 2 nodes, {cpus} CPUs"),
    (3.402, "psi: enabled"),
    (4.881, "nvme nvme0: pci function 0000:c1:00.0"),
    (4.902, "nvme nvme0: 64/0/0 default/read/poll queues"),
    (4.911, " nvme0n1: p1 p2"),
    (
        6.274,
        "EXT4-fs (nvme0n1p2): mounted filesystem 6f1c2a9e-3b1d-4c55-9f0e-2a7b4c8d9e01 ro with ordered data mode. Quota mode: none.",
    ),
    (
        9.113,
        "systemd[1]: systemd 255.4-1ubuntu8.4 running in system mode (+PAM +AUDIT +SELINUX +APPARMOR +IMA +SMACK +SECCOMP +GCRYPT -GNUTLS +OPENSSL +ACL +BLKID +CURL +ELFUTILS +FIDO2 +IDN2 -IDN +IPTC +KMOD +LIBCRYPTSETUP +LIBFDISK +PCRE2 -PWQUALITY +P11KIT +QRENCODE +TPM2 +BZIP2 +LZ4 +XZ +ZLIB +ZSTD -BPF_FRAMEWORK -XKBCOMMON +UTMP +SYSVINIT default-hierarchy=unified)",
    ),
    (11.902, "nvidia: module license 'NVIDIA' taints kernel."),
    (11.903, "Disabling lock debugging due to kernel taint"),
    (12.217, "nvidia-nvlink: Nvlink Core is being initialized, major device number 509"),
    (
        12.861,
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024",
    ),
    (
        13.340,
        "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.127.05  Tue Oct  8 02:56:05 UTC 2024",
    ),
    (
        14.005,
        "EXT4-fs (nvme1n1): mounted filesystem 0b7e3c51-77aa-4a8e-8d9c-7f3e1a2b5c6d r/w with ordered data mode. Quota mode: none.",
    ),
    (15.552, "mlx5_core 0000:5e:00.0 eno1: Link up"),
    (15.561, "IPv6: ADDRCONF(NETDEV_CHANGE): eno1: link becomes ready"),
    (
        20.114,
        'audit: type=1400 audit(1764424820.114:112): apparmor="STATUS" operation="profile_load" profile="unconfined" name="nvidia_modprobe" pid=2231 comm="apparmor_parser"',
    ),
]


def full_text(w: World) -> str:
    """The ring buffer at capture start (``dmesg_full``): the boot log at boot + offset."""
    mem = w.mem_total_kb
    events = [
        Event(w.boot_epoch + off, [text.format(cpus=w.spec.cpus, memk=mem)])
        for off, text in BOOT_LOG
    ]
    return render(events)
