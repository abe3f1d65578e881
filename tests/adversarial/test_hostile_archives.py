"""Hostile archives through the real `analyze`: each case ends either in a clear one-line
error with exit code 2, or in a successful analysis whose coverage lists what was refused
and why. The `jail` fixture checks that nothing landed outside the temporary directory."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Jail
from hostile import VMSTAT, Member, analyze, tar_bytes, valid, write_tgz

from analyzer.names import display_name

SYM, LNK, CHR, BLK, FIFO, DIR = (
    tarfile.SYMTYPE,
    tarfile.LNKTYPE,
    tarfile.CHRTYPE,
    tarfile.BLKTYPE,
    tarfile.FIFOTYPE,
    tarfile.DIRTYPE,
)


@dataclass(frozen=True)
class Loads:
    """Expected: exit 0, the valid file parsed, these members refused with these reasons."""

    refused: dict[str, str]


@dataclass(frozen=True)
class Fails:
    """Expected: exit 2 with one line on stderr containing ``message``."""

    message: str


Build = Callable[[Jail, Path], Path]
CASES: dict[str, tuple[Build, Callable[[Jail], Loads | Fails]]] = {}


def case(expect: Callable[[Jail], Loads | Fails]) -> Callable[[Build], Build]:
    def register(build: Build) -> Build:
        CASES[build.__name__] = (build, expect)
        return build

    return register


def tgz(j: Jail, d: Path, *members: Member) -> Path:
    return write_tgz(d / "bundle.tgz", [*valid(), *members])


# ------------------------------------------------------------------ names
@case(lambda j: Loads({f"../{j.token}": "traversal", f"b/../../{j.token}-2": "traversal"}))
def dotdot(j: Jail, d: Path) -> Path:
    return tgz(j, d, Member(f"../{j.token}", b"pwned"), Member(f"b/../../{j.token}-2", b"x"))


@case(lambda j: Loads({str(j.absolute): "absolute", f"//{j.token}": "absolute"}))
def absolute_paths(j: Jail, d: Path) -> Path:
    return tgz(j, d, Member(str(j.absolute), b"pwned"), Member(f"//{j.token}", b"pwned"))


@case(
    lambda j: Loads(
        {
            f"b\\..\\..\\{j.token}": "backslash",
            f"C:\\{j.token}": "backslash",
            f"C:/{j.token}": "absolute",
        }
    )
)
def windows_separators(j: Jail, d: Path) -> Path:
    names = [f"b\\..\\..\\{j.token}", f"C:\\{j.token}", f"C:/{j.token}"]
    return tgz(j, d, *(Member(n, b"pwned") for n in names))


@case(lambda j: Loads({f"../../{j.token}-pax": "traversal"}))
def pax_path_header_traversal(j: Jail, d: Path) -> Path:
    return tgz(j, d, Member("b/innocent.txt", b"pwned", pax={"path": f"../../{j.token}-pax"}))


@case(lambda j: Loads({"b/" + "n" * 5000: "cannot be written"}))
def name_too_long_for_the_filesystem(j: Jail, d: Path) -> Path:
    return tgz(j, d, Member("b/" + "n" * 5000, b"x\n"))


# ------------------------------------------------------------------ links and special files
@case(lambda j: Loads({"b/out": "symbolic link", "b/in": "symbolic link"}))
def symlinks_in_and_out(j: Jail, d: Path) -> Path:
    return tgz(
        j,
        d,
        Member("b/out", type=SYM, linkname=str(j.absolute)),
        Member("b/in", type=SYM, linkname="vmstat.out"),
    )


@case(lambda j: Loads({"b/out": "hard link", "b/in": "hard link"}))
def hardlinks_in_and_out(j: Jail, d: Path) -> Path:
    return tgz(
        j,
        d,
        Member("b/out", type=LNK, linkname=str(j.absolute)),
        Member("b/in", type=LNK, linkname="b/vmstat.out"),
    )


@case(lambda j: Loads({"b/lnk": "symbolic link"}))
def directory_that_is_a_symlink(j: Jail, d: Path) -> Path:
    """``b/lnk -> /tmp/<sentinel>``, then ``b/lnk/x``: written under a real directory."""
    j.absolute.mkdir()  # the target exists: a followed link would write into it
    return tgz(
        j,
        d,
        Member("b/lnk", type=SYM, linkname=str(j.absolute)),
        Member(f"b/lnk/{j.token}", b"pwned"),
    )


@case(lambda j: Loads({"b/chr": "device", "b/blk": "device", "b/fifo": "FIFO"}))
def devices_and_fifo(j: Jail, d: Path) -> Path:
    return tgz(
        j, d, Member("b/chr", type=CHR), Member("b/blk", type=BLK), Member("b/fifo", type=FIFO)
    )


@case(lambda j: Loads({"b/./vmstat.out": "duplicate"}))
def duplicate_names(j: Jail, d: Path) -> Path:
    return tgz(j, d, Member("b/./vmstat.out", b"second copy replacing the first"))


@case(lambda j: Loads({}))
def nested_tarball_is_not_opened(j: Jail, d: Path) -> Path:
    inner = gzip.compress(tar_bytes([Member(f"../../{j.token}", b"pwned")]))
    return tgz(j, d, Member("b/inner.tgz", inner))


# ------------------------------------------------------------------ streams
@case(lambda j: Fails("zip archive"))
def zip_renamed_tgz(j: Jail, d: Path) -> Path:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("vmstat.out", VMSTAT)
    (d / "bundle.tgz").write_bytes(buf.getvalue())
    return d / "bundle.tgz"


@case(lambda j: Loads({"*": "truncated"}))
def truncated_gzip_keeps_complete_members(j: Jail, d: Path) -> Path:
    raw = tar_bytes([*valid(), Member("b/big.bin", os.urandom(300_000))])
    data = gzip.compress(raw, compresslevel=1)
    (d / "bundle.tgz").write_bytes(data[: len(data) // 2])
    return d / "bundle.tgz"


@case(lambda j: Fails("no usable file in the archive (archive is truncated"))
def truncated_gzip_inside_the_first_member(j: Jail, d: Path) -> Path:
    data = gzip.compress(tar_bytes([Member("b/big.bin", os.urandom(300_000))]))
    (d / "bundle.tgz").write_bytes(data[:5000])
    return d / "bundle.tgz"


@case(lambda j: Loads({"*": "truncated"}))
def member_declares_more_bytes_than_the_archive_has(j: Jail, d: Path) -> Path:
    members = [*valid(), Member("b/liar.txt", b"short\n", size=10_000_000)]
    (d / "bundle.tgz").write_bytes(gzip.compress(tar_bytes(members)))
    return d / "bundle.tgz"


@case(lambda j: Fails("not a readable tar"))
def valid_gzip_of_random_bytes(j: Jail, d: Path) -> Path:
    (d / "bundle.tgz").write_bytes(gzip.compress(os.urandom(64 * 1024)))
    return d / "bundle.tgz"


@case(lambda j: Fails("not a bundle"))
def random_bytes(j: Jail, d: Path) -> Path:
    (d / "bundle.tgz").write_bytes(b"\x7fELF" + os.urandom(4096))
    return d / "bundle.tgz"


@case(lambda j: Fails("empty file"))
def empty_file(j: Jail, d: Path) -> Path:
    (d / "bundle.tgz").write_bytes(b"")
    return d / "bundle.tgz"


@case(lambda j: Fails("no usable file"))
def only_hostile_members(j: Jail, d: Path) -> Path:
    members = [Member(f"../{j.token}", b"x"), Member("l", type=SYM, linkname="/etc/passwd")]
    (d / "bundle.tgz").write_bytes(gzip.compress(tar_bytes(members)))
    return d / "bundle.tgz"


@case(lambda j: Fails("no usable file"))
def gzip_of_an_empty_tar(j: Jail, d: Path) -> Path:
    (d / "bundle.tgz").write_bytes(gzip.compress(tar_bytes([])))
    return d / "bundle.tgz"


@case(lambda j: Loads({}))
def plain_tar_with_trailing_garbage(j: Jail, d: Path) -> Path:
    (d / "bundle.tar").write_bytes(tar_bytes(valid()) + os.urandom(3000))
    return d / "bundle.tar"


@case(lambda j: Loads({}))
def xz_compressed_tar(j: Jail, d: Path) -> Path:
    import lzma

    (d / "bundle.tar.xz").write_bytes(lzma.compress(tar_bytes(valid())))
    return d / "bundle.tar.xz"


@case(lambda j: Loads({}))
def concatenated_gzip_members(j: Jail, d: Path) -> Path:
    raw = tar_bytes(valid())
    half = len(raw) // 2
    (d / "bundle.tgz").write_bytes(gzip.compress(raw[:half]) + gzip.compress(raw[half:]))
    return d / "bundle.tgz"


@case(lambda j: Fails("not a regular file or directory"))
def fifo_given_as_the_bundle(j: Jail, d: Path) -> Path:
    os.mkfifo(d / "bundle.tgz")
    return d / "bundle.tgz"


@case(lambda j: Loads({"evil": "symbolic link"}))
def directory_bundle_with_a_symlinked_subdirectory(j: Jail, d: Path) -> Path:
    bundle = d / "dir-bundle"
    bundle.mkdir()
    (bundle / "vmstat.out").write_bytes(VMSTAT)
    j.absolute.mkdir()
    (j.absolute / "passwd").write_bytes(VMSTAT)
    (bundle / "evil").symlink_to(j.absolute, target_is_directory=True)
    return bundle


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_archive_ends_in_its_expected_outcome(name: str, jail: Jail) -> None:
    build, expect = CASES[name]
    d = jail.root / "in"
    d.mkdir()
    try:
        bundle = build(jail, d)
        outcome = analyze(bundle, jail.root / "out")
        expected = expect(jail)
        if isinstance(expected, Fails):
            outcome.assert_clean_error(expected.message)
            return
        outcome.assert_ok()
        assert outcome.by_file()["vmstat.out"]["status"] == "parsed", outcome.rows
        refused = outcome.refused()
        for raw, reason in expected.refused.items():
            member = display_name(raw)  # names are shown in their lossless display form
            assert reason in refused.get(member, ""), (member, refused)
            assert f"refused {member[:200]}" in outcome.stderr, outcome.stderr
        assert len(refused) == len(expected.refused), refused
    finally:
        if jail.absolute.is_dir():  # made by the case itself: must be as it was left
            assert [p.name for p in jail.absolute.iterdir()] in ([], ["passwd"])
            for p in jail.absolute.iterdir():
                p.unlink()
            jail.absolute.rmdir()


def test_every_refused_member_is_in_the_collectors_table_and_the_report(jail: Jail) -> None:
    members = [Member(f"../{jail.token}", b"x"), Member("b/fifo", type=FIFO)]
    bundle = tgz(jail, jail.root, *members)
    outcome = analyze(bundle, jail.root / "out", "--db", str(jail.root / "out" / "a.duckdb"))
    outcome.assert_ok()
    import duckdb

    con = duckdb.connect(str(jail.root / "out" / "a.duckdb"), read_only=True)
    rows = dict(con.sql("SELECT file, reason FROM collectors WHERE status = 'refused'").fetchall())
    con.close()
    assert set(rows) == {f"../{jail.token}", "b/fifo"}
    assert con is not None and outcome.doc["bundle"]["refused_members"] == 2
    html = outcome.report.read_text(encoding="utf-8")
    assert f"../{jail.token}" in html and "FIFO refused" in html


def test_strict_turns_a_refused_member_into_exit_2(jail: Jail) -> None:
    bundle = tgz(jail, jail.root, Member("b/fifo", type=FIFO))
    analyze(bundle, jail.root / "out", "--strict").assert_clean_error("FIFO refused")


def test_strict_turns_a_truncated_archive_into_exit_2(jail: Jail) -> None:
    raw = tar_bytes([*valid(), Member("b/big.bin", os.urandom(300_000))])
    data = gzip.compress(raw, compresslevel=1)
    (jail.root / "t.tgz").write_bytes(data[: len(data) // 2])
    analyze(jail.root / "t.tgz", jail.root / "out", "--strict").assert_clean_error("truncated")


@pytest.mark.parametrize("cut_kib", [250, 1100, 1500])
def test_truncated_gzip_keeps_every_member_complete_before_the_cut(
    jail: Jail, cut_kib: int
) -> None:
    """Whatever the cut, small or past tarfile's 1 MiB reads: every member that ends
    before it loads, none after it does, and the cut is listed."""
    sizes = [100_000] * 20  # incompressible, so compressed offsets track the tar offsets
    members = [Member(f"b/m{i:02d}.bin", os.urandom(n)) for i, n in enumerate(sizes)]
    raw = tar_bytes(members)
    data = gzip.compress(raw, compresslevel=1)
    (jail.root / "cut.tgz").write_bytes(data[: cut_kib * 1024])
    from analyzer.bundle import open_bundle

    with open_bundle(jail.root / "cut.tgz") as bundle:
        got = [f.rel for f in bundle.files]
        assert bundle.truncated and "truncated" in bundle.truncated
        for f in bundle.files:
            assert f.path.read_bytes() == next(m.data for m in members if m.name.endswith(f.rel))
    ends = [(raw.index(m.data) + len(m.data)) for m in members]
    complete = sum(1 for e in ends if e <= cut_kib * 1024 * 0.98)  # ~2 % gzip overhead
    assert len(got) >= complete and len(got) <= complete + 1, (got, complete)
