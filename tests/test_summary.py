"""The terminal summary of `analyze` (analyzer/summary.py): what a tired engineer reads first."""

from __future__ import annotations

from analyzer.pipeline import Result
from analyzer.summary import format_summary


def _result() -> Result:
    findings = [
        {"severity": "info", "title": "CPU contention (20 s)", "start": "01:00"},
        {"severity": "major", "title": "Disk saturated", "start": "01:05"},
        {"severity": "critical", "title": "OOM killer killed python3", "start": "01:10"},
        {"severity": "major", "title": "GPUs idle", "start": "01:20", "gpu_seconds_lost": 20.0},
    ]
    collectors = [
        {"file": "series/vmstat.out", "tool": "vmstat", "status": "parsed", "parsed_pct": 100.0, "lines_parsed": 60},
        {"file": "series/iostat.out", "tool": "iostat", "status": "parsed", "parsed_pct": 97.5,
         "lines_parsed": 390, "reason": "10 lines skipped: unrecognized line"},
        {"file": None, "collector": "bpf_runqlat", "tool": "bpftrace", "status": "missing",
         "reason": "command not found: bpftrace"},
        {"file": "manifest.json", "tool": None, "status": "metadata"},
    ]  # fmt: skip
    return Result({"name": "b", "analyzer_version": "x"}, collectors, {}, findings, None, None)


def test_findings_are_listed_most_severe_first_then_by_gpu_time_lost() -> None:
    lines = format_summary(_result()).splitlines()
    listed = [ln.strip() for ln in lines if ln.startswith("    [")]
    assert listed == [
        "[critical] OOM killer killed python3",
        "[major] GPUs idle",
        "[major] Disk saturated",
        "[info] CPU contention (20 s)",
    ]


def test_coverage_lists_only_the_files_with_something_to_say_unless_verbose() -> None:
    short = format_summary(_result())
    assert "1 of 3 inputs parsed fully; 2 with something to say" in short
    assert "series/vmstat.out" not in short and "manifest.json" not in short
    assert "series/iostat.out" in short and "unrecognized line" in short
    assert "bpf_runqlat" in short  # a missing collector by its name, not '-'
    full = format_summary(_result(), verbose=True)
    assert "series/vmstat.out" in full and "manifest.json" not in full
