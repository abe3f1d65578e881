"""Properties of the bundle reader over generated archives (hypothesis):

- any list of members (any names, any types, lying sizes) opens or fails with
  `BundleError`, nothing else; every file it returns is a regular file inside its private
  directory with exactly the member's bytes; every other member is refused with a reason;
- any corruption of a valid archive (flipped bytes, truncation) does the same;
- nothing is ever written outside the private directory (the `jail` fixture).
"""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

from conftest import Jail
from hostile import Member, tar_bytes, valid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.bundle import Limits, open_bundle
from analyzer.errors import BundleError

EXAMPLES = int(os.environ.get("HINDSIGHT_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PART = st.sampled_from(["..", ".", "", "b", "a b", "\\", "C:", "~", "..\\..", "\u2025", "x" * 300])
NAMES = st.lists(st.one_of(PART, st.text(min_size=1, max_size=12)), min_size=1, max_size=5).map(
    "/".join
) | st.sampled_from(["/etc/passwd", "//x", "/", "./", "b/./../c"])
TYPES = st.sampled_from(
    [tarfile.REGTYPE] * 4 + [tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE]
)
MEMBERS = st.lists(
    st.builds(
        Member,
        name=NAMES,
        data=st.binary(max_size=2000),
        type=TYPES,
        linkname=st.sampled_from(["", "/etc/passwd", "../x", "b/vmstat.out"]),
    ),
    max_size=8,
)


def check_opened(archive: Path, limits: Limits) -> None:
    try:
        bundle = open_bundle(archive, limits=limits)
    except BundleError as e:
        assert str(e) and "\n" not in str(e)
        return
    with bundle:
        workdir = bundle.workdir
        assert workdir is not None
        for f in bundle.files:
            assert f.path.resolve().is_relative_to(workdir.resolve())
            assert f.path.is_file() and not f.path.is_symlink()
            assert f.path.stat().st_size == f.size
        on_disk = {p for p in workdir.rglob("*") if p.is_file() or p.is_symlink()}
        assert on_disk == {f.path for f in bundle.files}, "stray file in the private directory"
        assert all(reason for _, reason in bundle.refused)
    assert not workdir.exists()


@SETTINGS
@given(members=MEMBERS, gz=st.booleans())
def test_any_member_list_opens_safely_or_is_a_bundle_error(
    jail: Jail, members: list[Member], gz: bool
) -> None:
    try:
        raw = tar_bytes([*valid(), *members])
    except (ValueError, UnicodeError, tarfile.TarError):
        return  # tarfile itself cannot write this name
    archive = jail.root / "fuzz.tgz"
    archive.write_bytes(gzip.compress(raw, compresslevel=1) if gz else raw)
    check_opened(archive, Limits(max_members=6, max_total_bytes=6000))
    if gz:  # with ample bounds, every regular member with a safe, unique name is kept
        with open_bundle(archive) as bundle:
            assert {"vmstat.out", "b/vmstat.out"} & {f.rel for f in bundle.files}


@SETTINGS
@given(
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
    gz=st.booleans(),
)
def test_corrupted_archive_opens_safely_or_is_a_bundle_error(
    jail: Jail, flips: list[tuple[int, int]], cut: int | None, gz: bool
) -> None:
    raw = tar_bytes(
        [
            *valid(),
            Member("b/second.txt", os.urandom(3000)),
            Member("b/l", type=tarfile.SYMTYPE, linkname="/"),
        ]
    )
    data = bytearray(gzip.compress(raw) if gz else raw)
    for at, mask in flips:
        data[at % len(data)] ^= mask
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    archive = jail.root / "fuzz.tgz"
    archive.write_bytes(bytes(data))
    check_opened(archive, Limits())
