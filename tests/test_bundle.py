"""The safe bundle reader: hostile archives are refused member by member, nothing is
written outside the private temporary directory, whole-bundle failures are BundleError."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import uuid
from pathlib import Path

import pytest

from analyzer.bundle import Limits, open_bundle, safe_member_name
from analyzer.errors import BundleError

VMSTAT = b"procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n"


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"x\n", **kw: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data) if info.isreg() else None)


def _tgz(path: Path, members: list[tuple[str, bytes, dict]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data, kw in members:
            _add(tar, name, data, **kw)
    return path


@pytest.fixture
def sentinel(tmp_path: Path):
    """Paths a hostile member aims at, relative and absolute; none may exist afterwards."""
    token = uuid.uuid4().hex
    absolute = Path("/tmp") / f"hindsight-sentinel-{token}"
    relative_dir = tmp_path / "cwd"
    relative_dir.mkdir()
    yield token, absolute, relative_dir
    assert not absolute.exists(), "a member was written to an absolute path"
    absolute.unlink(missing_ok=True)


def test_traversal_absolute_and_links_are_refused_and_the_rest_loads(
    tmp_path: Path, sentinel, monkeypatch
) -> None:
    token, absolute, cwd = sentinel
    monkeypatch.chdir(cwd)
    archive = _tgz(
        tmp_path / "evil.tgz",
        [
            ("b/vmstat.out", VMSTAT, {}),
            (f"../../{token}-up", b"pwned", {}),
            (str(absolute), b"pwned", {}),
            ("b/link", b"", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}),
            ("b/hard", b"", {"type": tarfile.LNKTYPE, "linkname": "/etc/passwd"}),
            ("b/dev", b"", {"type": tarfile.CHRTYPE}),
            ("b/fifo", b"", {"type": tarfile.FIFOTYPE}),
            ("b\\..\\..\\win", b"pwned", {}),
            ("b/vmstat.out", b"second copy", {}),
        ],
    )
    with open_bundle(archive) as bundle:
        workdir = bundle.workdir
        assert [f.rel for f in bundle.files] == ["vmstat.out"]
        assert bundle.files[0].path.read_bytes() == VMSTAT
        reasons = dict(bundle.refused)
        assert "path traversal" in reasons[f"../../{token}-up"]
        assert reasons[str(absolute)] == "absolute path"
        assert "symbolic link" in reasons["b/link"]
        assert "hard link" in reasons["b/hard"]
        assert "device" in reasons["b/dev"]
        assert "FIFO" in reasons["b/fifo"]
        assert (
            "backslash" in reasons["b\\\\..\\\\..\\\\win"]
        )  # the display form: \\ for a backslash
        assert "duplicate" in reasons["b/vmstat.out"]
    assert workdir is not None and not workdir.exists(), "temporary directory not removed"
    assert not any(token in p.name for p in tmp_path.rglob("*"))
    assert not any(p.name.endswith(f"{token}-up") for p in Path("/tmp").iterdir())


def test_strict_makes_a_refusal_fatal(tmp_path: Path) -> None:
    archive = _tgz(tmp_path / "evil.tgz", [("vmstat.out", VMSTAT, {}), ("../x", b"1", {})])
    with pytest.raises(BundleError, match="path traversal"):
        open_bundle(archive, strict=True)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (os.urandom(4096), "not a bundle"),
        (gzip.compress(os.urandom(4096)), "not a readable tar"),
        (b"PK\x03\x04" + os.urandom(100), "zip archive"),
    ],
    ids=["empty", "random-bytes", "gzip-of-garbage", "zip-renamed"],
)
def test_not_a_bundle_is_a_bundle_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bundle.tgz"
    path.write_bytes(content)
    with pytest.raises(BundleError, match=message):
        open_bundle(path)


def test_truncated_archive_yields_complete_members(tmp_path: Path) -> None:
    big = os.urandom(200_000)  # incompressible, so truncation lands inside it
    archive = _tgz(tmp_path / "t.tgz", [("d/a.out", VMSTAT, {}), ("d/b.out", big, {})])
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with open_bundle(archive) as bundle:
        assert [f.rel for f in bundle.files] == ["a.out"]
        assert bundle.truncated and "truncated" in bundle.truncated
        assert not (bundle.root / "b.out").exists()


def test_member_count_cap(tmp_path: Path) -> None:
    archive = _tgz(tmp_path / "many.tgz", [(f"f{i}.txt", b"x\n", {}) for i in range(20)])
    with open_bundle(archive, limits=Limits(max_members=5)) as bundle:
        assert len(bundle.files) == 5
        assert any("more than 5 members" in r for _, r in bundle.refused)


def test_compression_bomb_is_stopped_by_ratio(tmp_path: Path) -> None:
    zeros = b"\x00" * (8 << 20)
    archive = _tgz(tmp_path / "bomb.tgz", [("ok.txt", b"x\n", {}), ("zeros", zeros, {})])
    limits = Limits(ratio_floor_bytes=1 << 20, max_ratio=50)
    with open_bundle(archive, limits=limits) as bundle:
        assert [f.rel for f in bundle.files] == ["ok.txt"]
        assert any("ratio" in r for _, r in bundle.refused)
        assert not (bundle.root / "zeros").exists()


def test_total_size_cap(tmp_path: Path) -> None:
    archive = _tgz(tmp_path / "big.tgz", [("a", b"1" * 1000, {}), ("b", b"2" * 1000, {})])
    with open_bundle(archive, limits=Limits(max_total_bytes=1500)) as bundle:
        assert [f.rel for f in bundle.files] == ["a"]


def test_directory_input_is_read_in_place_and_symlinks_refused(tmp_path: Path) -> None:
    d = tmp_path / "hand-made"
    d.mkdir()
    (d / "vmstat.txt").write_bytes(VMSTAT)
    (d / "passwd").symlink_to("/etc/passwd")
    with open_bundle(d) as bundle:
        assert [f.rel for f in bundle.files] == ["vmstat.txt"]
        assert dict(bundle.refused)["passwd"] == "symbolic link refused"
        assert bundle.workdir is None
    assert (d / "vmstat.txt").exists()


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a/b.txt", True),
        ("./a/./b", True),
        ("../a", False),
        ("a/../../b", False),
        ("/etc/x", False),
        ("C:/x", False),
        ("a\\b", False),
        ("", False),
    ],
)
def test_safe_member_name(name: str, ok: bool) -> None:
    _rel, why = safe_member_name(name)
    assert (why is None) == ok


def test_the_archive_stream_moves_forward_only() -> None:
    """tarfile's "r:" mode may seek; over a compressed stream only forward (a backward
    seek would restart the decompression: a crafted archive could make it quadratic)."""
    from analyzer.bundle import _ForwardReader

    stream = _ForwardReader(io.BytesIO(bytes(range(256)) * 4))
    assert stream.read(10) == bytes(range(10)) and stream.tell() == 10
    assert stream.seek(300) == 300 and stream.read(1) == bytes([300 % 256])
    assert stream.seek(5, 1) == 306
    with pytest.raises(tarfile.ReadError, match="backwards"):
        stream.seek(100)
    assert stream.seek(5000) == 1024  # past the end: stops at the end, like a short read


def test_members_of_many_sizes_round_trip_through_the_forward_reader(tmp_path: Path) -> None:
    sizes = [0, 1, 511, 512, 513, 1 << 20, (4 << 20) + 7]  # block edges and the 4 MiB buffer
    path = tmp_path / "b.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for n in sizes:
            data = os.urandom(n)
            info = tarfile.TarInfo(f"d/f{n}.bin")
            info.size = n
            tar.addfile(info, io.BytesIO(data))
            (tmp_path / f"f{n}.bin").write_bytes(data)
    with open_bundle(path) as bundle:
        got = {f.rel: f.path.read_bytes() for f in bundle.files}
    assert sorted(got) == sorted(f"f{n}.bin" for n in sizes)  # the single top folder is dropped
    for rel, data in got.items():
        assert data == (tmp_path / rel.rsplit("/", 1)[-1]).read_bytes()
