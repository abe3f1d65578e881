"""Parsing while the archive is read gives the same store as parsing after it.

The real H200 capture is repacked three ways: manifest last (as the capture wrote it
before 2026-11-30: nothing can be parsed early), manifest first (every data file is
parsed as soon as it is read), and manifest first plus a stray member outside the top
directory at the end (the early parses used names without the top directory, which turn
out wrong: they are dropped and redone). Tables, row order and collectors rows agree.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import duckdb
import pytest

from analyzer.parse_stage import ParseStage
from analyzer.pipeline import Options, run

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"


def _repack(tmp: Path, name: str, manifest_first: bool, stray: bool = False) -> Path:
    with tarfile.open(SAMPLE) as src:
        members = [m for m in src.getmembers() if m.isfile()]
        data = {m.name: src.extractfile(m).read() for m in members}  # type: ignore[union-attr]
    manifest = [n for n in data if n.endswith("/manifest.json")]
    rest = [n for n in data if n not in manifest]
    names = manifest + rest if manifest_first else rest + manifest
    out = tmp / f"{name}.tgz"
    with tarfile.open(out, "w:gz") as tf:
        for n in names:
            _add(tf, n, data[n])
        if stray:
            _add(tf, "stray/notes.txt", b"left here by hand\n")
    return out


def _add(tf: tarfile.TarFile, name: str, body: bytes) -> None:
    import io

    info = tarfile.TarInfo(name)
    info.size = len(body)
    tf.addfile(info, io.BytesIO(body))


def _store(tmp: Path, bundle: Path) -> tuple[dict, list]:
    db = tmp / f"{bundle.stem}.duckdb"
    result = run(bundle, Options(report=None, db=db))
    con = duckdb.connect(str(db), read_only=True)
    try:
        sourced = {
            r[0]
            for r in con.sql(
                "SELECT table_name FROM duckdb_columns() WHERE column_name = 'source_file'"
            ).fetchall()
        }
        # source tables in stored order (file names differ only with a stray member)
        tables = {
            t: con.sql(f'SELECT * EXCLUDE (source_file) FROM "{t}"').fetchall()
            for t in sorted(sourced)
        }
        tables["signals"] = con.sql("SELECT * FROM signals ORDER BY ts").fetchall()
    finally:
        con.close()
    rows = sorted(
        (str(r["file"]), r["status"], r.get("lines_parsed"), r.get("tables"))
        for r in result.collectors
    )
    return tables, rows


@pytest.mark.parametrize("stray", [False, True], ids=["one-top-directory", "stray-member"])
def test_early_parsing_stores_what_late_parsing_stores(
    tmp_path: Path, stray: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = {"early": 0, "redone": 0}
    early_of, redo = ParseStage.early, ParseStage._redo

    def spy_early(self: ParseStage) -> dict:
        found = early_of(self)
        seen["early"] += len(found)
        return found

    def spy_redo(self: ParseStage, job: object) -> None:
        seen["redone"] += 1
        return redo(self, job)

    monkeypatch.setattr(ParseStage, "early", spy_early)
    monkeypatch.setattr(ParseStage, "_redo", spy_redo)
    late = _store(tmp_path, _repack(tmp_path, "late", manifest_first=False, stray=stray))
    assert seen == {"early": 0, "redone": 0}
    early = _store(tmp_path, _repack(tmp_path, "early", manifest_first=True, stray=stray))
    assert seen["early"] > 10  # every data file was queued while the archive was read
    assert seen["redone"] == (seen["early"] if stray else 0)
    assert early[0]["mpstat_cpu"] and early[0]["iostat_device"]
    assert early == late
