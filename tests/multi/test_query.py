"""`hindsight query` and `hindsight export` on a real analysis (real pipeline, real DuckDB)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from multi_bundles import HostSpec, write_bundle
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.pipeline import Options, run
from analyzer.query import EXPORT_MARKER

SQL = "SELECT host, cpus, start_utc FROM bundle"


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("query")
    bundle = write_bundle(root, HostSpec(hostname="gpu01", seconds=30))
    db = root / "gpu01.duckdb"
    run(bundle, Options(db=db))
    return bundle, db


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_query_table_format_prints_the_rows(analysed: tuple[Path, Path]) -> None:
    code, out, _ = invoke("query", str(analysed[1]), SQL)
    assert code == 0
    lines = out.splitlines()
    assert [c.strip() for c in lines[0].split(" | ")] == ["host", "cpus", "start_utc"]
    assert lines[2].startswith("gpu01 | 16")
    assert "2026-11-29 14:00:00" in lines[2]
    assert lines[-1] == "(1 row)"


def test_query_csv_format_returns_header_and_iso_utc_times(analysed: tuple[Path, Path]) -> None:
    code, out, _ = invoke("query", str(analysed[1]), SQL, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows == [{"host": "gpu01", "cpus": "16", "start_utc": "2026-11-29T14:00:00Z"}]


def test_query_json_format_returns_an_array_of_objects(analysed: tuple[Path, Path]) -> None:
    code, out, _ = invoke("query", str(analysed[1]), SQL, "--format", "json")
    assert code == 0
    assert json.loads(out) == [{"host": "gpu01", "cpus": 16, "start_utc": "2026-11-29T14:00:00Z"}]


def test_query_parquet_format_writes_the_rows_to_a_file(
    analysed: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "r.parquet"
    sql = (
        "SELECT ts, gpu_util_mean_pct FROM signals WHERE gpu_util_mean_pct IS NOT NULL ORDER BY ts"
    )
    code, _, _ = invoke("query", str(analysed[1]), sql, "--format", "parquet", "-o", str(out))
    assert code == 0
    frame = pl.read_parquet(out)
    assert frame.height == 30 and frame["gpu_util_mean_pct"].unique().to_list() == [90.0]


def test_query_on_the_bundle_analyses_it_and_gives_the_same_rows(
    analysed: tuple[Path, Path],
) -> None:
    sql = "SELECT count(*) AS n, sum(sm_pct) AS s FROM gpu_dmon"
    from_bundle = invoke("query", str(analysed[0]), sql, "-f", "json")
    from_db = invoke("query", str(analysed[1]), sql, "-f", "json")
    assert from_bundle[0] == from_db[0] == 0
    assert json.loads(from_bundle[1]) == json.loads(from_db[1]) == [{"n": 60, "s": 5400.0}]


def test_parquet_format_without_an_output_file_is_an_input_error(
    analysed: tuple[Path, Path],
) -> None:
    code, _, err = invoke("query", str(analysed[1]), SQL, "--format", "parquet")
    assert code == 2 and "needs an output file" in err


def test_sql_error_is_one_line_and_exit_2(analysed: tuple[Path, Path]) -> None:
    code, _, err = invoke("query", str(analysed[1]), "SELECT nope FROM bundle")
    assert code == 2
    assert err.startswith("hindsight: error: SQL error:") and err.count("\n") == 1


def test_missing_source_is_exit_2(tmp_path: Path) -> None:
    code, _, err = invoke("query", str(tmp_path / "absent.tgz"), "SELECT 1")
    assert code == 2 and "no such file" in err


def test_table_output_shows_control_characters_escaped(analysed: tuple[Path, Path]) -> None:
    code, out, _ = invoke("query", str(analysed[1]), "SELECT chr(27) || '[2Jx' || chr(10) AS s")
    assert code == 0
    assert "\x1b" not in out and "\\x1b[2Jx\\n" in out


def test_database_is_opened_read_only(analysed: tuple[Path, Path]) -> None:
    code, _, err = invoke("query", str(analysed[1]), "DROP TABLE bundle")
    assert code == 2 and "read-only" in err.lower()


def test_export_writes_every_table_with_its_row_count(
    analysed: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "tables"
    code, stdout, _ = invoke("export", str(analysed[1]), str(out))
    assert code == 0
    con = duckdb.connect(str(analysed[1]), read_only=True)
    names = [r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()]
    expected = {n: con.sql(f'SELECT count(*) FROM "{n}"').fetchall()[0][0] for n in names}
    con.close()
    marker = json.loads((out / EXPORT_MARKER).read_text())
    assert marker["tables"] == expected
    for name, rows in expected.items():
        assert pl.read_parquet(out / f"{name}.parquet").height == rows
    assert f"{len(expected)} tables" in stdout
    # the export directory is itself a query source
    code, out_json, _ = invoke("query", str(out), "SELECT count(*) AS n FROM signals", "-f", "json")
    assert code == 0 and json.loads(out_json) == [{"n": expected["signals"]}]


def test_export_refuses_a_non_empty_directory_it_did_not_write(
    analysed: tuple[Path, Path], tmp_path: Path
) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    code, _, err = invoke("export", str(analysed[1]), str(tmp_path))
    assert code == 2 and "not empty" in err
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_query_tables_lists_every_table_with_its_columns(analysed: tuple[Path, Path]) -> None:
    """Issue #23: `query SOURCE --tables` instead of guessing table names."""
    code, out, _ = invoke("query", str(analysed[1]), "--tables", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    cols = {(r["table"], r["column"]) for r in rows}
    assert ("findings", "key") in cols and ("vmstat", "r") in cols and ("bundle", "host") in cols
    assert invoke("query", str(analysed[1]))[0] == 2  # neither SQL nor --tables
    assert invoke("query", str(analysed[1]), SQL, "--tables")[0] == 2  # both


def test_query_on_a_bundle_says_how_to_avoid_analysing_it_again(
    analysed: tuple[Path, Path],
) -> None:
    code, _, err = invoke("query", str(analysed[0]), SQL)
    assert code == 0 and "analysed on the fly" in err and "--db" in err
