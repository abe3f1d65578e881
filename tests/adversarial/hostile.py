"""Builders of hostile bundles and a runner for the real `analyze` command line.

Everything here is real: archives are written with ``tarfile``/``gzip``, the command is
the shipped typer app run in process (``CliRunner``: the same code path as the console
script, minus the interpreter start-up), the database is DuckDB.

`Outcome` is what a user sees: exit code, stdout, stderr, and the ``--json`` document.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from analyzer.cli import app

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"
VMSTAT_FILE = FIX / "vmstat" / "local-debian12-procps4.0.2__vmstat-t-1-3.txt"
VMSTAT = VMSTAT_FILE.read_bytes()
ERROR_PREFIX = "hindsight: error: "


@dataclass
class Member:
    """One archive member. ``size`` overrides the declared size (a lying header)."""

    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    size: int | None = None
    pax: dict[str, str] = field(default_factory=dict)


def tar_bytes(members: list[Member]) -> bytes:
    """An uncompressed tar stream (PAX format, so any name can be encoded)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = m.type
            info.linkname = m.linkname
            info.size = len(m.data) if m.type == tarfile.REGTYPE else 0
            info.pax_headers = dict(m.pax)
            info.mode = 0o755 if m.type == tarfile.DIRTYPE else 0o644
            tar.addfile(info, io.BytesIO(m.data) if info.size else None)
    data = buf.getvalue()
    return data if all(m.size is None for m in members) else _lie_sizes(data, members)


def _lie_sizes(data: bytes, members: list[Member]) -> bytes:
    """Rewrite declared sizes in the headers (and their checksums) after the fact."""
    out = bytearray(data)
    offset = 0
    for m in members:
        while True:  # skip PAX extended headers ('x') preceding the member's own header
            header = out[offset : offset + 512]
            if header[156:157] != b"x":
                break
            size = int(header[124:136].rstrip(b"\0 ") or b"0", 8)
            offset += 512 + (size + 511) // 512 * 512
        real = len(m.data) if m.type == tarfile.REGTYPE else 0
        if m.size is not None:
            out[offset + 124 : offset + 136] = b"%011o\0" % m.size
            out[offset + 148 : offset + 156] = b" " * 8
            out[offset + 148 : offset + 156] = b"%06o\0 " % sum(out[offset : offset + 512])
        offset += 512 + (real + 511) // 512 * 512
    return bytes(out)


def write_tgz(path: Path, members: list[Member]) -> Path:
    path.write_bytes(gzip.compress(tar_bytes(members), compresslevel=1, mtime=0))
    return path


def valid(top: str = "b") -> list[Member]:
    """The part of a hostile bundle that must still load: one real vmstat -t file."""
    return [Member(f"{top}/vmstat.out", VMSTAT)]


@dataclass
class Outcome:
    """What `analyze` gave: exit code, output streams and the --json document."""

    code: int
    stdout: str
    stderr: str
    doc: dict[str, Any] | None
    report: Path

    @property
    def rows(self) -> list[dict[str, Any]]:
        return (self.doc or {}).get("collectors", [])

    def by_file(self) -> dict[str, dict[str, Any]]:
        return {str(r.get("file")): r for r in self.rows}

    def refused(self) -> dict[str, str]:
        return {str(r["file"]): str(r.get("reason")) for r in self.rows if r["status"] == "refused"}

    def assert_clean_error(self, match: str) -> None:
        """Exit 2 and exactly one line on stderr: the error, saying ``match``."""
        assert self.code == 2, (self.code, self.stderr, self.stdout)
        lines = self.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), self.stderr
        assert match.lower() in lines[0].lower(), (match, lines[0])
        assert "Traceback" not in self.stdout + self.stderr
        assert not self.report.exists()

    def assert_ok(self) -> None:
        """Exit 0, a report, a JSON document, no traceback, stderr only refusal lines."""
        assert self.code == 0, (self.code, self.stderr)
        assert "Traceback" not in self.stdout + self.stderr
        assert all(ln.startswith("hindsight: refused ") for ln in self.stderr.splitlines()), (
            self.stderr
        )
        assert self.doc is not None and self.report.stat().st_size > 0


def analyze(bundle: Path, out: Path, *options: str) -> Outcome:
    """Run ``analyze BUNDLE -o OUT/report.html --json OUT/result.json -q OPTIONS``."""
    out.mkdir(parents=True, exist_ok=True)
    report, js = out / "report.html", out / "result.json"
    report.unlink(missing_ok=True)
    js.unlink(missing_ok=True)
    args = ["analyze", str(bundle), "-q", "-o", str(report), "--json", str(js), *options]
    result = CliRunner().invoke(app, args)
    doc = json.loads(js.read_text(encoding="utf-8")) if js.exists() else None
    return Outcome(result.exit_code, result.stdout, result.stderr, doc, report)


def token() -> str:
    return "sentinel-" + uuid.uuid4().hex[:12]
