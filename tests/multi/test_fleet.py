"""`hindsight fleet` on 16 generated hosts with one straggler, and the dataset it writes."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from multi_bundles import START, HostSpec, const, write_bundle
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.fleet import FleetOptions, run_fleet
from analyzer.fleet_dataset import partition_name, row_counts
from analyzer.query import FLEET_MARKER
from reports.render import FLEET

SLOW = "node11"


def _jitter(seed: int, base: float, amp: float):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    values = [base + rng.uniform(-amp, amp) for _ in range(400)]
    return lambda t: values[t % 400]


def fleet_specs() -> list[HostSpec]:
    specs = []
    for i in range(16):
        slow = f"node{i:02d}" == SLOW
        specs.append(
            HostSpec(
                hostname=f"node{i:02d}",
                seconds=90,
                start=START + timedelta(seconds=i % 4),  # UTC alignment, not relative
                gpus=2,
                gpu_util=_jitter(i, 55.0 if slow else 92.0, 4.0),
                throttled_pct=const(30.0 if slow else 0.0),
                w_await_ms=_jitter(100 + i, 2.0, 1.0),
                ntp=None
                if i == 5
                else {"source": "chronyc", "synchronized": True, "offset_s": 0.0002 * i},
            )
        )
    random.Random(7).shuffle(specs)
    return specs


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    root = tmp_path_factory.mktemp("fleet")
    captures = root / "captures"
    captures.mkdir()
    for spec in fleet_specs():
        write_bundle(captures, spec)
    out = root / "fleet.html"
    result = CliRunner().invoke(
        app, ["fleet", str(captures), "-o", str(out), "--json", str(root / "fleet.json"), "-j", "2"]
    )
    assert result.exit_code == 0, result.output
    return root, json.loads((root / "fleet.json").read_text()), result.stdout


def test_the_slow_host_is_named_first(fleet) -> None:  # type: ignore[no-untyped-def]
    _, doc, stdout = fleet
    assert doc["hosts"][0]["host"] == SLOW
    assert len(doc["hosts"]) == 16 and doc["failed"] == []
    assert doc["headline"].startswith(f"Straggler: {SLOW} — ")
    assert stdout.startswith(f"Straggler: {SLOW}")
    others = [h for h in doc["hosts"] if h["host"] != SLOW]
    assert all(h["score"] == 0 for h in others)


def test_straggler_outliers_give_host_and_peer_values(fleet) -> None:  # type: ignore[no-untyped-def]
    top = fleet[1]["hosts"][0]
    by_metric = {o["metric"]: o for o in top["outliers"]}
    assert set(by_metric) == {"gpu_util", "throttled"}
    gpu = by_metric["gpu_util"]
    assert 51 <= gpu["host_mean"] <= 59 and 90 <= gpu["peer_median"] <= 94
    assert gpu["divergent_s"] >= 80
    assert by_metric["throttled"]["host_mean"] == pytest.approx(300.0)  # ms/s
    assert by_metric["throttled"]["peer_median"] == 0.0


def test_host_without_clock_sync_state_is_flagged(fleet) -> None:  # type: ignore[no-untyped-def]
    hosts = {h["host"]: h for h in fleet[1]["hosts"]}
    assert (
        hosts["node05"]["clock_flags"]
        and "no clock sync state" in hosts["node05"]["clock_flags"][0]
    )
    assert (
        hosts["node04"]["ntp_source"] == "chronyc" and hosts["node04"]["ntp_synchronized"] is True
    )
    assert hosts["node04"]["ntp_offset_s"] == pytest.approx(0.0008)
    assert all(not h["clock_flags"] for n, h in hosts.items() if n != "node05")


def test_page_links_each_host_to_its_findings(fleet) -> None:  # type: ignore[no-untyped-def]
    html = (fleet[0] / "fleet.html").read_text()
    assert f'href="#host-{SLOW}"' in html and f'id="host-{SLOW}"' in html
    assert "CPU_THROTTLE" in html
    page = html.split('<script id="plotly-js">')[0]  # the vendored library names its home page
    assert 'src="http' not in page and 'href="http' not in page


def test_dataset_is_hive_partitioned_by_host(fleet) -> None:  # type: ignore[no-untyped-def]
    dataset = fleet[0] / "fleet.dataset"
    assert (dataset / FLEET_MARKER).is_file()
    parts = sorted(p.name for p in (dataset / "signals").iterdir())
    assert parts == sorted(f"host=node{i:02d}" for i in range(16))
    assert (dataset / "signals" / f"host={SLOW}" / "part-0.parquet").is_file()


def test_a_second_reader_pyarrow_sees_the_same_rows_as_duckdb(fleet) -> None:  # type: ignore[no-untyped-def]
    dataset = fleet[0] / "fleet.dataset"
    duck = row_counts(dataset)
    assert duck["signals"] == 16 * 91 and duck["bundle"] == 16
    part = pads.partitioning(pa.schema([("host", pa.string())]), flavor="hive")
    for table, rows in duck.items():
        ds = pads.dataset(dataset / table, format="parquet", partitioning=part)
        assert ds.count_rows() == rows, table
    hosts = pads.dataset(dataset / "bundle", format="parquet", partitioning=part).to_table()
    assert sorted(hosts.column("host").to_pylist()) == sorted(
        hosts.column("reported_host").to_pylist()
    )


def test_query_reads_the_fleet_dataset_with_a_host_column(fleet) -> None:  # type: ignore[no-untyped-def]
    dataset = fleet[0] / "fleet.dataset"
    sql = "SELECT host, count(*) AS n FROM findings WHERE key = 'CPU_THROTTLE' GROUP BY host"
    result = CliRunner().invoke(app, ["query", str(dataset), sql, "-f", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"host": SLOW, "n": 1}]


def test_the_dataset_can_be_reanalysed_without_the_bundles(fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_fleet(
        [fleet[0] / "fleet.dataset"], FleetOptions(output=tmp_path / "again.html"), FLEET
    )
    assert result.hosts[0]["host"] == SLOW and len(result.hosts) == 16


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("gpu01", "gpu01"), ("../../etc", "etc"), ("a/b\\c", "a_b_c"), ("..", "bundle"),
     ("host=x", "host_x"), ("x" * 100, "x" * 64), ("", "bundle"), (None, "bundle")],
)  # fmt: skip
def test_partition_names_have_no_separators_or_dot_dot(raw: str | None, expected: str) -> None:
    name = partition_name(raw, fallback="bundle")
    assert name == expected
    assert "/" not in name and "\\" not in name and ".." not in name and "=" not in name


def test_hostile_and_duplicate_host_names_stay_inside_the_dataset(tmp_path: Path) -> None:
    captures = tmp_path / "c"
    captures.mkdir()
    for i, name in enumerate(["../../escape", "dup", "dup"]):
        spec = HostSpec(hostname=name, seconds=20, start=START + timedelta(seconds=i))
        write_bundle(captures / str(i), spec)
    (captures / "broken.tgz").write_bytes(b"not an archive at all")
    bundles = [str(p) for p in sorted(captures.glob("*/hindsight-*"))] + [
        str(captures / "broken.tgz")
    ]
    result = run_fleet(bundles, FleetOptions(output=tmp_path / "f.html", jobs=1), FLEET)
    names = sorted(h["host"] for h in result.hosts)
    assert names == ["dup", "dup-2", "escape"]
    assert [f["source"] for f in result.failed] == [str(captures / "broken.tgz")]
    assert {p.name for p in (tmp_path / "f.dataset" / "signals").iterdir()} == {
        "host=dup", "host=dup-2", "host=escape",
    }  # fmt: skip
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape").exists()
    html = (tmp_path / "f.html").read_text()
    assert "not an archive" in html or "broken.tgz" in html


def test_fleet_refuses_to_overwrite_a_foreign_directory(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "c", HostSpec(seconds=10))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("x")
    result = CliRunner().invoke(app, ["fleet", str(bundle), "--dataset", str(tmp_path / "data")])
    assert result.exit_code == 2 and "not empty" in result.stderr
    assert (tmp_path / "data" / "precious.txt").exists()


def test_the_printed_duckdb_script_finds_the_same_straggler(fleet, capsys) -> None:  # type: ignore[no-untyped-def]
    import duckdb

    from analyzer.fleet_sql import main

    assert main(["duckdb", str(fleet[0] / "fleet.dataset")]) == 0
    script = capsys.readouterr().out
    con = duckdb.connect()
    statements = [s for s in script.split(";\n") if s.strip()]
    for s in statements[:-1]:
        con.sql(s)
    top = con.sql(statements[-1]).fetchall()[0]
    assert top[0] == "gpu_util" and top[1] == SLOW


def test_spark_and_trino_statements_cover_every_table(fleet, capsys) -> None:  # type: ignore[no-untyped-def]
    from analyzer.fleet_sql import main

    dataset = fleet[0] / "fleet.dataset"
    names = sorted(p.name for p in dataset.iterdir() if p.is_dir())
    main(["spark", str(dataset)])
    spark = capsys.readouterr().out
    main(["trino", str(dataset), "--location", "s3://b/fleet.dataset"])
    trino = capsys.readouterr().out
    for name in names:
        assert f"TEMPORARY VIEW {name} USING parquet" in spark
        assert f"external_location = 's3://b/fleet.dataset/{name}'" in trino
    assert "approx_percentile(v, 0.5)" in trino and "percentile_cont" not in trino
    assert "percentile_cont(0.5) WITHIN GROUP" in spark


def test_rerun_over_the_same_folder_skips_the_fleets_own_outputs(tmp_path: Path) -> None:
    captures = tmp_path / "captures"
    for i in range(3):
        write_bundle(captures, HostSpec(hostname=f"h{i}", seconds=20))
    out = captures / "fleet.html"
    first = run_fleet([captures], FleetOptions(output=out, jobs=1, host_reports=True), FLEET)
    page = out.read_text()
    for h in first.hosts:  # each host's own report, linked from its section (or why not)
        if h["report"]:
            assert (
                Path(h["report"]).is_file()
                and f'href="fleet.hosts/{h["host"]}.report.html"' in page
            )
        else:
            assert h["report_error"] and h["report_error"] in page
    again = run_fleet([str(captures / "*")], FleetOptions(output=out, jobs=1), FLEET)
    assert len(first.hosts) == len(again.hosts) == 3 and again.failed == []
    assert again.hosts[0]["score"] == 0


def test_fewer_than_three_hosts_is_reported_as_nothing_to_compare(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "c", HostSpec(seconds=20))
    result = run_fleet([bundle], FleetOptions(output=tmp_path / "f.html", jobs=1), FLEET)
    from analyzer.fleet import headline

    assert headline(result).startswith("Nothing to compare")
    assert all(m["status"] == "not evaluated" for m in result.metrics)


def test_a_clock_capped_node_with_busy_gpus_is_the_straggler(tmp_path: Path) -> None:
    """Issue #23: one node's GPUs ran at 60 % of their SM clock for 120 s while showing
    the same utilisation as their peers: the fleet names it first, by its clock."""
    captures = tmp_path / "captures"
    captures.mkdir()
    for i in range(6):
        capped = i == 3
        spec = HostSpec(
            hostname=f"gpu{i}",
            seconds=150,
            gpu_util=_jitter(i, 95.0, 2.0),
            sm_clock_mhz=(lambda t: 1188.0 if 15 <= t < 135 else 1980.0)
            if capped
            else const(1980.0),
            w_await_ms=_jitter(50 + i, 2.0, 1.0),
        )
        write_bundle(captures, spec)
    result = run_fleet([captures], FleetOptions(output=tmp_path / "f.html", jobs=1), FLEET)
    assert result.hosts[0]["host"] == "gpu3", [(h["host"], h["score"]) for h in result.hosts]
    worst = [o for o in result.outliers if o.host == "gpu3"]
    assert worst and {o.label for o in worst} == {"GPU SM clock (slowest GPU)"}, worst
    assert all(h["score"] == 0 for h in result.hosts[1:])
