"""What detectors return (`Finding`, `NotEvaluated`) and the store tables that hold them.

A `Finding` is one incident occurrence: a stable UPPER_SNAKE ``key``, the detector
``kind`` that made it, a severity on the scale of docs/detectors.md, a UTC window, one
plain sentence with numbers, the impact in user terms, the evidence (signal value vs the
capture's own baseline), the raw kernel log lines involved, remediation with concrete
knobs, and caveats. A periodic incident is one finding per occurrence sharing ``series``
(correlate.py groups them under one chain with period and count).

Tables declared here (written by `analyzer.analysis`): ``findings``, ``finding_evidence``,
``finding_log_lines``, ``chains``, ``detector_status``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from analyzer.parsers.base import TS, table

SEVERITIES = ("critical", "major", "minor", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(reversed(SEVERITIES))}  # info 0 .. critical 3


@dataclass(frozen=True)
class Evidence:
    """One measured value next to its baseline (``baseline`` None when not comparable)."""

    signal: str
    value: float | None
    baseline: float | None = None
    unit: str = ""
    note: str = ""


@dataclass(frozen=True)
class LogLine:
    """A raw input line involved in a finding (kernel log lines, mostly)."""

    source_file: str | None
    line_no: int | None
    ts: datetime | None
    text: str


@dataclass
class Finding:
    key: str
    kind: str
    title: str
    severity: str
    start: datetime
    end: datetime
    summary: str
    impact: dict[str, Any] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    log_lines: list[LogLine] = field(default_factory=list)
    remediation: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    series: str | None = None  # occurrences of one periodic incident share this id
    period_s: float | None = None
    occurrences: int | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} not in {SEVERITIES}")
        if not self.key.replace("_", "").isalnum() or self.key.upper() != self.key:
            raise ValueError(f"key {self.key!r} is not UPPER_SNAKE")

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()

    @property
    def gpu_seconds_lost(self) -> float | None:
        v = self.impact.get("gpu_seconds_lost")
        return None if v is None else float(v)


@dataclass(frozen=True)
class NotEvaluated:
    """A detector that could not run: its inputs are missing (``reason`` says which)."""

    detector: str
    reason: str


FINDINGS = table(
    "One row per finding (one occurrence of an incident), ranked.",
    ("finding_id", pl.Int64, "", "1-based id, in rank order"),
    ("key", pl.String, "", "stable UPPER_SNAKE identifier, e.g. CHECKPOINT_STALL"),
    ("kind", pl.String, "", "detector that produced it (analyzer/detectors/<kind>.py)"),
    ("title", pl.String, "", "one-line title"),
    ("severity", pl.String, "", "critical | major | minor | info (docs/detectors.md)"),
    ("start_ts", TS, "UTC", "window start (inclusive)"),
    ("end_ts", TS, "UTC", "window end (exclusive)"),
    ("duration_s", pl.Float64, "s", "end_ts - start_ts"),
    ("summary", pl.String, "", "one plain sentence with numbers and times"),
    (
        "impact_json",
        pl.String,
        "",
        "JSON object of impact measures (gpu_seconds_lost, seconds_throttled, processes_killed...)",
    ),
    (
        "gpu_seconds_lost",
        pl.Float64,
        "GPU·s",
        "Σ_s gpu_count × max(0, baseline − util)/100 over the window; NULL when not applicable",
    ),
    ("remediation", pl.String, "", "remediation steps with concrete knobs, one per line"),
    (
        "caveats",
        pl.String,
        "",
        "caveats (e.g. collectors missed samples in the window), one per line",
    ),
    ("series", pl.String, "", "id shared by the occurrences of one periodic incident, else NULL"),
    ("period_s", pl.Float64, "s", "period of the periodic incident this occurrence belongs to"),
    ("occurrences", pl.Int64, "count", "occurrences in that periodic incident"),
    ("chain_id", pl.Int64, "", "the chain (incident) this finding belongs to"),
    ("rank", pl.Int64, "", "1 = most important finding"),
)

FINDING_EVIDENCE = table(
    "One row per evidence value of a finding: a signal's value in the window vs the capture's baseline.",
    ("finding_id", pl.Int64, "", "findings.finding_id"),
    ("signal", pl.String, "", "signal or source column, e.g. disk_write_kb_s"),
    ("value", pl.Float64, "", "value in the finding window (peak or mean, see note)"),
    (
        "baseline",
        pl.Float64,
        "",
        "the capture's own baseline (median outside findings unless noted)",
    ),
    ("unit", pl.String, "", "unit of value and baseline"),
    ("note", pl.String, "", "what the value is (peak, mean, count...) or a label"),
)

FINDING_LOG_LINES = table(
    "One row per raw input line involved in a finding (kernel log lines: OOM reports, Xid, hung tasks).",
    ("finding_id", pl.Int64, "", "findings.finding_id"),
    ("file", pl.String, "", "bundle-relative path of the input file the line is in"),
    ("line_no", pl.Int64, "", "1-based line number in that file"),
    ("ts", TS, "UTC", "time of the line when known"),
    ("text", pl.String, "", "the line's text as logged"),
)

CHAINS = table(
    "One row per incident: findings linked cause → effect by correlate.py (a lone finding is its own chain), ranked by impact.",
    ("chain_id", pl.Int64, "", "1-based id, in rank order"),
    ("rank", pl.Int64, "", "1 = most important incident"),
    ("title", pl.String, "", "cause → effect title"),
    ("severity", pl.String, "", "highest severity of its findings"),
    ("start_ts", TS, "UTC", "earliest finding start"),
    ("end_ts", TS, "UTC", "latest finding end"),
    ("summary", pl.String, "", "one sentence: what caused what, how often, what it cost"),
    ("cause_finding_id", pl.Int64, "", "the root finding (earliest without a cause)"),
    ("finding_ids", pl.String, "", "comma-separated finding ids, by start time"),
    ("period_s", pl.Float64, "s", "period when the incident repeats, else NULL"),
    ("occurrences", pl.Int64, "count", "occurrences of the root incident"),
    (
        "gpu_seconds_lost",
        pl.Float64,
        "GPU·s",
        "GPU time lost (per kind sums; the largest kind counts, no double counting)",
    ),
    (
        "mechanisms",
        pl.String,
        "",
        "one line per cause → effect link: what in the data links them (correlate.RULES)",
    ),
    (
        "concurrent_chain_ids",
        pl.String,
        "",
        "comma-separated incidents overlapping this one with no mechanism linking them",
    ),
)

DETECTOR_STATUS = table(
    "One row per detector: whether it could run on this bundle and how many findings it made.",
    ("detector", pl.String, "", "detector name (module in analyzer/detectors/)"),
    ("status", pl.String, "", "'evaluated' | 'not evaluated'"),
    ("reason", pl.String, "", "why not evaluated (which inputs are missing), or an error"),
    ("findings", pl.Int64, "count", "findings produced"),
)
