"""Shared fixtures: one small generated bundle per incident kind, analysed once per session
with the real pipeline (real parsers, real DuckDB, no report)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from analyzer.pipeline import Options, run
from analyzer.synth import Spec, generate, scenario

SECONDS = 300  # long enough for a 130 s hung task, a baseline and a negative control


@dataclass
class Analysed:
    bundle: Path
    truth: dict
    collectors: list[dict]
    findings: list[dict]
    db: Path

    def sql(self, q: str) -> list[tuple]:
        with duckdb.connect(str(self.db), read_only=True) as con:
            return con.sql(q).fetchall()


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("synth")


@pytest.fixture(scope="session")
def analysed(synth_dir: Path):
    """kind -> Analysed, built lazily and cached for the session."""
    cache: dict[str, Analysed] = {}

    def get(kind: str) -> Analysed:
        if kind not in cache:
            spec = Spec(seconds=SECONDS, seed=11, incidents=scenario(kind, SECONDS))
            out = generate(spec, synth_dir / f"synth-{kind}.tgz")
            truth = json.loads((synth_dir / f"synth-{kind}.ground-truth.json").read_text())
            db = synth_dir / f"{kind}.duckdb"
            res = run(out, Options(report=None, db=db))
            cache[kind] = Analysed(out, truth, res.collectors, res.findings, db)
        return cache[kind]

    return get


@pytest.fixture(scope="session")
def real_sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real H200 capture of samples/, extracted (the layout synth must reproduce)."""
    import tarfile

    src = Path(__file__).resolve().parents[2] / "samples" / "h200-checkpoint-stall.tgz"
    dest = tmp_path_factory.mktemp("real")
    with tarfile.open(src) as tar:
        tar.extractall(dest, filter="data")
    return next(dest.iterdir())
