"""The synth request: incident syntax, validation, determinism, the CLI, host shapes."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from analyzer.synth import (
    KINDS,
    Spec,
    SpecError,
    generate,
    parse_duration,
    parse_incident,
    scenario,
)


def test_incident_syntax_reads_kind_window_and_options() -> None:
    inc = parse_incident("checkpoint-stall@1m30s+4m:every_s=45,size_gb=8.5")
    assert (inc.kind, inc.start_s, inc.dur_s, inc.control) == ("checkpoint_stall", 90, 240, False)
    assert inc.params == {"every_s": 45, "size_gb": 8.5}
    assert parse_duration("1.5h") == 5400 and parse_duration("90") == 90


@pytest.mark.parametrize(
    "text", ["oom_kill", "oom_kill@10", "@10+5", "oom_kill@x+5", "oom_kill@1+2:novalue"]
)
def test_malformed_incidents_are_refused_with_a_message(text: str) -> None:
    with pytest.raises(SpecError):
        parse_incident(text)


def test_incident_outside_the_capture_and_impossible_hosts_are_refused() -> None:
    with pytest.raises(SpecError, match="not inside"):
        Spec(seconds=60, incidents=[parse_incident("gpu_xid@50+30")])
    with pytest.raises(SpecError):
        Spec(cpus=0)
    with pytest.raises(SpecError, match="hung_task needs"):
        generate(
            Spec(seconds=200, incidents=[parse_incident("hung_task@10+60")]),
            Path("/nonexistent/x.tgz"),
        )


def test_every_kind_has_a_scenario_with_an_incident_and_a_control() -> None:
    for kind in KINDS:
        incs = scenario(kind, 600)
        assert [i.control for i in incs] == [False, True], kind
        assert incs[0].end_s <= incs[1].start_s


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_same_seed_gives_the_same_bundle_and_another_seed_does_not(tmp_path: Path) -> None:
    def make(seed: int, name: str) -> Path:
        spec = Spec(seconds=40, seed=seed, incidents=[parse_incident("net_errors@10+10")])
        return generate(spec, tmp_path / name)

    a, b, c = make(5, "a.tgz"), make(5, "b.tgz"), make(6, "c.tgz")
    assert a.read_bytes() == b.read_bytes()
    ma, mc = _members(a), _members(c)
    assert ma.keys() == mc.keys()
    assert (
        ma[next(k for k in ma if k.endswith("series/mpstat.out"))]
        != mc[next(k for k in mc if k.endswith("series/mpstat.out"))]
    )


def test_big_host_shape_has_one_row_per_cpu_disk_and_gpu(tmp_path: Path) -> None:
    from analyzer.synth import build_world, write_dir

    spec = Spec(cpus=128, gpus=8, disks=16, nics=2, seconds=12)
    w, _ = build_world(spec)
    write_dir(w, tmp_path / spec.bundle_name)
    series = tmp_path / spec.bundle_name / "series"
    mp = (series / "mpstat.out").read_text().splitlines()
    assert (
        sum(1 for line in mp if line[:8].count(":") == 2 and not line.rstrip().endswith("%idle"))
        == 12 * 129
    )
    dev = [
        line for line in (series / "iostat.out").read_text().splitlines() if line.startswith("nvme")
    ]
    assert len(dev) == 12 * 16
    dmon = [
        line
        for line in (series / "nvidia_dmon.out").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert len(dmon) == 12 * 8


def test_cli_writes_the_bundle_and_its_ground_truth(tmp_path: Path) -> None:
    out = tmp_path / "cli.tgz"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "analyzer",
            "synth",
            str(out),
            "--seconds",
            "60",
            "--incident",
            "gpu_xid@20+20",
            "--control",
            "net_errors@45+10",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads((tmp_path / "cli.ground-truth.json").read_text())
    assert [i["expected_key"] for i in truth["incidents"]] == ["GPU_XID"]
    assert [i["must_not_key"] for i in truth["negative_controls"]] == ["NET_ERRORS"]
    assert truth["start_utc"] == "2026-11-29T14:00:00Z" and tarfile.is_tarfile(out)
    bad = subprocess.run(
        [sys.executable, "-m", "analyzer", "synth", str(out), "--incident", "nope@1+1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "unknown incident kind" in bad.stderr


def _softirq_rows(text: str, column: str) -> dict[str, dict[int, float]]:
    """``time -> cpu -> rate`` of one softirq column of ``mpstat -I SCPU`` text."""
    header, out = None, {}
    for line in text.splitlines():
        f = line.split()
        if len(f) > 2 and f[1] == "CPU":
            header = f if "NET_RX/s" in f else None
        elif header and len(f) == len(header) and f[1].isdigit() and f[0] != "Average:":
            out.setdefault(f[0], {})[int(f[1])] = float(f[header.index(column)])
    return out


def test_defaults_mirror_the_capture_iostat_json_off_and_irq_tables_every_10_s(
    tmp_path: Path,
) -> None:
    spec = Spec(cpus=4, seconds=60)
    members = _members(generate(spec, tmp_path / "d.tgz"))
    assert not any(k.endswith("series/iostat_json.out") for k in members)
    manifest = json.loads(next(v for k, v in members.items() if k.endswith("manifest.json")))
    by_name = {c["name"]: c for c in manifest["collectors"]}
    assert by_name["iostat_json"] == {
        "name": "iostat_json",
        "kind": "series",
        "tool": "iostat_json",
        "command": "iostat -t -x -y -o JSON 1",
        "output": None,
        "stderr": None,
        "status": "skipped",
        "exit_code": None,
        "reason": "off by default (--iostat-json)",
        "bytes": 0,
    }
    assert by_name["mpstat_irq"]["command"] == "mpstat -I SUM,SCPU -P ALL 10 6"
    assert manifest["options"]["iostat_json"] is False
    assert manifest["options"]["irq_interval_s"] == 10
    irq = next(v for k, v in members.items() if k.endswith("series/mpstat_irq.out")).decode()
    assert len(_softirq_rows(irq, "NET_RX/s")) == 6
    log = next(v for k, v in members.items() if k.endswith("capture.log")).decode()
    assert "skipped: iostat_json (off by default (--iostat-json))" in log


def test_irq_interval_follows_the_capture_rule_and_must_be_a_multiple_of_the_interval() -> None:
    assert Spec(seconds=60).irq_interval_s == 10
    assert Spec(seconds=60, interval=3).irq_interval_s == 12  # first multiple >= 10 s
    assert Spec(seconds=600, interval=15).irq_interval_s == 15
    assert Spec(seconds=5).irq_interval_s == 5  # never longer than the capture
    assert Spec(seconds=60, irq_interval=1).irq_samples == 60
    with pytest.raises(SpecError, match="multiple"):
        Spec(seconds=60, interval=3, irq_interval=4)


def test_each_irq_report_is_the_mean_rate_of_the_seconds_it_covers(tmp_path: Path) -> None:
    """A 10 s report of mpstat -I equals the mean of the ten 1 s reports it replaces, so an
    interrupt storm shorter than the interval still shows."""
    incs = [parse_incident("irq_hotspot@23+9")]

    def irq_text(irq_interval: int | None, name: str) -> str:
        spec = Spec(cpus=4, seconds=60, incidents=incs, irq_interval=irq_interval)
        members = _members(generate(spec, tmp_path / name))
        return next(v for k, v in members.items() if k.endswith("series/mpstat_irq.out")).decode()

    fine, coarse = (
        _softirq_rows(irq_text(1, "fine.tgz"), "NET_RX/s"),
        _softirq_rows(irq_text(None, "coarse.tgz"), "NET_RX/s"),
    )
    times = sorted(fine)
    assert len(times) == 60 and len(coarse) == 6
    for i, t in enumerate(sorted(coarse)):
        window = times[i * 10 : i * 10 + 10]
        assert window[-1] == t
        for cpu, rate in coarse[t].items():
            mean = sum(fine[s][cpu] for s in window) / 10
            assert abs(rate - mean) <= 0.006, (t, cpu, rate, mean)
    storm = sorted(coarse)[2]  # 14:00:30 covers the burst at 23..32 s
    assert coarse[storm][0] > 10 * max(coarse[sorted(coarse)[0]].values())
