"""Every resource bound (docs/limits.md) exercised through its command-line option with
small values: exceeding one refuses the offending member or file, lists it in coverage
with the reason and goes on; ``--strict`` makes it fatal (exit 2). Bounds are in bytes,
lines and counts, so outcomes do not depend on the machine's speed.

Two cases use the defaults on purpose: 100 000 tiny members and a decompression bomb of
8 GiB of zeros in an 8 MiB gzip (both built by hand in well under a second)."""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

import pytest
from conftest import Jail
from hostile import FIX, REPO, VMSTAT, Member, analyze, valid, write_tgz

from analyzer.bundle import Limits

DMESG = FIX / "dmesg" / "local-debian12-utillinux2.38.1-kernel6.18__memcg-oom__dmesg-iso.txt"
_RNG = random.Random(8)
VARIED_TEXT = "".join(
    f"{i:8d} {_RNG.random():.6f} {_RNG.randint(0, 10**9):10d}\n" for i in range(120_000)
).encode()  # ~3.4 MB that compresses about 2.5:1, like real tool output


def ustar_header(name: str, size: int) -> bytes:
    """A minimal ustar header, built by hand (tarfile takes 10 s for 100 000 of them)."""
    h = bytearray(512)
    h[0 : len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[108:124] = b"0000000\x000000000\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"00000000000\0"
    h[156:157] = b"0"
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def ustar_member(name: str, data: bytes) -> bytes:
    return ustar_header(name, len(data)) + data.ljust(-(-len(data) // 512) * 512, b"\0")


def many_tiny_members(path: Path, n: int) -> Path:
    tiny = b"".join(ustar_member(f"b/f{i:06d}.txt", b"x\n") for i in range(n))
    raw = ustar_member("b/vmstat.out", VMSTAT) + tiny + b"\0" * 1024
    path.write_bytes(gzip.compress(raw, compresslevel=1))
    return path


def zero_bomb(path: Path, gib: int) -> Path:
    """A valid vmstat member, then one member of ``gib`` GiB of zeros: concatenated gzip
    members of 1 MiB of zeros each (~1 KiB compressed), so the file is ~gib MiB."""
    zeros = gzip.compress(bytes(1 << 20), compresslevel=9, mtime=0)
    head = ustar_member("b/vmstat.out", VMSTAT) + ustar_header("b/zeros", gib << 30)
    parts = [gzip.compress(head)]
    parts += [zeros] * (gib << 10)
    parts.append(gzip.compress(b"\0" * 1024))
    path.write_bytes(b"".join(parts))
    return path


# ------------------------------------------------------------------ archive bounds
@pytest.mark.parametrize(
    ("option", "members", "refused", "reason"),
    [
        (
            ["--max-members", "3"],
            [Member(f"b/f{i}.txt", b"x\n") for i in range(6)],
            "*",
            "more than 3 members",
        ),
        (
            ["--max-file-mb", "0.001"],
            [Member("b/big.txt", b"y" * 2000)],
            "b/big.txt",
            "larger than 1048 bytes",
        ),
        (
            ["--max-total-mb", "0.001"],
            [Member("b/a.txt", b"a" * 500), Member("b/b.txt", b"b" * 500)],
            "b/b.txt",
            "would exceed 1048 bytes",
        ),
        (
            ["--max-ratio", "50", "--ratio-floor-mb", "1"],
            [Member("b/zeros", bytes(4 << 20))],
            "b/zeros",
            "compression ratio above 50",
        ),
    ],
    ids=["max-members", "max-file-mb", "max-total-mb", "max-ratio"],
)
def test_archive_bound_refuses_the_member_and_strict_makes_it_fatal(
    jail: Jail, option: list[str], members: list[Member], refused: str, reason: str
) -> None:
    bundle = write_tgz(jail.root / "b.tgz", [*valid(), *members])
    outcome = analyze(bundle, jail.root / "out", *option)
    outcome.assert_ok()
    assert outcome.by_file()["vmstat.out"]["status"] == "parsed"
    assert reason in outcome.refused()[refused], outcome.refused()
    assert f"refused {refused}: " in outcome.stderr
    analyze(bundle, jail.root / "out", *option, "--strict").assert_clean_error(reason)


def test_ratio_bound_judges_by_ratio_not_size(jail: Jail) -> None:
    """3.4 MB of varied text (ratio ~2.5) passes the same bound that stops 4 MiB of zeros."""
    bundle = write_tgz(jail.root / "b.tgz", [*valid(), Member("b/text.txt", VARIED_TEXT)])
    outcome = analyze(bundle, jail.root / "out", "--max-ratio", "50", "--ratio-floor-mb", "1")
    outcome.assert_ok()
    assert outcome.refused() == {}
    assert outcome.by_file()["text.txt"]["bytes"] == len(VARIED_TEXT)


def test_directory_bundle_obeys_member_file_and_total_bounds(jail: Jail) -> None:
    d = jail.root / "dir"
    d.mkdir()
    (d / "a-vmstat.out").write_bytes(VMSTAT)
    (d / "b-big.txt").write_bytes(b"y" * 3000)
    (d / "c.txt").write_bytes(b"c" * 900)
    (d / "d.txt").write_bytes(b"d\n")
    outcome = analyze(d, jail.root / "out", "--max-file-mb", "0.002", "--max-total-mb", "0.0013")
    outcome.assert_ok()
    refused = outcome.refused()
    assert "larger than 2097 bytes" in refused["b-big.txt"]
    assert "would exceed 1363 bytes" in refused["c.txt"]
    assert outcome.by_file()["d.txt"]["status"] != "refused"
    outcome = analyze(d, jail.root / "out", "--max-members", "2")
    assert "more than 2 files" in outcome.refused()["*"]


# ------------------------------------------------------------------ per-file line bounds
def test_line_longer_than_the_bound_refuses_the_file_and_strict_makes_it_fatal(jail: Jail) -> None:
    long_line = VMSTAT + b" 1  0 " + b"9" * 300 + b"\n"
    bundle = write_tgz(jail.root / "b.tgz", [*valid(), Member("b/long.out", long_line)])
    outcome = analyze(bundle, jail.root / "out", "--max-line-kb", "0.2")
    outcome.assert_ok()
    assert outcome.refused() == {
        "long.out": "line 6 is longer than 204 bytes (bound max_line_bytes): file not parsed"
    }
    assert outcome.by_file()["vmstat.out"]["status"] == "parsed"
    analyze(bundle, jail.root / "out", "--max-line-kb", "0.2", "--strict").assert_clean_error(
        "long.out: line 6 is longer than 204 bytes"
    )


def test_file_with_more_lines_than_the_bound_is_refused(jail: Jail) -> None:
    bundle = write_tgz(jail.root / "b.tgz", valid())
    outcome = analyze(bundle, jail.root / "out", "--max-lines", "4")
    outcome.assert_ok()
    assert outcome.refused() == {
        "vmstat.out": "more than 4 lines (bound max_lines): file not parsed"
    }
    assert "vmstat" not in outcome.doc["tables"]
    assert analyze(bundle, jail.root / "out", "--max-lines", "5").refused() == {}
    analyze(bundle, jail.root / "out", "--max-lines", "4", "--strict").assert_clean_error(
        "vmstat.out: more than 4 lines"
    )


def test_one_line_of_100_mb_is_refused_with_default_bounds(jail: Jail) -> None:
    d = jail.root / "dir"
    d.mkdir()
    (d / "vmstat.out").write_bytes(VMSTAT)
    with open(d / "kern.log", "wb") as f:  # written in chunks: never 100 MB in memory
        f.write(DMESG.read_bytes())
        f.write(b"2026-11-29T17:26:00,000000+00:00 ")
        for _ in range(100):
            f.write(b"A" * (1 << 20))
        f.write(b"\n")
    outcome = analyze(d, jail.root / "out")
    outcome.assert_ok()
    n = DMESG.read_bytes().count(b"\n") + 1
    assert outcome.refused() == {
        "kern.log": f"line {n} is longer than 1048576 bytes (bound max_line_bytes): file not parsed"
    }
    assert outcome.by_file()["kern.log"]["tool"] == "dmesg"


# ------------------------------------------------------------------ real-size cases, default bounds
def test_100000_tiny_members_stop_at_the_member_bound(jail: Jail) -> None:
    """The bound, not the archive, decides how many files are written. (With the default
    of 10 000 the run is bound by the disk: creating a file costs ~2 ms on the CI VM.)"""
    bundle = many_tiny_members(jail.root / "many.tgz", 100_000)
    assert bundle.stat().st_size < 2 << 20
    outcome = analyze(bundle, jail.root / "out", "--max-members", "300")
    outcome.assert_ok()
    assert len(outcome.rows) == 301
    assert outcome.refused() == {"*": "more than 300 members; the rest was not read"}
    assert Limits().max_members == 10_000


def test_decompression_bomb_of_8_gib_is_stopped_by_the_ratio(jail: Jail) -> None:
    bundle = zero_bomb(jail.root / "bomb.tgz", 8)
    assert bundle.stat().st_size < 10 << 20
    outcome = analyze(bundle, jail.root / "out")
    outcome.assert_ok()
    assert outcome.by_file()["vmstat.out"]["status"] == "parsed"
    assert "looks like a bomb" in outcome.refused()["b/zeros"]
    assert os.listdir(jail.scratch) == []


DOCUMENTED = {  # field -> (option, default as docs/limits.md writes it, default value)
    "max_members": ("--max-members", "10 000", 10_000),
    "max_member_bytes": ("--max-file-mb", "16 GiB", 16 << 30),
    "max_total_bytes": ("--max-total-mb", "32 GiB", 32 << 30),
    "max_ratio": ("--max-ratio", "200 ×", 200),
    "ratio_floor_bytes": ("--ratio-floor-mb", "256 MiB", 256 << 20),
    "max_line_bytes": ("--max-line-kb", "1 MiB", 1 << 20),
    "max_lines": ("--max-lines", "200 000 000", 200_000_000),
}


def test_limits_doc_lists_every_bound_with_its_default_and_option() -> None:
    import dataclasses

    from typer.testing import CliRunner

    from analyzer.cli import app

    doc = (REPO / "docs" / "limits.md").read_text(encoding="utf-8")
    rows = {ln.split("|")[1].strip(" `"): ln for ln in doc.splitlines() if ln.startswith("| `")}
    help_text = CliRunner().invoke(app, ["analyze", "--help"], env={"COLUMNS": "200"}).stdout
    assert set(rows) == {f.name for f in dataclasses.fields(Limits)} == set(DOCUMENTED)
    for name, (option, shown, value) in DOCUMENTED.items():
        assert getattr(Limits(), name) == value, name
        assert f"`{option} " in rows[name] and shown in rows[name], rows[name]
        assert option in help_text, option
