"""Redaction: a copy of a bundle with host names, addresses and user names masked.

``hindsight redact BUNDLE -o CLEAN.tgz`` and ``analyze --redact`` call `redact_bundle`.

1. *open*: the bundle is opened exactly like for an analysis (`analyzer.bundle`: safe,
   streamed extraction; refused members are listed, never copied);
2. *discover* (`analyzer._redact_discover`): host and user names from the manifest,
   snapshots and logs, so that a name seen late is masked everywhere;
3. *rewrite* (`analyzer._redact_rules`): every file, and every file name, goes through
   one combined regex in blocks of whole lines (never a whole file in memory). The same
   original always maps to the same token (``host-1``, ``user-1``, ``ip-1``, ``ip6-1``,
   ``mac-1``, ``pat-1``), so correlations across files survive and the redacted bundle
   analyses to the same findings;
4. *map*: the token -> original values mapping is written next to the output
   (``CLEAN.tgz.redaction-map.json``, mode 0600), never inside the bundle.

Files with NUL bytes (binary, e.g. compressed pstore records) cannot be checked and are
withheld: listed in the mapping file and the result, not copied. What is masked and how
to check it: docs/redaction.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from analyzer._redact_discover import discover
from analyzer._redact_rules import Redactor
from analyzer.bundle import BundleFile, Limits, open_bundle
from analyzer.cleanup import register_cleanup, remove
from analyzer.errors import HindsightError
from analyzer.outputs import replacing

try:  # ISA-L gzip compresses several times faster than zlib; optional.
    from isal import igzip as _gzip

    _LEVEL = 2
except ImportError:  # pragma: no cover - exercised only without isal
    import gzip as _gzip  # type: ignore[no-redef]

    _LEVEL = 6

BLOCK = 4 << 20  # bytes read per step (then up to the end of the line)
MAX_LINE_EXTRA = 1 << 20  # a line longer than this is cut at its last blank
BINARY_PROBE = 64 << 10
MAP_SUFFIX = ".redaction-map.json"


@dataclass
class RedactionResult:
    """What `redact_bundle` wrote. ``name`` is the redacted bundle name."""

    output: Path
    name: str
    files: int
    bytes_in: int
    bytes_out: int
    counts: dict[str, int]
    tokens: dict[str, dict[str, object]]
    not_masked: dict[str, str]
    withheld: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    source: str = ""
    mapping: Path | None = None

    def write_mapping(self, path: Path) -> Path:
        """Write the token -> original mapping (private: mode 0600)."""
        doc: dict[str, Any] = {
            "format": "hindsight-redaction-map",
            "version": 1,
            "warning": "holds the original values: keep it private, never attach it to a ticket",
            "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": self.source,
            "output": str(self.output),
            "patterns": self.patterns,
            "tokens": self.tokens,
            "not_masked": self.not_masked,
            "withheld": self.withheld,
            "refused": [{"file": n, "reason": r} for n, r in self.refused],
        }
        with replacing(path, "redaction mapping") as tmp:  # whole or not at all
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2, ensure_ascii=False, default=str)
                f.write("\n")
        self.mapping = path
        return path

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in self.counts.items()) or "nothing"
        lines = [f"redacted {self.files} files: masked {kinds}", f"bundle: {self.output}"]
        if self.mapping:
            lines.append(f"mapping (private, keep it off the ticket): {self.mapping}")
        lines += [f"withheld (binary, cannot be checked): {w}" for w in self.withheld]
        lines += [f"not masked: {v!r}: {why}" for v, why in self.not_masked.items()]
        return "\n".join(lines)


def default_mapping_path(output: Path) -> Path:
    return output.with_name(output.name + MAP_SUFFIX)


def redact_bundle(
    source: Path,
    output: Path,
    *,
    patterns: list[str] | tuple[str, ...] = (),
    mapping: Path | None = None,
    limits: Limits | None = None,
    progress: Callable[[str], None] | None = None,
) -> RedactionResult:
    """Write a redacted copy of ``source`` to ``output`` (a ``.tgz`` path, or an existing
    directory to write ``<redacted name>.tgz`` into). ``mapping``: where to write the
    mapping file (None: not written; call `RedactionResult.write_mapping`)."""
    say = progress or (lambda _m: None)
    _check_paths(source, output, mapping)
    with open_bundle(source, limits=limits) as bundle:
        say("finding host and user names")
        ids = discover(bundle.files, bundle.name)
        try:
            red = Redactor(ids, list(patterns))
        except re.error as e:
            raise HindsightError(
                f"--redact-pattern is not a valid regular expression: {e}"
            ) from None
        name = _text(red.sub(_b(bundle.name)))
        target = output / f"{name}.tgz" if output.is_dir() else output
        result = RedactionResult(
            output=target,
            name=name,
            files=0,
            bytes_in=0,
            bytes_out=0,
            counts={},
            tokens={},
            not_masked=dict(ids.not_masked),
            patterns=list(patterns),
            source=str(source),
        )
        result.refused = [(_text(red.sub(_b(n))), r) for n, r in bundle.refused]
        with replacing(target, "redacted bundle", [source]) as part:
            _write_tar(part, bundle.files, red, result, say)
    result.counts = red.table.counts()
    result.tokens = red.table.values
    if mapping is not None:
        result.write_mapping(mapping)
    return result


def _write_tar(
    part: Path,
    files: list[BundleFile],
    red: Redactor,
    result: RedactionResult,
    say: Callable[[str], None],
) -> None:
    """Stream the redacted members into one gzip'd tar (each member via a scratch file:
    a tar header needs the size before the content)."""
    scratch = Path(tempfile.mkdtemp(prefix="hindsight-redact-"))
    try:
        with (
            open(part, "wb") as raw,
            _gzip.open(raw, "wb", compresslevel=_LEVEL) as gz,
            tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            _add_dir(tar, result.name)
            used: set[str] = set()
            for f in sorted(files, key=lambda f: f.rel):
                say(f"redacting {f.rel}")
                rel = _unique(_text(red.sub(_b(f.rel))), used)
                if _is_binary(f.path):
                    result.withheld.append(rel)
                    continue
                out = scratch / "member"
                with open(f.path, "rb") as src, open(out, "wb") as dst:
                    n_out = _redact_stream(src, dst, red)
                _add_file(tar, f"{result.name}/{rel}", out)
                result.files += 1
                result.bytes_in += f.size
                result.bytes_out += n_out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check_paths(source: Path, output: Path, mapping: Path | None) -> None:
    src = source.resolve()
    for p in (output, mapping):
        if p is None:
            continue
        dest = p.resolve()
        if dest == src or (src.is_dir() and dest.is_relative_to(src)):
            raise HindsightError(f"{p}: the output must not be the bundle or inside it")
    parent = output if output.is_dir() else output.parent
    if not parent.is_dir():
        raise HindsightError(f"{parent}: no such directory for the redacted bundle")


def _blocks(src: IO[bytes]) -> Iterator[bytes]:
    """Blocks of whole lines. A line longer than `MAX_LINE_EXTRA` is cut at its last
    blank (its remainder starts the next block), so no identifier is split."""
    carry = b""
    while True:
        block = src.read(BLOCK)
        if not block:
            if carry:
                yield carry
            return
        block = carry + block
        carry = b""
        if not block.endswith(b"\n"):
            block += src.readline(MAX_LINE_EXTRA)
        if not block.endswith(b"\n"):
            cut = max(block.rfind(b" ", len(block) - 65536), block.rfind(b"\t", len(block) - 65536))
            if cut > 0:
                block, carry = block[: cut + 1], block[cut + 1 :]
        yield block


def _redact_stream(src: IO[bytes], dst: IO[bytes], red: Redactor) -> int:
    n = 0
    for block in _blocks(src):
        out = red.sub_block(block)
        dst.write(out)
        n += len(out)
    return n


def _is_binary(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(BINARY_PROBE)
    except OSError:
        return True


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = int(datetime.now(UTC).timestamp())
    tar.addfile(info)


def _add_file(tar: tarfile.TarFile, arcname: str, path: Path) -> None:
    """A plain member: no owner names (they could name a person), fixed mode."""
    info = tarfile.TarInfo(arcname)
    info.size = path.stat().st_size
    info.mode = 0o644
    info.mtime = int(path.stat().st_mtime)
    with open(path, "rb") as f:
        tar.addfile(info, f)


def _unique(rel: str, used: set[str]) -> str:
    candidate, n = rel, 1
    while candidate in used:
        n += 1
        candidate = f"{rel}~{n}"
    used.add(candidate)
    return candidate


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def redact_for_analysis(
    source: Path, patterns: list[str] | tuple[str, ...], limits: Limits | None = None
) -> RedactionResult:
    """`analyze --redact`: a redacted copy in a private temporary directory (removed at
    exit, or by `analyzer.cleanup.remove`); analyse ``result.output``, then write the
    mapping beside the report."""
    workdir = register_cleanup(tempfile.mkdtemp(prefix="hindsight-redacted-"))
    try:
        return redact_bundle(source, workdir, patterns=patterns, limits=limits)
    except BaseException:
        remove(workdir)
        raise
