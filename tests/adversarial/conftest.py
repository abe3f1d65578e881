"""The jail every hostile case runs in: a private temporary directory for the analyzer's
own scratch space, a private working directory, and sentinel paths that hostile members
aim at (relative and absolute). After the test, nothing named after the sentinel token may
exist anywhere we can look, and the analyzer's scratch space must be empty again."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile import token


@dataclass
class Jail:
    token: str
    root: Path  # the test's tmp_path
    cwd: Path  # the working directory of the analysis
    scratch: Path  # tempfile's directory during the test (extraction, UTF-8 copies)
    absolute: Path  # an absolute path outside the jail that members aim at

    def watched(self) -> list[Path]:
        """Every place a traversal could land, outside the jail included."""
        tops = [Path("/"), Path("/tmp"), Path(tempfile.gettempdir()), Path.home()]
        tops += [self.scratch.parent, self.root.parent, *self.cwd.parents]
        return tops


@pytest.fixture
def jail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Jail]:
    scratch = tmp_path / "scratch"
    cwd = tmp_path / "deep" / "er" / "cwd"
    scratch.mkdir()
    cwd.mkdir(parents=True)
    t = token()
    j = Jail(t, tmp_path, cwd, scratch, Path("/tmp") / f"hindsight-{t}")
    outside = j.watched()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(cwd)
    yield j
    monkeypatch.undo()
    hits = [p for p in tmp_path.rglob(f"*{t}*")]
    for top in outside:
        try:
            hits += [top / n for n in os.listdir(top) if t in n]
        except OSError:
            continue
    assert not hits, f"hostile member escaped: {hits}"
    assert not j.absolute.exists()
    assert list(scratch.iterdir()) == [], "the analyzer left scratch files behind"
