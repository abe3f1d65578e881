"""`hindsight diff` on generated bundles: before throttled, after not (real pipeline end to end)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from multi_bundles import START, HostSpec, const, write_bundle
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.diff import run_diff
from reports.render import DIFF

BEFORE = HostSpec(
    hostname="gpu01",
    seconds=120,
    cpu_max="200000 100000",
    throttled_pct=const(40.0),
    gpu_util=lambda t: (41.0, 61.0, 81.0)[t % 3],
    runq=const(12.0),
)
AFTER = HostSpec(
    hostname="gpu01",
    seconds=150,
    start=START + timedelta(days=1, hours=3),
    cpu_max="max 100000",
    throttled_pct=const(0.0),
    gpu_util=lambda t: (89.0, 93.0, 97.0)[t % 3],
    sysctls={"vm.dirty_ratio": "10", "vm.swappiness": "60"},
    policy="SCHED_FIFO",
    affinity="0-7",
)


@pytest.fixture(scope="module")
def diffed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str, str, str]:
    root = tmp_path_factory.mktemp("diff")
    before = write_bundle(root / "before", BEFORE)
    after = write_bundle(root / "after", AFTER)
    out = root / "out"
    out.mkdir()
    result = CliRunner().invoke(
        app,
        [
            "diff", str(before), str(after), "-o", str(out / "diff.html"),
            "--md", str(out / "diff.md"), "--json", str(out / "diff.json"),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "diff.json").read_text())
    html = (out / "diff.html").read_text()
    md = (out / "diff.md").read_text()
    return root, doc, html, md, result.stdout


def signal(doc: dict, name: str) -> dict:
    return next(s for s in doc["signals"] if s["signal"] == name)


def test_headline_says_quota_raised_throttling_gone_and_gpu_gain_with_numbers(diffed) -> None:  # type: ignore[no-untyped-def]
    _, doc, html, md, stdout = diffed
    # before: 41/61/81 → variance 266.7; after: 89/93/97 → variance 10.7: −96 %
    expected = "after: `cpu.max` raised, 3 other settings changed, throttling gone, GPU utilisation p50 61 % → 93 %, variance −96 %"
    assert doc["headline"] == expected
    assert expected in stdout
    assert "`cpu.max` raised" in md and "GPU utilisation p50 61 % → 93 %, variance −96 %" in md
    assert "GPU utilisation p50 61 % → 93 %" in html


def test_gpu_utilisation_distribution_numbers_are_exact(diffed) -> None:  # type: ignore[no-untyped-def]
    gpu = signal(diffed[1], "gpu_util_mean_pct")
    assert gpu["before"]["p50"] == 61.0 and gpu["after"]["p50"] == 93.0
    assert gpu["before"]["max"] == 81.0 and gpu["after"]["max"] == 97.0
    assert gpu["before"]["var"] == pytest.approx(800 / 3, rel=1e-3)
    assert gpu["after"]["var"] == pytest.approx(32 / 3, rel=1e-3)
    assert gpu["variance_change_pct"] == pytest.approx(-96.0)
    assert gpu["verdict"] == "better"


def test_throttling_signal_and_finding_are_gone(diffed) -> None:  # type: ignore[no-untyped-def]
    doc = diffed[1]
    thr = signal(doc, "throttled_pct")
    assert thr["before"]["p50"] == 40.0 and thr["after"]["max"] == 0.0
    finding = next(f for f in doc["findings"] if f["key"] == "CPU_THROTTLE")
    assert (
        finding["status"] == "gone" and finding["before"]["count"] == 1 and finding["after"] is None
    )


def test_captures_are_aligned_by_time_since_start_over_the_shorter_span(diffed) -> None:  # type: ignore[no-untyped-def]
    doc = diffed[1]
    assert doc["before"]["seconds"] == 121 and doc["after"]["seconds"] == 151
    assert doc["aligned_s"] == 121
    assert any("last 30 s of 151 s" in n for n in doc["notes"])
    assert signal(doc, "gpu_util_mean_pct")["after"]["n"] == 120


def test_config_changes_list_quota_affinity_policy_and_sysctl(diffed) -> None:  # type: ignore[no-untyped-def]
    changes = {c["key"]: c for c in diffed[1]["config"]["changes"]}
    quota = changes["cpu.max quota (train.slice)"]
    assert (quota["before"], quota["after"], quota["direction"]) == ("200000", "max", "raised")
    assert changes["sched.python.policy"]["after"] == "SCHED_FIFO"
    assert changes["sched.python.affinity_list"]["before"] == "0-15"
    assert changes["vm.dirty_ratio"]["direction"] == "lowered"
    assert "vm.swappiness" not in changes
    assert not any(k.startswith("clock.") for k in changes)


def test_a_finding_whose_detector_could_not_run_after_is_not_called_gone(tmp_path: Path) -> None:
    before = write_bundle(tmp_path / "b", BEFORE)
    after = write_bundle(tmp_path / "a", AFTER)
    (after / "series" / "cgroup.out").unlink()  # no cpu.stat: cpu_throttle not evaluated
    result = run_diff(before, after)
    finding = next(f for f in result.findings if f["key"] == "CPU_THROTTLE")
    assert finding["status"] == "not evaluated after"
    assert "throttling gone" not in result.headline
    assert signal({"signals": result.stats}, "throttled_pct")["verdict"] == "missing after"


def test_hostile_values_are_escaped_in_html_and_markdown(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>|`x`"
    before = write_bundle(tmp_path / "b", BEFORE)
    after_spec = HostSpec(**{**AFTER.__dict__, "sysctls": {"vm.dirty_ratio": evil}})
    after = write_bundle(tmp_path / "a", after_spec)
    run_diff(before, after, html=tmp_path / "d.html", md=tmp_path / "d.md", renderers=DIFF)
    html = (tmp_path / "d.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    md = (tmp_path / "d.md").read_text()
    assert "\\<script\\>alert(1)\\</script\\>\\|\\`x\\`" in md


def test_unusable_input_is_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tgz"
    empty.write_bytes(b"")
    result = CliRunner().invoke(
        app, ["diff", str(empty), str(empty), "-o", str(tmp_path / "d.html")]
    )
    assert result.exit_code == 2 and "hindsight: error:" in result.stderr


@pytest.fixture(scope="module")
def synth_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`hindsight synth` bundles: before throttled by a CPU quota all along, after not."""
    synth = pytest.importorskip("analyzer.synth")
    from analyzer.pipeline import Options, run
    from analyzer.synth.spec import Incident, Spec

    root = tmp_path_factory.mktemp("synth-diff")
    dbs = []
    for name, incidents, seed in (
        ("before", [Incident("cpu_throttle", 0, 240)], 3),
        ("after", [], 4),
    ):
        spec = Spec(
            hostname="gpu01",
            seconds=240,
            cpus=8,
            gpus=2,
            disks=1,
            seed=seed,
            bpf=False,
            incidents=incidents,
        )
        bundle = synth.generate(spec, root / f"{name}.tgz")
        db = root / f"{name}.duckdb"
        run(bundle, Options(db=db))
        dbs.append(db)
    return dbs[0], dbs[1]


def test_synth_throttled_before_and_free_after_reports_throttling_gone_with_the_right_numbers(
    synth_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    import duckdb

    result = run_diff(*synth_pair, md=tmp_path / "d.md", renderers=DIFF)
    expected = []
    for db in synth_pair:  # the numbers, computed independently by DuckDB from the stored signals
        con = duckdb.connect(str(db), read_only=True)
        expected.append(
            con.sql(
                "SELECT quantile_cont(gpu_util_mean_pct, 0.5), var_pop(gpu_util_mean_pct) FROM signals"
            ).fetchall()[0]
        )
        con.close()
    (p50_b, var_b), (p50_a, var_a) = expected
    assert p50_a - p50_b > 20  # the quota cost real GPU time
    change = (var_a / var_b - 1) * 100
    gpu = f"GPU utilisation p50 {p50_b:.0f} % → {p50_a:.0f} %, variance {change:+.0f} %".replace(
        "-", "−"
    )
    assert result.headline == f"after: `cpu.max` raised, throttling gone, {gpu}"
    assert gpu in (tmp_path / "d.md").read_text()
    throttle = next(f for f in result.findings if f["key"] == "CPU_THROTTLE")
    assert throttle["status"] == "gone" and throttle["before"]["count"] >= 1


def test_histogram_percentiles_are_bucket_upper_bounds_in_microseconds() -> None:
    import duckdb

    from analyzer.diff_hist import hist_summary

    con = duckdb.connect()
    con.sql(
        """CREATE TABLE bpf_hist AS SELECT * FROM (VALUES
        (TIMESTAMPTZ '2026-11-29 14:00:10+00', 0, 1000, 10, 'nsecs', 'series/bpf_runqlat.out'),
        (TIMESTAMPTZ '2026-11-29 14:00:10+00', 1000, 2000, 80, 'nsecs', 'series/bpf_runqlat.out'),
        (TIMESTAMPTZ '2026-11-29 14:00:20+00', 2000, 4000, 10, 'nsecs', 'series/bpf_runqlat.out'),
        (TIMESTAMPTZ '2026-11-29 14:05:00+00', 4000, 8000, 99, 'nsecs', 'series/bpf_runqlat.out'),
        (TIMESTAMPTZ '2026-11-29 14:00:10+00', 8, 16, 5, 'usecs', 'series/bpf_biolat.out'))
        AS t(ts, bucket_low, bucket_high, count, unit, source_file)"""
    )
    start = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    h = hist_summary(con, "%runqlat%", start, 60)  # the 14:05 sample is outside the span
    assert h is not None and h["total"] == 100
    assert (h["p50"], h["p95"], h["p99"], h["max"]) == (2.0, 4.0, 4.0, 4.0)
    assert hist_summary(con, "%nothing%", start, 60) is None
