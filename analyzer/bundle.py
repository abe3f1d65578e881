"""Stage 1, *open*: a `.tgz`/`.tar.gz`/`.tar` or a directory -> `Bundle`.

Extraction streams the archive (never the whole archive in memory) into a private
temporary directory and is safe member by member:

- only regular files are extracted; directories are created by us, never taken from the
  archive; symlinks, hardlinks, devices and FIFOs are refused;
- absolute names, ``..`` components, backslashes (Windows separators), NUL bytes and
  duplicate names are refused;
- caps on member count, bytes per member, total bytes and compression ratio (`Limits`).

Names are names (analyzer/names.py): ``BundleFile.rel`` is the member's name in its
display form (bytes that are not UTF-8 as ``\\xNN``, control and bidi characters
escaped), the one form every table, report and JSON shows; files are opened by exact path
(never a pattern). A directory's file that cannot be read, or a sub-directory that cannot
be listed, is refused with the operating system's reason; the rest still loads.

A refused member is recorded in ``Bundle.refused`` with its reason and the rest still
loads; ``strict=True`` turns the first refusal into a `BundleError`. A truncated archive
yields every member that was complete. Whole-bundle failures raise `BundleError`.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from analyzer.cleanup import register_cleanup, unregister_cleanup
from analyzer.errors import BundleError
from analyzer.names import display_name

try:  # ISA-L gzip: several times faster than zlib; optional.
    from isal import igzip as _gzip
    from isal.isal_zlib import error as _isal_error
except ImportError:  # pragma: no cover - exercised only without isal
    import gzip as _gzip

    _isal_error = zlib.error

# Everything a corrupt, truncated or non-tar stream can raise while we read it.
_STREAM_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, _isal_error)

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Resource bounds for reading a bundle. Sized for a legitimate 72 h capture of a
    128-CPU / 8-GPU / 16-disk node (~4 GB of text, ~100 files), with headroom.

    - ``max_members``: members read from the archive (any type) before the rest is ignored.
    - ``max_member_bytes``: uncompressed size of one file.
    - ``max_total_bytes``: uncompressed size of all extracted files together.
    - ``max_ratio``: uncompressed ÷ compressed bytes, checked once more than
      ``ratio_floor_bytes`` have been extracted (small files compress arbitrarily well).
    - ``max_line_bytes`` / ``max_lines``: per-file bounds applied by the parsers.
    """

    max_members: int = 10_000
    max_member_bytes: int = 16 * GIB
    max_total_bytes: int = 32 * GIB
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 256 * MIB
    max_line_bytes: int = 1 * MIB
    max_lines: int = 200_000_000


@dataclass(frozen=True)
class BundleFile:
    """One input file: its path relative to the bundle root and on disk."""

    rel: str
    path: Path
    size: int


@dataclass
class Bundle:
    """An opened bundle. ``root`` is the directory holding the files (the single
    top-level directory of an archive is descended into). ``workdir`` is the private
    temporary directory to remove with `close()` (None for a directory input)."""

    name: str
    source: Path
    root: Path
    files: list[BundleFile]
    refused: list[tuple[str, str]] = field(default_factory=list)
    workdir: Path | None = None
    truncated: str | None = None

    def close(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            unregister_cleanup(self.workdir)
            self.workdir = None

    def scratch(self) -> Path:
        """The bundle's private temporary directory (made on first use for a directory)."""
        if self.workdir is None:
            self.workdir = register_cleanup(Path(tempfile.mkdtemp(prefix="hindsight-")))
        return self.workdir

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bundle_name(source: Path) -> str:
    """`/x/hindsight-gpu01.tgz` -> `hindsight-gpu01` (also .tar.gz, .tar, directories),
    in its display form (`analyzer.names.display_name`)."""
    name = display_name(source.name.rstrip("/")) or "bundle"
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or "bundle"
    return name


def open_bundle(
    source: Path,
    *,
    limits: Limits | None = None,
    strict: bool = False,
    tmp_parent: Path | None = None,
    on_file: Callable[[BundleFile], None] | None = None,
) -> Bundle:
    """Open a bundle (archive or directory). See the module docstring for the rules.

    ``on_file`` is called with each archive member as soon as it is completely extracted
    (``rel`` still as named in the archive, before the single top directory is dropped),
    so that work on it can start while the rest is read.
    """
    limits = limits or Limits()
    if not os.path.lexists(source):
        raise BundleError(f"{source}: no such file or directory")
    if source.is_dir():
        return _open_directory(source, limits, strict)
    if not source.is_file():
        raise BundleError(f"{source}: not a regular file or directory")
    try:
        size = source.stat().st_size
        with open(source, "rb") as f:
            magic = f.read(512)
    except OSError as e:
        raise BundleError(f"{source}: cannot read: {e.strerror}") from None
    if size == 0:
        raise BundleError(f"{source}: empty file, not a bundle")
    try:
        kind = _archive_kind(magic)
    except BundleError as e:
        raise BundleError(f"{source}: {e}") from None
    workdir = register_cleanup(Path(tempfile.mkdtemp(prefix="hindsight-", dir=tmp_parent)))
    bundle = Bundle(
        name=bundle_name(source), source=source, root=workdir, files=[], workdir=workdir
    )
    try:
        _extract(source, kind, size, workdir, bundle, limits, strict, on_file)
    except BaseException:
        bundle.close()
        raise
    if not bundle.files:
        bundle.close()
        why = f" ({bundle.truncated})" if bundle.truncated else ""
        refused = f"; {len(bundle.refused)} member(s) refused" if bundle.refused else ""
        raise BundleError(f"{source}: no usable file in the archive{why}{refused}")
    _descend_single_top(bundle)
    return bundle


def _archive_kind(magic: bytes) -> str:
    if magic[:2] == b"\x1f\x8b":
        return "gzip"
    if len(magic) >= 262 and magic[257:262] == b"ustar":
        return "tar"
    if magic[:4] == b"PK\x03\x04":
        raise BundleError("this is a zip archive, not a tar/tgz bundle")
    if magic[:4] == b"\x28\xb5\x2f\xfd":  # Python 3.11's tarfile has no zstd
        raise BundleError(
            "a zstd-compressed archive, which this Python cannot read: unpack it first "
            "(zstd -d FILE.tar.zst, or tar --zstd -xf FILE.tar.zst) and analyse the .tar or directory"
        )
    if magic[:3] == b"BZh" or magic[:6] == b"\xfd7zXZ\x00":
        return "compressed"
    if magic[:2] == b"\x96\xd5":  # sysstat's binary daily file (sa01..sa31): SYSSTAT_MAGIC
        raise BundleError(
            "a binary sysstat daily file (saDD), not a bundle: convert it on a host with the "
            "same sysstat version (sadf -j FILE > sa.json, or sar -A -f FILE > sar.txt) and "
            "analyse a directory holding that file"
        )
    raise BundleError("not a bundle: neither a gzip/tar archive nor a directory")


class _SalvageReader:
    """Hands on every byte of a cut gzip stream that precedes the cut, then raises.

    ISA-L's GzipFile drops the output of a read that meets the cut (up to the request
    size, 1 MiB for tarfile here), so a truncated bundle would lose its last complete
    members, or all of them under 1 MiB. Only then, the rest is decompressed again with
    the standard library's gzip, which stops exactly at the cut: normal reads stay fast.
    """

    def __init__(self, raw: IO[bytes], source: Path) -> None:
        self.raw, self.source, self.pos = raw, source, 0
        self.error: BaseException | None = None

    def read(self, n: int = -1) -> bytes:
        if self.error is not None:
            raise self.error
        try:
            data = self.raw.read(n)
        except _STREAM_ERRORS as e:
            self.error = e
            data = self._salvage(n)
            if not data:
                raise
        self.pos += len(data)
        return data

    def _salvage(self, n: int) -> bytes:
        import gzip

        parts: list[bytes] = []
        with open(self.source, "rb") as f, gzip.GzipFile(fileobj=f, mode="rb") as gz:
            try:
                gz.seek(self.pos)
                while n < 0 or sum(map(len, parts)) < n:
                    chunk = gz.read1(64 * 1024)
                    if not chunk:
                        break
                    parts.append(chunk)
            except _STREAM_ERRORS:
                pass
        data = b"".join(parts)
        return data if n < 0 else data[:n]


class _ForwardReader:
    """A read-only stream that tarfile's "r:" mode may seek, forward only.

    Forward seeks (skipping a refused member, its padding) read and drop the bytes. A
    backward seek, which only a crafted archive could ask for (e.g. a sparse map out of
    order), raises instead of rewinding a compressed stream: rewinding restarts the
    decompression and a hostile archive could make it quadratic.
    """

    def __init__(self, raw: Any) -> None:
        self.raw, self.pos = raw, 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.pos += len(data)
        return data

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self.pos + offset if whence == 1 else -1
        if target < self.pos:
            raise tarfile.ReadError("archive asks to seek backwards in the stream")
        while self.pos < target:
            if not self.read(min(target - self.pos, 1 << 20)):
                break
        return self.pos

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True


class _CountingReader:
    """File wrapper counting compressed bytes consumed (for the ratio check)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.count += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        n = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        self.count += n or 0
        return n or 0

    def readable(self) -> bool:
        return True


def _extract(
    source: Path,
    kind: str,
    size: int,
    workdir: Path,
    bundle: Bundle,
    limits: Limits,
    strict: bool,
    on_file: Callable[[BundleFile], None] | None = None,
) -> None:
    raw = open(source, "rb")
    counter = _CountingReader(raw)
    try:
        if kind == "gzip":
            gz = _gzip.GzipFile(fileobj=counter, mode="rb")  # type: ignore[arg-type]
            stream = _ForwardReader(_SalvageReader(gz, source))
            # "r:" reads member data with one copy; "r|" (tarfile's stream mode) copies
            # every byte three times through its 10 KiB record buffer (4x the CPU).
            tar = tarfile.open(fileobj=stream, mode="r:")  # type: ignore[arg-type]
        elif kind == "tar":
            tar = tarfile.open(fileobj=_ForwardReader(counter), mode="r:")  # type: ignore[arg-type]
        else:
            tar = tarfile.open(fileobj=counter, mode="r|*")  # type: ignore[arg-type]
    except _STREAM_ERRORS as e:
        raw.close()
        raise BundleError(f"{source}: not a readable tar archive ({_short(e)})") from None
    seen: set[str] = set()
    total = 0
    members = 0

    def refuse(name: str, reason: str) -> None:
        shown = display_name(name)
        if strict:
            raise BundleError(f"refused member {shown!r}: {reason} (--strict)")
        bundle.refused.append((shown, reason))

    try:
        for member in tar:
            members += 1
            if members > limits.max_members:
                refuse("*", f"more than {limits.max_members} members; the rest was not read")
                break
            name = member.name
            if member.isdir():
                continue
            rel, why = safe_member_name(name)
            if why:
                refuse(name, why)
                continue
            rel = display_name(rel)  # also its name on disk: UTF-8, no control character
            if not member.isreg():
                refuse(name, _member_type(member))
                continue
            if rel in seen:
                refuse(name, "duplicate member name (first one kept)")
                continue
            if member.size > limits.max_member_bytes:
                refuse(name, f"member larger than {limits.max_member_bytes} bytes")
                continue
            if total + member.size > limits.max_total_bytes:
                refuse(name, f"total uncompressed size would exceed {limits.max_total_bytes} bytes")
                continue
            target = workdir / rel

            def ratio_ok(extra: int, done: int = total) -> bool:
                out = done + extra
                return out <= limits.ratio_floor_bytes or out <= limits.max_ratio * max(
                    counter.count, 1
                )

            try:
                written = _write_member(tar, member, target, workdir, ratio_ok)
            except _RatioExceeded:
                refuse(
                    name,
                    f"compression ratio above {limits.max_ratio:g}: looks like a bomb; extraction stopped",
                )
                break
            if written is None:
                refuse(name, "cannot be written (name too long or invalid)")
                continue
            seen.add(rel)
            total += written
            bundle.files.append(BundleFile(rel=rel, path=target, size=written))
            if on_file is not None:
                on_file(bundle.files[-1])
    except _STREAM_ERRORS as e:
        # Truncated or corrupt stream: keep every member that was complete.
        bundle.truncated = (
            f"archive is truncated or corrupt after {len(bundle.files)} file(s): {_short(e)}"
        )
        _drop_partial(bundle, workdir)
        if strict and bundle.files:
            raise BundleError(bundle.truncated + " (--strict)") from None
    finally:
        tar.close()
        raw.close()


class _RatioExceeded(Exception):
    """Raised while streaming a member whose output outgrows the compression-ratio cap."""


def _write_member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    target: Path,
    root: Path,
    ratio_ok: Callable[[int], bool],
) -> int | None:
    """Stream one regular member to ``target``; returns bytes written, None if unwritable.

    Parent directories are created by us; since no link is ever created inside ``root``,
    ``target`` cannot resolve outside it. O_EXCL|O_NOFOLLOW guard the open anyway.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(root.resolve()):
            return None
        fd = os.open(
            target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600
        )
    except (OSError, ValueError):
        return None
    written = 0
    src = tar.extractfile(member)
    buf = memoryview(bytearray(4 << 20))
    with os.fdopen(fd, "wb") as out:
        if src is not None:
            while n := src.readinto(buf):
                out.write(buf[:n])
                written += n
                if not ratio_ok(written):
                    break
    if not ratio_ok(written):
        target.unlink(missing_ok=True)
        raise _RatioExceeded
    if written != member.size:  # the stream ended inside this member
        target.unlink(missing_ok=True)
        raise EOFError(f"member {member.name!r} is incomplete")
    return written


def _drop_partial(bundle: Bundle, workdir: Path) -> None:
    """After a stream error, remove any file on disk that is not a completed member."""
    done = {f.path for f in bundle.files}
    for path in workdir.rglob("*"):
        if path.is_file() and path not in done:
            path.unlink(missing_ok=True)


_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


def safe_member_name(name: str) -> tuple[str, str | None]:
    """Normalise an archive member name; return (relative path, refusal reason or None)."""
    if not name or "\x00" in name:
        return "", "empty name or NUL byte in name"
    if "\\" in name:
        return "", "backslash in name (Windows path separator)"
    if name.startswith("/") or _WINDOWS_DRIVE.match(name):
        return "", "absolute path"
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return "", "path traversal ('..')"
    if not parts:
        return "", "empty name"
    return "/".join(parts), None


def _member_type(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"symbolic link (to {member.linkname!r}) refused"
    if member.islnk():
        return f"hard link (to {member.linkname!r}) refused"
    if member.ischr() or member.isblk():
        return "device node refused"
    if member.isfifo():
        return "FIFO refused"
    return "not a regular file"


def _open_directory(source: Path, limits: Limits, strict: bool) -> Bundle:
    """A directory is read in place; symlinks and special files in it are refused, and so
    are files that cannot be read and sub-directories that cannot be listed (with the OS
    reason). A file whose path is not valid UTF-8 is read through a private link or copy
    under its display name (the readers take text paths)."""
    bundle = Bundle(name=bundle_name(source.resolve()), source=source, root=source, files=[])
    count = total = 0

    def unlistable(e: OSError) -> None:
        where = Path(e.filename or source)
        rel = where.relative_to(source).as_posix() if where != source else "."
        _refuse_dir(bundle, strict, display_name(rel), f"cannot list: {e.strerror}")

    for dirpath, dirnames, filenames in os.walk(source, followlinks=False, onerror=unlistable):
        here = Path(dirpath)
        for d in list(dirnames):
            if (here / d).is_symlink():
                dirnames.remove(d)
                rel = display_name((here / d).relative_to(source).as_posix())
                _refuse_dir(bundle, strict, rel, "symbolic link refused")
        dirnames.sort()
        for fname in sorted(filenames):
            path = here / fname
            rel = display_name(path.relative_to(source).as_posix())
            count += 1
            if count > limits.max_members:
                _refuse_dir(
                    bundle,
                    strict,
                    "*",
                    f"more than {limits.max_members} files; the rest was not read",
                )
                return bundle
            if path.is_symlink():
                _refuse_dir(bundle, strict, rel, "symbolic link refused")
                continue
            if not path.is_file():
                _refuse_dir(bundle, strict, rel, "not a regular file")
                continue
            why = _unreadable(path)
            if why:
                _refuse_dir(bundle, strict, rel, why)
                continue
            size = path.stat().st_size
            if size > limits.max_member_bytes:
                _refuse_dir(
                    bundle, strict, rel, f"file larger than {limits.max_member_bytes} bytes"
                )
                continue
            if total + size > limits.max_total_bytes:
                why = f"total size would exceed {limits.max_total_bytes} bytes"
                _refuse_dir(bundle, strict, rel, why)
                continue
            total += size
            if not _is_text_path(path):
                path = _text_path_copy(bundle, path, rel)
            bundle.files.append(BundleFile(rel=rel, path=path, size=size))
    if not bundle.files and not bundle.refused:
        raise BundleError(f"{display_name(str(source))}: empty directory, not a bundle")
    return bundle


def _unreadable(path: Path) -> str | None:
    """The OS reason why ``path`` cannot be opened for reading, or None."""
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except OSError as e:
        return f"cannot read: {e.strerror}"
    os.close(fd)
    return None


def _is_text_path(path: Path) -> bool:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # surrogateescape bytes: not UTF-8
        return False
    return True


def _text_path_copy(bundle: Bundle, path: Path, rel: str) -> Path:
    """``path`` reachable under a UTF-8 name in the bundle's scratch directory."""
    target = bundle.scratch() / "names" / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(path, target)
    except OSError:
        shutil.copyfile(path, target)
    return target


def _refuse_dir(bundle: Bundle, strict: bool, rel: str, reason: str) -> None:
    if strict:
        raise BundleError(f"refused {rel!r}: {reason} (--strict)")
    bundle.refused.append((rel, reason))


def _descend_single_top(bundle: Bundle) -> None:
    """Archives usually hold one top-level directory; make it the root."""
    tops = {f.rel.split("/", 1)[0] for f in bundle.files}
    if len(tops) == 1 and all("/" in f.rel for f in bundle.files):
        top = tops.pop()
        bundle.root = bundle.root / top
        bundle.files = [
            BundleFile(rel=f.rel.split("/", 1)[1], path=f.path, size=f.size) for f in bundle.files
        ]


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:200]
