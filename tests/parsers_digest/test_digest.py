"""The parse stage's tables on every sample are those recorded in before.json (issue #17:
the parser rewrite must leave tables, row order, types, values and coverage as they were;
the fixtures' are checked against their golden files by test_golden.py). The bench
bundles are checked by hand (``--check``, minutes):
``python -m tests.parsers_digest.digest --check --only bench``.

A difference is printed one per line; if it is intended (a fixture added or fixed, a
parser bug fixed on purpose), re-record with ``--write --only samples`` and say why in the
commit message.
"""

from __future__ import annotations

import duckdb
import pytest

from analyzer.pipeline import Options, run
from tests.parsers_digest import digest

# ~20 s on the 2-core VM when idle, ~40 s with other test runs beside it
pytestmark = pytest.mark.slow


def test_samples_digest_as_recorded() -> None:
    diffs = digest.check(["samples"], say=lambda _msg: None)
    assert not diffs, f"{len(diffs)} difference(s) from before.json:\n" + "\n".join(diffs)


def test_digest_reads_what_analyze_stores(tmp_path) -> None:
    """The digest's parse (the pipeline's stages up to the ``collectors`` rows, without
    the analysis) stores the same parser tables and collectors rows as ``analyze --db``."""
    sample = digest.SAMPLES / "h200-checkpoint-stall.tgz"
    ours = digest.parse_and_digest(sample)["tables"]
    db = tmp_path / "h200.duckdb"
    run(sample, Options(db=db))
    con = duckdb.connect(str(db), read_only=True)
    try:
        theirs = {name: digest.digest_table(con, name) for name in ours}
    finally:
        con.close()
    # the analysis updates the bundle row afterwards (e.g. the data's span): not parser output
    ours.pop("bundle")
    theirs.pop("bundle")
    assert ours == theirs
