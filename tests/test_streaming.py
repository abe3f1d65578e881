"""Rows streamed by big-file parsers land in the store exactly once, or not at all.

The real H200 capture is analysed twice: once read in tiny blocks (mpstat then streams
its rows into DuckDB through ``ParseContext.sink``, a few frames per file) and once in the
default blocks; the stored tables must hold the same rows. A parser that fails after
streaming some blocks leaves none of its rows behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer import store as store_module
from analyzer.parsers import _blocks, mpstat
from analyzer.pipeline import Options, run
from analyzer.store import Store

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"
TABLES = ("mpstat_cpu", "mpstat_irq", "iostat_device", "iostat_cpu")


def _analyse(tmp: Path, name: str) -> dict[str, list[tuple]]:
    db = tmp / f"{name}.duckdb"
    result = run(SAMPLE, Options(report=None, db=db))
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {
            t: con.sql(f'SELECT * EXCLUDE (source_file) FROM "{t}" ORDER BY ALL').fetchall()
            for t in TABLES
        }
    finally:
        con.close()
    out["_status"] = sorted(  # type: ignore[assignment]
        (str(r["file"]), str(r["status"]), str(r.get("lines_parsed"))) for r in result.collectors
    )
    return out


def test_streamed_tables_equal_the_ones_read_in_default_blocks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_blocks, "CHUNK_BYTES", 32768)
    streamed = _analyse(tmp_path, "streamed")
    monkeypatch.undo()
    whole = _analyse(tmp_path, "whole")
    assert streamed["mpstat_cpu"] and streamed["mpstat_irq"]
    assert streamed == whole


def test_a_parser_failing_midway_leaves_no_streamed_rows(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_blocks, "CHUNK_BYTES", 32768)
    real = mpstat._block
    calls = {"n": 0}

    def flaky(block, f, cov):  # the third block of series/mpstat.out (about 9) fails
        calls["n"] += f.path.name == "mpstat.out"
        if f.path.name == "mpstat.out" and calls["n"] == 3:
            raise RuntimeError("injected failure")
        return real(block, f, cov)

    monkeypatch.setattr(mpstat, "_block", flaky)
    monkeypatch.setattr(store_module, "BULK_ROWS", 1)  # streamed rows reach DuckDB at once
    db = tmp_path / "failed.duckdb"
    result = run(SAMPLE, Options(report=None, db=db))
    failed = [r for r in result.collectors if r["status"] == "failed"]
    assert [r["file"] for r in failed] == ["series/mpstat.out"]
    assert "injected failure" in failed[0]["reason"]
    assert calls["n"] == 3
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        n = con.sql(
            "SELECT count(*) FROM mpstat_cpu WHERE source_file = 'series/mpstat.out'"
        ).fetchall()[0][0]
    finally:
        con.close()
    assert n == 0
    assert result.tables.get("mpstat_cpu", 0) == 0


@pytest.mark.parametrize("size", [0, 1])
def test_store_discard_only_removes_that_files_rows(tmp_path: Path, size: int) -> None:
    import polars as pl

    store = Store(tmp_path / "d.duckdb")
    frame = pl.DataFrame({"cpu": [1, 2, 3]})
    store.write("mpstat_cpu", frame, "a.out")
    store.write("mpstat_cpu", frame.head(size + 1), "b.out")
    assert store.discard("mpstat_cpu", "a.out") == 3
    assert store.con.sql("SELECT count(*) FROM mpstat_cpu").fetchall()[0][0] == size + 1
    store.close()


def test_appended_rows_wait_for_a_bulk_insert_and_keep_their_order(
    tmp_path: Path, monkeypatch
) -> None:
    import threading

    import polars as pl

    from analyzer import store as store_module

    monkeypatch.setattr(store_module, "BULK_ROWS", 5)
    store = Store(tmp_path / "bulk.duckdb")

    def feed(table: str, name: str) -> None:
        for start in range(0, 12, 3):
            store.append(table, pl.DataFrame({"cpu": [start, start + 1, start + 2]}), name)
        store.flush(name)

    # two files of two tables on two threads, as the parse stage does
    threads = [
        threading.Thread(target=feed, args=("mpstat_cpu", "a.out")),
        threading.Thread(target=feed, args=("mpstat_irq", "b.out")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for table, name in (("mpstat_cpu", "a.out"), ("mpstat_irq", "b.out")):
        rows = store.con.sql(f"SELECT cpu, source_file FROM {table}").fetchall()
        assert rows == [(i, name) for i in range(12)]
    store.close()


def test_discard_counts_rows_written_and_rows_still_waiting(tmp_path: Path, monkeypatch) -> None:
    import polars as pl

    from analyzer import store as store_module

    monkeypatch.setattr(store_module, "BULK_ROWS", 4)
    store = Store(tmp_path / "wait.duckdb")
    for _ in range(3):  # 3 + 3 rows -> one insert of 6, then 3 waiting
        store.append("mpstat_cpu", pl.DataFrame({"cpu": [1, 2, 3]}), "a.out")
    assert store.con.sql("SELECT count(*) FROM mpstat_cpu").fetchall()[0][0] == 6
    assert store.discard("mpstat_cpu", "a.out") == 9
    store.flush("a.out")
    assert store.con.sql("SELECT count(*) FROM mpstat_cpu").fetchall()[0][0] == 0
    store.close()
