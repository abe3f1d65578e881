"""Tests of analyzer/parsers/df.py (df, /proc/mounts, mountstats, lsblk) against
tests/fixtures/snapshots. Golden values are read by hand from the files; these tools run
under LC_ALL=C in the capture, so a CRLF/NUL-damaged copy stands in for a locale replay.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, df

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
KINDS = ("df", "mounts", "mountstats", "lsblk")
FILES = sorted(
    p
    for p in FIX.iterdir()
    if p.name.split("__")[-1].startswith(KINDS) and not p.name.endswith(".golden.json")
)


def _parse(name: str) -> base.ParseResult:
    res = df.parse(FIX / name, base.ParseContext(file_name=name))
    res.coverage.check()
    return res


def _rows(name: str, table: str) -> list[dict]:
    return _parse(name).tables[table].to_dicts()  # type: ignore[union-attr]


def test_fixture_set() -> None:
    assert len(FILES) == 12


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = df.parse(path, base.ParseContext(file_name=path.name))
    res.coverage.check()
    assert res.coverage.parsed_pct == 100.0
    for name, frame in res.tables.items():
        assert dict(frame.schema) == df.TABLES[name].schema  # type: ignore[union-attr]
    assert sum(frame.height for frame in res.tables.values()) > 0


def test_df_posix_kb() -> None:
    rows = {r["mount"]: r for r in _rows("ref-vm__df.start.out", "filesystems")}
    root = rows["/"]
    assert (
        root["filesystem"],
        root["size_kb"],
        root["used_kb"],
        root["avail_kb"],
        root["use_pct"],
    ) == ("/dev/vda", 264212084, 25795748, 80595164, 25.0)
    assert rows["/dev"]["snapshot"] == "start"
    assert "/mnt/sandboxing/model_tools_env/v1/python" in rows


def test_df_type_human_and_wrapped() -> None:
    t = {r["mount"]: r for r in _rows("ref-h200__df-T.txt", "filesystems")}
    assert (t["/"]["fstype"], t["/"]["size_kb"], t["/"]["used_kb"]) == ("ext4", 264212084, 16891348)
    h = {r["mount"]: r for r in _rows("ref-h200__df-h.txt", "filesystems")}
    assert (h["/"]["size_kb"], h["/"]["used_kb"], h["/"]["avail_kb"]) == (
        252 * 1024**2,
        17 * 1024**2,
        64 * 1024**2,
    )
    assert h["/mnt/sandboxing/model_tools_env/v1/python"]["size_kb"] == 4
    w = _rows("handmade__df-k-wrapped.txt", "filesystems")
    assert (w[0]["filesystem"], w[0]["size_kb"], w[0]["mount"]) == (
        "/dev/mapper/vg_really_long_volume_group_name-lv_root",
        51475068,
        "/",
    )


def test_proc_mounts_and_mountstats() -> None:
    m = _rows("ref-vm__mounts.start.out", "mounts")
    root = next(r for r in m if r["mount"] == "/")
    assert (root["device"], root["fstype"], root["origin"]) == ("/dev/vda", "ext4", "mounts")
    assert root["options"] == "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534"
    assert sum(r["fstype"] == "cgroup" for r in m) == 9
    ms = _rows("ref-h200__mountstats.end.out", "mounts")
    assert ("/dev/vdb", "/usr/local/nvidia", "squashfs") in {
        (r["device"], r["mount"], r["fstype"]) for r in ms
    }
    nfs = _parse("handmade__mountstats-nfs.end.out")
    stats = {r["key"]: r for r in nfs.tables["mountstats"].to_dicts()}  # type: ignore[union-attr]
    assert stats["age"]["value"] == "86400" and stats["age"]["mount"] == "/data"
    assert stats["READ"]["value"] == "256 256 0 40960 1059840 12 3400 3500 0"
    assert nfs.coverage.structure == {"section header": 1}


def test_lsblk_tree_parents_and_mountpoints() -> None:
    rows = {r["name"]: r for r in _rows("handmade__lsblk-tree.txt", "block_devices")}
    assert rows["nvme0n1p2"]["parent"] == "nvme0n1" and rows["nvme0n1"]["parent"] is None
    assert rows["nvme0n1p2"]["mountpoints"] == "/var/lib/docker\n/"
    assert (rows["nvme0n1p2"]["maj"], rows["nvme0n1p2"]["min"]) == (259, 2)
    assert (rows["sr0"]["removable"], rows["sr0"]["type"], rows["sr0"]["size_bytes"]) == (
        True,
        "rom",
        1024**3,
    )
    real = {r["name"]: r for r in _rows("ref-h200__lsblk.start.out", "block_devices")}
    assert (real["vdb"]["read_only"], real["vdb"]["size"], real["vdb"]["mountpoints"]) == (
        True,
        "303.6M",
        "/usr/local/nvidia",
    )


def test_crlf_and_nul_damage_give_the_same_rows(tmp_path: Path) -> None:
    name = "ref-vm__df.start.out"
    bad = tmp_path / name
    bad.write_bytes(
        (FIX / name).read_bytes().replace(b"\n", b"\r\n").replace(b"tmpfs", b"tmp\x00fs", 1)
    )
    res = df.parse(bad, base.ParseContext(file_name=name))
    assert res.tables["filesystems"].to_dicts() == _rows(name, "filesystems")  # type: ignore[union-attr]


def test_renamed_fixtures_are_recognised_and_others_rejected() -> None:
    for path in FILES:
        assert df.sniff(_read.read_head(path), "data.txt") >= 0.5, path.name
    for text in (
        "vm.swappiness = 60\nvm.dirty_ratio = 20\n",
        "/sys/kernel/mm/transparent_hugepage/enabled always [madvise] never\n",
        "  PID  PPID USER  COMMAND\n    1     0 root  init\n",
        "MemTotal:       24684084 kB\nMemFree:        12345678 kB\n",
    ):
        assert df.sniff(text, "data.txt") < 0.5


def test_garbage_only_is_a_parse_error(tmp_path: Path) -> None:
    p = tmp_path / "x.txt"
    p.write_text("nothing to see\n")
    with pytest.raises(ParseError):
        df.parse(p, base.ParseContext(file_name=p.name))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(FILES) - 1),
    cut=st.floats(0, 1),
    garbage=st.lists(st.binary(max_size=60), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_mutated_files_never_crash(which: int, cut: float, garbage: list[bytes], seed: int) -> None:
    data = FILES[which].read_bytes()
    data = data[: int(len(data) * cut)] if cut < 0.9 else data
    lines = data.split(b"\n")
    rnd = random.Random(seed)
    for g in garbage:
        lines.insert(rnd.randrange(len(lines) + 1), g)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / FILES[which].name
        path.write_bytes(b"\n".join(lines))
        try:
            res = df.parse(path, base.ParseContext(file_name=path.name))
        except ParseError:
            return
        res.coverage.check()
