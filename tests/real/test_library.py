"""The real-incident library (samples/real/) scored in CI: what holds may not be lost.

`score.py` grades every real capture against its injector's ground truth; `baseline.json`
records what held when it was last written (``python -m tests.real.library_score
--write-baseline``). A regression fails here: an incident that was found is lost, a window
that was within tolerance drifts out, a quiet window gains a finding above info.
The evidence numbers of every finding are recomputed from the raw files
(samples/real/recompute.py): a bundle may not gain numbers that disagree.
Improvements are welcome and are recorded by rewriting the baseline.
"""

from __future__ import annotations

import json

import pytest
from library_score import BASELINE, BundleScore, baseline_of, grade, library, score_bundle

LIBRARY = library()


@pytest.fixture(scope="module")
def scores() -> list[BundleScore]:
    return [score_bundle(b, t) for b, t in LIBRARY]


def test_the_library_has_its_bundles_and_every_bundle_its_truth() -> None:
    assert len(LIBRARY) >= 2
    for bundle, truth in LIBRARY:
        assert bundle.is_file(), bundle
        assert truth["incidents"] or truth.get("quiet_windows"), truth["scenario"]
        for inc in truth["incidents"]:
            assert inc["start"] < inc["end"] and inc["kind"], inc


def test_no_found_incident_is_lost_and_no_quiet_window_gains_an_alarm(
    scores: list[BundleScore],
) -> None:
    base = json.loads(BASELINE.read_text())
    now = baseline_of(scores)
    lost = [
        k
        for k, v in base["incidents"].items()
        if v["found"] and not now["incidents"].get(k, {}).get("found")
    ]
    drifted = [
        k
        for k, v in base["incidents"].items()
        if v["within"] and not now["incidents"].get(k, {}).get("within")
    ]
    louder = [k for k, n in now["quiet_alarms"].items() if n > base["quiet_alarms"].get(k, 0)]
    assert not lost, f"incidents no longer found: {lost}"
    assert not drifted, f"windows out of tolerance now: {drifted}"
    assert not louder, f"quiet windows with more alarms than before: {louder}"


def test_no_bundle_gains_evidence_that_disagrees_with_its_raw_files(
    scores: list[BundleScore],
) -> None:
    base = json.loads(BASELINE.read_text()).get("evidence_differ", {})
    worse = {
        b.bundle: [d for e in b.evidence for d in e.differ]
        for b in scores
        if sum(len(e.differ) for e in b.evidence) > base.get(b.bundle, 0)
    }
    assert not worse, f"evidence numbers that disagree with the raw files now: {worse}"
    assert sum(e.checked for b in scores for e in b.evidence) >= 1000  # the check ran


def test_the_grader_itself_counts_misses_errors_and_false_alarms() -> None:
    """A tiny truth and findings, graded by hand."""
    from datetime import UTC, datetime

    def t(s: float) -> datetime:
        return datetime.fromtimestamp(s, UTC)

    truth = {
        "incidents": [
            {"id": "a", "kind": "cpu_throttle", "start": 100.0, "end": 140.0},
            {"id": "b", "kind": "oom_kill", "start": 300.0, "end": 301.0},
        ],
        "quiet_windows": [{"start": 200.0, "end": 250.0}],
    }
    findings = [
        {
            "key": "CPU_THROTTLE",
            "kind": "cpu_throttle",
            "severity": "major",
            "start": t(102),
            "end": t(139),
        },
        {
            "key": "CPU_CONTENTION",
            "kind": "cpu_contention",
            "severity": "minor",
            "start": t(240),
            "end": t(260),
        },
        {
            "key": "CPU_CONTENTION",
            "kind": "cpu_contention",
            "severity": "info",
            "start": t(205),
            "end": t(210),
        },
    ]
    s = grade("x", truth, findings)
    a, b = s.incidents
    assert (
        a.found
        and a.start_err_s == 2.0
        and a.end_err_s == -1.0
        and a.within
        and a.severity == "major"
    )
    assert not b.found and not b.within
    assert s.quiet[0].alarms == ["CPU_CONTENTION (minor) +40..+60 s"]


def test_the_evidence_check_flags_a_number_the_raw_file_does_not_hold() -> None:
    """A strong-throttling finding of cpu-throttle: its raw cgroup counters give 99.5 %
    of periods throttled over 22:44:40–22:45:21; 90 % is not what the file says."""
    import sys
    from datetime import UTC, datetime

    from library_score import LIBRARY as DIR

    sys.path.insert(0, str(DIR))
    try:
        import observe
        import recompute
    finally:
        sys.path.pop(0)
    raw = observe.Bundle(DIR / "cpu-throttle.tgz")

    def finding(value: float) -> dict:
        return {
            "key": "CPU_THROTTLE",
            "kind": "cpu_throttle",
            "start": datetime(2026, 12, 1, 22, 44, 40, tzinfo=UTC),
            "end": datetime(2026, 12, 1, 22, 45, 21, tzinfo=UTC),
            "impact": {"cgroup": "/hs-real-thr-strong"},
            "evidence": [
                {"signal": "throttled_pct", "value": value, "unit": "%", "note": "mean share"}
            ],
        }

    def epoch(t: datetime) -> float:
        return t.timestamp()

    (right,) = recompute.check_finding(raw, finding(99.5), epoch)
    (wrong,) = recompute.check_finding(raw, finding(90.0), epoch)
    assert right.agree is True and abs(right.recomputed - 99.5) < 0.5
    assert wrong.agree is False and wrong.recomputed == right.recomputed
