"""The scenario suite (tests/scenarios/score.py, tier ``ci``) against its targets, and the
scorer itself on hand-made results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from score import TARGET, _spec, run_suite, score, score_case, suite, synth_args

from analyzer.detectors import DETECTORS


@pytest.fixture(scope="module")
def scored() -> dict[str, Any]:
    return score(run_suite(suite("ci")))


@pytest.mark.slow
def test_every_detector_reaches_090_precision_and_recall_on_the_ci_suite(scored: dict) -> None:
    low = {
        key: (round(t["precision"], 2), round(t["recall"], 2))
        for key, t in scored["per_key"].items()
        if t["precision"] < TARGET or t["recall"] < TARGET
    }
    assert low == {}, scored["problems"]


@pytest.mark.slow
def test_every_detector_is_scored_on_at_least_two_incidents(scored: dict) -> None:
    keys = {m.NAME.upper() for m in DETECTORS}
    assert {k for k, t in scored["per_key"].items() if t["tp"] + t["fn"] >= 2} == keys


@pytest.mark.slow
def test_quiet_captures_and_negative_controls_give_nothing_above_info(scored: dict) -> None:
    assert scored["quiet"] == []


@pytest.mark.slow
def test_cpu_starved_gpu_dips_are_classified_as_the_cpu_bound_loader(scored: dict) -> None:
    assert scored["causes"]["wrong"] == 0 and scored["causes"]["right"] >= 2


def _result(
    findings: list[tuple[str, float, float]], truth: list[dict], quiet: bool = False
) -> dict:
    return {
        "case": "hand-made",
        "quiet": quiet,
        "truth": truth,
        "controls": [],
        "findings": [
            {"key": k, "severity": "minor", "start": a, "end": b, "cause": None, "title": k}
            for k, a, b in findings
        ],
    }


def _truth(key: str, a: float, b: float, **extra: Any) -> dict:
    iso = "1970-01-01T00:{:02d}:{:02d}Z"
    return {
        "expected_key": key,
        "start_utc": iso.format(int(a) // 60, int(a) % 60),
        "end_utc": iso.format(int(b) // 60, int(b) % 60),
        "may_also": [],
        **extra,
    }


def test_a_finding_matches_only_with_iou_at_least_one_half_and_only_once() -> None:
    truth = [_truth("CPU_THROTTLE", 100, 200)]
    s = score_case(_result([("CPU_THROTTLE", 110, 200), ("CPU_THROTTLE", 100, 190)], truth))
    assert s["per_key"]["CPU_THROTTLE"] == {"tp": 1, "fp": 1, "fn": 0}
    s = score_case(_result([("CPU_THROTTLE", 100, 140)], truth))  # IoU 0.4
    assert s["per_key"]["CPU_THROTTLE"] == {"tp": 0, "fp": 1, "fn": 1}


def test_effects_listed_in_may_also_are_neither_right_nor_wrong() -> None:
    truth = [_truth("CPU_THROTTLE", 100, 200, may_also=["GPU_STARVATION"])]
    s = score_case(_result([("CPU_THROTTLE", 100, 200), ("GPU_STARVATION", 120, 150)], truth))
    assert s["per_key"] == {"CPU_THROTTLE": {"tp": 1, "fp": 0, "fn": 0}}


def test_each_checkpoint_burst_and_the_second_of_a_point_event_are_truths() -> None:
    events = [{"start_utc": "1970-01-01T00:01:00Z", "end_utc": "1970-01-01T00:01:08Z"}] * 1
    truth = [
        _truth("CHECKPOINT_STALL", 58, 190, events=events),
        _truth("OOM_KILL", 200, 290, kill_utc="1970-01-01T00:04:49Z"),
    ]
    s = score_case(_result([("CHECKPOINT_STALL", 60, 68), ("OOM_KILL", 289, 290)], truth))
    assert s["per_key"]["CHECKPOINT_STALL"]["tp"] == 1 and s["per_key"]["OOM_KILL"]["tp"] == 1


def test_a_quiet_capture_with_a_minor_finding_is_a_violation() -> None:
    s = score_case(_result([("SAMPLING_GAP", 10, 20)], [], quiet=True))
    assert s["quiet_violations"] and s["per_key"]["SAMPLING_GAP"]["fp"] == 1


def test_a_case_is_the_bundle_that_the_hindsight_synth_command_writes(tmp_path: Path) -> None:
    from analyzer.synth import _ground_truth, build_world

    case = next(c for c in suite("ci") if c.name.startswith("near-a"))
    out = tmp_path / "case.tgz"
    cmd = [sys.executable, "-m", "analyzer", *synth_args(case, str(out))[1:]]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    cli = json.loads(out.with_name("case.ground-truth.json").read_text())
    api = _ground_truth(*build_world(_spec(case)))
    assert cli == api
