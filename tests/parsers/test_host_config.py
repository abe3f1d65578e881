"""Tests of analyzer/parsers/host_config.py against tests/fixtures/snapshots.

Golden values are read by hand from the fixture files (real capture snapshots of the
reference VM and of the GPU machine, plus hand-made variants; see PROVENANCE.md). The
snapshots are printed under LC_ALL=C and hold no localised numbers, so instead of a locale
replay the equivalence test checks that a CRLF/NUL-damaged copy gives the same rows.
"""

from __future__ import annotations

import random
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, host_config

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
FILES = sorted(
    p
    for p in FIX.iterdir()
    if host_config.sniff(_read.read_head(p), p.name) >= 0.5 and p.suffix != ".md"
)


def _parse(name: str, **kw: object) -> base.ParseResult:
    path = FIX / name
    res = host_config.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _kv(name: str, **kw: object) -> dict[str, str]:
    table = _parse(name, **kw).tables["host_config"]
    return dict(zip(table["key"].to_list(), table["value"].to_list(), strict=True))  # type: ignore[index]


def test_the_fixture_set_covers_every_host_config_snapshot() -> None:
    names = {p.name for p in FILES}
    for kind in ("sysctl", "thp", "cpufreq", "irq_affinity", "cgroup_limits", "cmdline", "uname"):
        assert any(f"__{kind}." in n for n in names), kind
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = host_config.parse(path, base.ParseContext(file_name=path.name))
    res.coverage.check()
    assert res.coverage.parsed_pct in (None, 100.0)
    table = res.tables["host_config"]
    assert dict(table.schema) == host_config.TABLES["host_config"].schema  # type: ignore[union-attr]
    assert table["key"].null_count() == 0  # type: ignore[index]


def test_sysctl_values_whitespace_collapsed() -> None:
    kv = _kv("ref-vm__sysctl.start.out")
    assert kv["vm.swappiness"] == "60"
    assert kv["kernel.sched_rt_runtime_us"] == "950000"
    assert kv["vm.lowmem_reserve_ratio"] == "256 256 32 0 0"  # tabs in the file
    big = _kv("ref-h200__sysctl-a.txt")
    assert (big["fs.file-max"], big["kernel.pid_max"]) == ("13195538", "32768")
    assert big["net.ipv4.tcp_rmem"] == "4096 131072 33554432"


def test_thp_selected_word_and_khugepaged_keys() -> None:
    kv = _kv("ref-vm__thp.start.out")
    assert (kv["thp.enabled"], kv["thp.defrag"], kv["thp.shmem_enabled"]) == (
        "madvise",
        "madvise",
        "never",
    )
    assert kv["thp.khugepaged.max_ptes_none"] == "511"


def test_cpu_and_irq_affinity_dumps() -> None:
    kv = _kv("ref-vm__cpufreq.start.out")
    assert (kv["cpu.online"], kv["cpu.isolated"]) == ("0-1", "")
    irq = _kv("ref-vm__irq_affinity.start.out")
    assert irq["irq.default_smp_affinity"] == "3"
    assert (irq["irq.26.smp_affinity_list"], irq["irq.26.effective_affinity_list"]) == ("0-1", "1")


def test_cgroup_v1_and_v2_limits_share_one_vocabulary() -> None:
    kv = _kv("handmade__cgroup_limits-v1-v2.start.out")
    # v2 cpu.max "max 100000" and v1 cfs_quota_us -1 / cfs_period_us 100000
    assert kv["cgroup.train.slice.cpu.quota_us"] == kv["cgroup.train.cpu.quota_us"] == "max"
    assert kv["cgroup.train.slice.cpu.period_us"] == kv["cgroup.train.cpu.period_us"] == "100000"
    assert (kv["cgroup./.cpu.quota_us"], kv["cgroup./.cpu.period_us"]) == ("50000", "100000")
    # v1 cpu.shares 1024 -> weight 1 + (1022 * 9999) // 262142 = 39; v2 cpu.weight as is
    assert (kv["cgroup.train.cpu.weight"], kv["cgroup.train.slice.cpu.weight"]) == ("39", "100")
    # memory.max 8 GiB; v1 limit_in_bytes 9223372036854771712 means unlimited
    assert kv["cgroup.train.slice.memory.max_bytes"] == "8589934592"
    assert (
        kv["cgroup.train.memory.max_bytes"] == kv["cgroup.train.slice.memory.high_bytes"] == "max"
    )
    # v2 io.max and v1 blkio.throttle.*_device into io.max.<maj:min>.<limit>
    assert kv["cgroup.train.slice.io.max.259:0.wbps"] == "1048576"
    assert kv["cgroup.train.slice.io.max.259:0.rbps"] == "max"
    assert kv["cgroup.train.io.max.8:0.rbps"] == "1048576"
    assert kv["cgroup.train.slice.io.weight.default"] == "100"


def test_real_v1_and_v2_captures_give_the_same_memory_keys() -> None:
    v1 = _kv("ref-vm__cgroup_limits.start.out")
    v2 = _kv("ref-h200__cgroup_limits.start.out")
    key1 = "cgroup.process_api/151e156b240518dffd2caab7da02b3eb.memory.max_bytes"
    assert v1[key1] == "max"  # memory.limit_in_bytes 9223372036854771712
    assert v2["cgroup.process_api/core.memory.max_bytes"] == "max"  # memory.max max
    assert v2["cgroup.process_api/core.memory.low_bytes"] == "0"
    suffix = {k.rsplit(".", 2)[-2] + "." + k.rsplit(".", 1)[-1] for k in v1}
    assert "memory.max_bytes" in suffix


def test_cmdline_uname_os_release() -> None:
    kv = _kv("ref-vm__cmdline.start.out")
    assert (kv["cmdline.psi"], kv["cmdline.quiet"], kv["cmdline.rdinit"]) == (
        "1",
        "",
        "/process_api",
    )
    assert kv["cmdline.mitigations"] == "auto,no_guest_host,no_guest_guest"
    assert kv["cmdline.init_args"].startswith("--firecracker-init --addr 0.0.0.0:2024")
    un = _kv("ref-h200__uname-a.txt")  # "... @0 x86_64 x86_64 x86_64 GNU/Linux"
    assert un["uname.kernel_release"] == "6.18.44-fc-v657-gpu"
    assert un["uname.kernel_version"] == "#1 SMP PREEMPT_DYNAMIC @0"
    assert (un["uname.machine"], un["uname.operating_system"]) == ("x86_64", "GNU/Linux")
    osr = _kv("ref-vm__os_release.start.out")
    assert (osr["os_release.pretty_name"], osr["os_release.id"]) == (
        "Debian GNU/Linux 12 (bookworm)",
        "debian",
    )


def test_lscpu_flat_and_tree_layouts_use_the_same_keys() -> None:
    flat = _kv("ref-vm__lscpu.start.out")
    assert (flat["lscpu.model_name"], flat["lscpu.cpus"], flat["lscpu.numa_nodes"]) == (
        "AMD EPYC",
        "2",
        "1",
    )
    assert (flat["lscpu.threads_per_core"], flat["lscpu.l1d_cache"]) == (
        "1",
        "64 KiB (2 instances)",
    )
    tree = _kv("handmade__lscpu-tree.txt")
    assert tree["lscpu.model_name"] == "Intel(R) Xeon(R) Platinum 8462Y+"
    assert (tree["lscpu.cpus"], tree["lscpu.numa_nodes"], tree["lscpu.sockets"]) == ("64", "2", "2")
    assert tree["lscpu.l1d_cache"] == "1.5 MiB (32 instances)"
    assert tree["lscpu.numa_node1_cpus"] == "16-31,48-63"
    assert "lscpu.vulnerability_spectre_v1" in tree and "lscpu.vulnerability_spectre_v1" in flat


def test_numactl_nodes_sizes_and_distances() -> None:
    one = _kv("ref-h200__numactl.start.out")
    assert (one["numactl.nodes"], one["numactl.node0.size_mb"], one["numactl.node0.free_mb"]) == (
        "1",
        "4443",
        "3178",
    )
    assert one["numactl.node0.distance.node0"] == "10"
    two = _kv("handmade__numactl-2node.txt")
    assert two["numactl.node1.cpus"] == "8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31"
    assert (two["numactl.node0.distance.node1"], two["numactl.node1.distance.node1"]) == (
        "21",
        "10",
    )


def test_clock_file_gives_its_own_timestamp() -> None:
    res = _parse("ref-vm__clock.start.out")
    table = res.tables["host_config"]
    kv = dict(zip(table["key"].to_list(), table["value"].to_list(), strict=True))  # type: ignore[index]
    assert kv["clock.boot_epoch_s"] == "1795976405.345"
    assert kv["clock.timezone"] == "Etc/UTC"
    ts = table["ts"].unique().to_list()  # type: ignore[index]
    assert ts == [datetime.fromtimestamp(1795977641.074614, UTC)]


def test_a_clock_epoch_beyond_any_date_costs_only_the_timestamp(tmp_path: Path) -> None:
    """Found by the fuzzer: a damaged epoch_s (1e300) raised OverflowError."""
    text = (FIX / "ref-vm__clock.start.out").read_text()
    bad = tmp_path / "clock.start.out"
    bad.write_text(re.sub(r"(?m)^epoch_s=.*$", "epoch_s=1e300", text))
    res = host_config.parse(bad, base.ParseContext(file_name=bad.name))
    res.coverage.check()
    assert any("1e+300 is not a time" in n for n in res.coverage.notes), res.coverage.notes
    assert res.tables["host_config"].height > 0


def test_ntp_sources_derive_synchronized_and_offset() -> None:
    ch = _kv("handmade__chronyc-tracking.txt")
    assert (ch["ntp.synchronized"], float(ch["ntp.offset_s"])) == ("true", -0.000012345)  # "slow"
    assert ch["ntp.stratum"] == "4"
    assert _kv("handmade__timedatectl-show.txt")["ntp.synchronized"] == "true"
    assert _kv("handmade__timedatectl-status.txt")["ntp.system_clock_synchronized"] == "yes"
    nq = _kv("handmade__ntpq-pn.txt")
    assert nq["ntp.peer.169.254.169.123.offset_ms"] == "-0.012"
    assert (nq["ntp.synchronized"], float(nq["ntp.offset_s"])) == ("true", -0.000012)


def test_pids_file_sched_and_process_keys() -> None:
    real = _kv("ref-h200__pids.start.out")
    assert (real["sched.1.policy"], real["sched.1.priority"], real["sched.1.affinity_list"]) == (
        "SCHED_OTHER",
        "0",
        "0-15",
    )
    assert real["process.1.cgroup.unified"] == "/process_api/core"
    hm = _kv("handmade__pids.end.out")
    assert (hm["sched.4242.policy"], hm["sched.4242.priority"]) == ("SCHED_FIFO", "50")
    assert hm["process.4242.status.VmRSS"] == "7340032 kB"
    assert hm["process.4242.environ.CUDA_VISIBLE_DEVICES"] == "0,1"
    assert (hm["process.4242.io.rchar"], hm["process.4242.oom_score_adj"]) == ("557781417", "-500")
    assert hm["process.4243.gone"] == "true"


def test_nvidia_topology_list_and_queries() -> None:
    topo = _kv("ref-h200__nvidia_topo.start.out")  # header underlined with ANSI escapes
    assert (topo["nvidia_topo.GPU0.GPU0"], topo["nvidia_topo.GPU0.cpu_affinity"]) == ("X", "0-15")
    assert (topo["nvidia_topo.GPU0.numa_affinity"], topo["nvidia_topo.GPU0.gpu_numa_id"]) == (
        "0",
        "N/A",
    )
    two = _kv("handmade__nvidia-topo-2gpu-nic.txt")
    assert (two["nvidia_topo.GPU0.GPU1"], two["nvidia_topo.NIC0.device"]) == ("NV18", "mlx5_0")
    lst = _kv("ref-h200__nvidia_list.start.out")
    assert lst["nvidia.gpu0.name"] == "NVIDIA H200"
    assert lst["nvidia.gpu0.uuid"] == "GPU-039f01f0-95ea-f170-43a7-2126016423ae"
    assert _kv("handmade__nvidia-L-mig.txt")["nvidia.gpu0.mig0.profile"] == "3g.40gb"
    ecc = _kv("ref-h200__nvidia_ecc.start.out")
    assert ecc["nvidia.gpu0.ecc.mode.current"] == "Enabled"
    assert ecc["nvidia.gpu0.ecc.errors.uncorrected.aggregate.total"] == "0"
    assert (ecc["nvidia.gpu0.retired_pages.pending"], ecc["nvidia.gpu0.remapped_rows.pending"]) == (
        "[N/A]",
        "No",
    )
    assert _kv("handmade__nvidia_apps.end.out")["nvidia_apps.4242.used_gpu_memory_mib"] == "71234"
    empty = _parse("ref-h200__nvidia_apps.start.out")  # header only: no process on the GPU
    assert empty.tables["host_config"].height == 0 and empty.coverage.structure == {"header": 1}


def test_snapshot_phase_and_time_from_the_manifest() -> None:
    start = datetime(2026, 11, 29, 18, 40, 41, tzinfo=UTC)
    end = datetime(2026, 11, 29, 18, 40, 46, tzinfo=UTC)
    t = _parse("ref-vm__thp.start.out", capture_start=start, capture_end=end).tables["host_config"]
    assert set(t["ts"].to_list()) == {start} and set(t["snapshot"].to_list()) == {"start"}  # type: ignore[index]
    t = _parse("handmade__pids.end.out", capture_start=start, capture_end=end).tables["host_config"]
    assert set(t["ts"].to_list()) == {end} and set(t["snapshot"].to_list()) == {"end"}  # type: ignore[index]
    res = _parse("ref-h200__sysctl-a.txt")
    assert res.tables["host_config"]["ts"].null_count() == res.tables["host_config"].height  # type: ignore[index]
    assert any("ts NULL" in n for n in res.coverage.notes)


def test_crlf_and_nul_damage_give_the_same_rows(tmp_path: Path) -> None:
    for name in ("ref-vm__lscpu.start.out", "handmade__cgroup_limits-v1-v2.start.out"):
        data = (FIX / name).read_bytes()
        bad = tmp_path / name
        bad.write_bytes(data.replace(b"\n", b"\r\n").replace(b" ", b" \x00", 3))
        a = _kv(name)
        b = host_config.parse(bad, base.ParseContext(file_name=name)).tables["host_config"]
        assert dict(zip(b["key"].to_list(), b["value"].to_list(), strict=True)) == a  # type: ignore[index]


def test_renamed_fixtures_are_still_recognised() -> None:
    for path in FILES:
        assert host_config.sniff(_read.read_head(path), "data.txt") >= 0.5, path.name


@pytest.mark.parametrize(
    "text",
    [
        "procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n"
        " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st\n"
        " 1  0      0 123456   2345 345678    0    0     1     2   30   40  1  1 98  0  0\n",
        "1764424800.002 /proc/pressure/cpu some avg10=1.20 avg60=0.80 avg300=0.31 total=96242289\n",
        "MemTotal:       24684084 kB\nMemFree:        12345678 kB\nMemAvailable:   20000000 kB\n",
        "[    0.000000] Linux version 6.8.0 (buildd@lcy02) #1 SMP\n[    0.000001] Command line: ro quiet\n",
        "Linux 6.1.0 (host) \t11/29/2026 \t_x86_64_\t(2 CPU)\n\n12:00:01 AM  CPU  %usr\n",
    ],
)
def test_other_tools_output_is_rejected(text: str) -> None:
    assert host_config.sniff(text, "data.txt") < 0.5


def test_empty_file_and_unknown_content(tmp_path: Path) -> None:
    empty = tmp_path / "sysctl.start.out"
    empty.write_bytes(b"")
    res = host_config.parse(empty, base.ParseContext(file_name=empty.name))
    res.coverage.check()
    assert res.tables["host_config"].height == 0
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\nthis is not a snapshot\n")
    with pytest.raises(ParseError):
        host_config.parse(junk, base.ParseContext(file_name=junk.name))


MUTANTS = [
    FIX / n
    for n in (
        "ref-vm__sysctl.start.out",
        "handmade__pids.end.out",
        "ref-vm__lscpu.start.out",
        "handmade__cgroup_limits-v1-v2.start.out",
        "ref-h200__nvidia_topo.start.out",
    )
]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(MUTANTS) - 1),
    cut=st.floats(0, 1),
    garbage=st.lists(st.binary(max_size=40), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_mutated_files_never_crash(which: int, cut: float, garbage: list[bytes], seed: int) -> None:
    data = MUTANTS[which].read_bytes()
    data = data[: int(len(data) * cut)] if cut < 0.9 else data
    lines = data.split(b"\n")
    rnd = random.Random(seed)
    for g in garbage:
        lines.insert(rnd.randrange(len(lines) + 1), g)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / MUTANTS[which].name
        path.write_bytes(b"\n".join(lines))
        try:
            res = host_config.parse(path, base.ParseContext(file_name=path.name))
        except ParseError:
            return
        res.coverage.check()
