"""Stages 5–7 in one call: signals → detectors → correlate, written to the store.

`analyse(store)` builds the ``signals`` table, runs every detector of
`analyzer.detectors.DETECTORS`, marks findings that fall in a sampling gap, links findings
into chains and writes ``findings``, ``finding_evidence``, ``finding_log_lines``,
``chains`` and ``detector_status``. A detector that raises is reported as not evaluated
(with the error) unless ``debug`` is set. Then the symptom stage (`analyzer.symptoms`)
ranks what explains the application's own symptom windows, when the store has any.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analyzer import signals
from analyzer.correlate import Chain, correlate
from analyzer.detectors import DETECTORS
from analyzer.detectors._base import Context
from analyzer.findings import (
    CHAINS,
    DETECTOR_STATUS,
    FINDING_EVIDENCE,
    FINDING_LOG_LINES,
    FINDINGS,
    Finding,
    NotEvaluated,
)
from analyzer.intervals import overlap_s
from analyzer.symptoms import stage as symptoms


@dataclass
class Analysis:
    findings: list[Finding]  # in rank order; finding_id = position + 1
    chains: list[Chain]  # in rank order; members index ``findings``
    not_evaluated: list[NotEvaluated]
    status: list[dict[str, Any]] = field(default_factory=list)
    bundle_changes: dict[str, Any] = field(default_factory=dict)  # columns of `bundle` set

    def finding_dicts(self) -> list[dict[str, Any]]:
        """Findings as plain dicts (the JSON output's ``findings``)."""
        chain_of = {i: c.chain_id for c in self.chains for i in c.members}
        out = []
        for i, f in enumerate(self.findings):
            out.append(
                {
                    "id": i + 1,
                    "rank": i + 1,
                    "chain_id": chain_of.get(i),
                    "key": f.key,
                    "kind": f.kind,
                    "title": f.title,
                    "severity": f.severity,
                    "start": f.start,
                    "end": f.end,
                    "duration_s": f.duration_s,
                    "summary": f.summary,
                    "impact": f.impact,
                    "gpu_seconds_lost": f.gpu_seconds_lost,
                    "evidence": [vars(e) for e in f.evidence],
                    "log_lines": [vars(ln) for ln in f.log_lines],
                    "remediation": f.remediation,
                    "caveats": f.caveats,
                    "series": f.series,
                    "period_s": f.period_s,
                    "occurrences": f.occurrences,
                }
            )
        return out

    def chain_dicts(self) -> list[dict[str, Any]]:
        return [
            {
                "id": c.chain_id,
                "rank": c.rank,
                "title": c.title,
                "severity": c.severity,
                "start": c.start,
                "end": c.end,
                "summary": c.summary,
                "cause_finding_id": c.cause + 1,
                "finding_ids": [i + 1 for i in c.members],
                "period_s": c.period_s,
                "occurrences": c.occurrences,
                "gpu_seconds_lost": c.gpu_seconds_lost,
                "mechanisms": c.mechanisms,
                "concurrent_chain_ids": c.concurrent,
            }
            for c in self.chains
        ]


def analyse(store: Any, *, debug: bool = False) -> Analysis:
    """Run stages 5–7 on ``store`` (an `analyzer.store.Store`) and write their tables."""
    con = store.con
    facts = _facts(con)
    notes: list[str] = []
    sig = signals.build(con, facts.get("start"), facts.get("end"), facts.get("cpus"), notes)
    changes = _window_changes(con, notes)
    ctx = Context(
        con=con,
        signals=sig,
        cpus=facts.get("cpus") or _max(sig, "cpus"),
        interval_s=facts.get("interval_s"),
    )
    found: list[Finding] = []
    skipped: list[NotEvaluated] = []
    status = []
    for module in DETECTORS:
        try:
            result = module.detect(ctx)
        except Exception as e:
            if debug:
                raise
            result = NotEvaluated(
                module.NAME, f"internal error: {type(e).__name__}: {str(e)[:300]}"
            )
        if isinstance(result, NotEvaluated):
            skipped.append(result)
            status.append(
                {
                    "detector": module.NAME,
                    "status": "not evaluated",
                    "reason": result.reason,
                    "findings": 0,
                }
            )
        else:
            found += result
            status.append(
                {
                    "detector": module.NAME,
                    "status": "evaluated",
                    "reason": None,
                    "findings": len(result),
                }
            )
    _gap_caveats(found)
    ranked = _rank(found)
    chains = correlate(ranked)
    analysis = Analysis(ranked, chains, skipped, status, changes)
    _write(store, analysis)
    symptoms.analyse(store, sig, ranked, debug=debug)  # issue #18: what explains the symptom
    return analysis


def _window_changes(con: Any, notes: list[str]) -> dict[str, Any]:
    """When the data's span replaced the manifest's window (`signals.build` notes), the
    ``bundle`` row says so: the note appended, start/end set to the analysed span."""
    if not notes:
        return {}
    con.sql(
        "UPDATE bundle SET notes = concat_ws(chr(10), nullif(notes, ''), $note), "
        "start_utc = (SELECT min(ts) FROM signals), end_utc = (SELECT max(ts) FROM signals)",
        params={"note": "\n".join(notes)},
    )
    notes_, start, end = con.sql("SELECT notes, start_utc, end_utc FROM bundle").fetchall()[0]
    return {"notes": notes_, "start_utc": start, "end_utc": end}


def _rank(found: list[Finding]) -> list[Finding]:
    """Findings in chain rank order (cause first, then by start)."""
    chains = correlate(found)
    order = []
    for c in chains:
        order += [c.cause] + [i for i in c.members if i != c.cause]
    return [found[i] for i in order]


def _gap_caveats(found: list[Finding]) -> None:
    gaps = [f for f in found if f.kind == "sampling_gap"]
    for f in found:
        if f.kind == "sampling_gap":
            continue
        for g in gaps:
            if overlap_s((f.start, f.end), (g.start, g.end)) > 0:
                f.caveats.append(
                    f"Collectors missed samples at {g.start:%H:%M:%S}–{g.end:%H:%M:%S} UTC ({g.summary.split(' at ')[0].removeprefix('No samples from ')}): values in that stretch are incomplete."
                )


def _facts(con: Any) -> dict[str, Any]:
    try:
        rows = con.sql(
            "SELECT start_utc, end_utc, cpus, interval_s, manifest_present FROM bundle LIMIT 1"
        ).fetchall()
    except Exception:
        return {}
    if not rows:
        return {}
    start, end, cpus, interval, manifest = rows[0]
    if not manifest:  # hand-made bundle: the span may come from old kernel log lines
        start = end = None
    return {"start": start, "end": end, "cpus": cpus, "interval_s": interval}


def _max(df: pl.DataFrame, col: str) -> int | None:
    v = df[col].max() if df.height else None
    return int(v) if v is not None else None  # type: ignore[arg-type]


def _write(store: Any, a: Analysis) -> None:
    chain_of = {i: c.chain_id for c in a.chains for i in c.members}
    frows, erows, lrows = [], [], []
    for i, f in enumerate(a.findings):
        fid = i + 1
        frows.append(
            {
                "finding_id": fid, "key": f.key, "kind": f.kind, "title": f.title, "severity": f.severity,
                "start_ts": f.start, "end_ts": f.end, "duration_s": f.duration_s, "summary": f.summary,
                "impact_json": json.dumps(f.impact, sort_keys=True, default=str), "gpu_seconds_lost": f.gpu_seconds_lost,
                "remediation": "\n".join(f.remediation), "caveats": "\n".join(f.caveats) or None, "series": f.series,
                "period_s": f.period_s, "occurrences": f.occurrences, "chain_id": chain_of.get(i), "rank": fid,
            }
        )  # fmt: skip
        erows += [{"finding_id": fid, **vars(e)} for e in f.evidence]
        lrows += [
            {
                "finding_id": fid,
                "file": ln.source_file,
                "line_no": ln.line_no,
                "ts": ln.ts,
                "text": ln.text,
            }
            for ln in f.log_lines
        ]
    crows = [
        {
            "chain_id": c.chain_id, "rank": c.rank, "title": c.title, "severity": c.severity, "start_ts": c.start,
            "end_ts": c.end, "summary": c.summary, "cause_finding_id": c.cause + 1,
            "finding_ids": ",".join(str(i + 1) for i in c.members), "period_s": c.period_s,
            "occurrences": c.occurrences, "gpu_seconds_lost": c.gpu_seconds_lost,
            "mechanisms": "\n".join(c.mechanisms) or None,
            "concurrent_chain_ids": ",".join(map(str, c.concurrent)) or None,
        }
        for c in a.chains
    ]  # fmt: skip
    for name, table, rows in (
        ("findings", FINDINGS, frows),
        ("finding_evidence", FINDING_EVIDENCE, erows),
        ("finding_log_lines", FINDING_LOG_LINES, lrows),
        ("chains", CHAINS, crows),
        ("detector_status", DETECTOR_STATUS, a.status),
    ):
        frame = (
            pl.DataFrame(rows, schema=table.schema, orient="row")
            if not rows
            else pl.DataFrame(rows, infer_schema_length=None)
        )
        store.write(name, frame, None)
