"""Every fixture parses to its golden file (``<fixture>.golden.json`` beside it), the one
shared golden runner of the parsers (issue #17; jc keeps ``*.out``/``*.json`` pairs the
same way).

A golden file holds what the parse stage stores for the fixture as a one-file bundle:
each table's row count, columns (name, DuckDB type, a digest of the values in stored
order) and SHA-256, and the coverage (lines parsed / structure / skipped with reasons,
notes); or, for a file no parser takes, the sniffer's verdict. They were recorded before
the parser rewrite of issue #17 (``python -m tests.parsers_digest.digest`` explains the
digests). A difference is intended only with a reason: re-record that fixture with
``python -m tests.parsers_digest.digest --write --only fixtures`` and say why in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.parsers_digest import digest

FIXTURES = digest.fixture_paths()


def test_every_fixture_has_a_golden_file() -> None:
    missing = [digest.fixture_key(p) for p in FIXTURES if not digest.golden_path(p).exists()]
    assert not missing, f"fixtures without a golden file (record them with --write): {missing}"


@pytest.mark.parametrize("fixture", FIXTURES, ids=[digest.fixture_key(p)[9:] for p in FIXTURES])
def test_fixture_parses_to_its_golden_file(fixture: Path, tmp_path: Path) -> None:
    golden = digest.golden_path(fixture)
    if not golden.exists():
        pytest.skip("no golden file (test_every_fixture_has_a_golden_file fails)")
    want = json.loads(golden.read_text())
    _key, verdict, got = digest._fixture_task((str(fixture), str(tmp_path / "work")))
    if "not_parsed" in want:
        assert got is None, "recorded as taken by no parser, now parsed"
        assert verdict == want["not_parsed"]
        return
    assert got is not None, f"recorded as parsed, now taken by no parser ({verdict})"
    diffs = digest._input_diffs(want, got)
    assert not diffs, "\n".join(diffs)
