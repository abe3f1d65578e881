"""Findings and incidents (chains) read from the store, with impact in user terms and the verdict.

Shared by the HTML report and the Markdown summary so that both say the same thing.

Inputs (all optional, columns selected only when they exist): ``findings`` (finding_id, key,
kind, title, severity, start_ts, end_ts, summary, impact_json, gpu_seconds_lost, remediation,
caveats, chain_id, rank…), ``chains`` (chain_id, rank, title, severity, start_ts, end_ts,
summary, cause_finding_id, finding_ids, period_s, occurrences, gpu_seconds_lost) and
``detector_status`` (detector, status, reason, findings). Without a ``chains`` table every
finding is its own incident.

Impact: the chain's own GPU-seconds (correlate.py does not double count GPUs idled by several
causes); other measures are summed over the findings of one kind (counts, seconds) — when
several kinds report the same measure, the largest sum counts, not their total — or the
worst value is kept (percentages), as :data:`IMPACT` says per key.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from reports.queries import Store
from reports.timefmt import TimeFormatter

SEVERITY_ORDER = ["critical", "major", "minor", "info"]
FINDING_COLUMNS = [
    "finding_id", "key", "kind", "title", "severity", "start_ts", "end_ts", "duration_s",
    "summary", "impact_json", "impact", "gpu_seconds_lost", "remediation", "caveats",
    "series", "period_s", "occurrences", "chain_id", "rank",
]  # fmt: skip
CHAIN_COLUMNS = [
    "chain_id", "rank", "title", "severity", "start_ts", "end_ts", "summary",
    "cause_finding_id", "finding_ids", "period_s", "occurrences", "gpu_seconds_lost",
]  # fmt: skip
# key -> (label, how chain members combine: sum | max | min, decimals). Order = display order.
IMPACT: dict[str, tuple[str, str, int]] = {
    "gpu_seconds_lost": ("GPU-seconds lost", "sum", 0),
    "seconds_throttled": ("s CPU-throttled", "sum", 0),
    "processes_killed": ("processes killed", "sum", 0),
    "latency_added_ms": ("ms latency added", "max", 0),
    "memory_stall_s": ("s stalled on memory", "sum", 0),
    "blocked_s": ("s tasks blocked", "max", 0),
    "saturated_s": ("s disk saturated", "sum", 0),
    "gpu_idle_s": ("s GPUs idle", "sum", 0),
    "write_burst_s": ("s of write bursts", "sum", 0),
    "written_mb": ("MB written in bursts", "sum", 0),
    "swapped_out_mb": ("MB swapped out", "sum", 0),
    "swapped_in_mb": ("MB swapped in", "sum", 0),
    "rss_freed_mb": ("MB freed by OOM kills", "sum", 0),
    "xid_events": ("GPU Xid errors", "sum", 0),
    "packets_lost": ("packets lost", "sum", 0),
    "missing_s": ("s without samples", "sum", 0),
    "throttled_share_pct": ("% of CFS periods throttled (peak)", "max", 0),
    "cpu_wait_pct": ("% of time tasks waited for a CPU (peak)", "max", 1),
    "stall_some_pct": ("% some-stall (peak)", "max", 0),
    "stall_full_pct": ("% full-stall (peak)", "max", 0),
    "irq_pct": ("% of a CPU in IRQ (peak)", "max", 0),
    "clock_pct_of_normal": ("% of normal GPU clock (lowest)", "min", 0),
    "clock_pct_of_max": ("% of maximum GPU clock (lowest)", "min", 0),
}
# Numbers in impact_json that describe rather than measure the impact (shown on the cards only).
NOT_IMPACT = {"gpus", "gpu", "cpu", "cpus", "pid", "cause", "count"}


@dataclass
class Incident:
    """One chain (or a lone finding) as the report shows it."""

    chain_id: int
    rank: int
    title: str
    severity: str
    x0: int | None
    x1: int | None
    summary: str
    members: list[dict[str, Any]]
    cause_id: int | None = None
    period_s: float | None = None
    occurrences: int | None = None
    impact: list[tuple[str, str]] = field(default_factory=list)  # (number, label)
    keys: list[tuple[str, int, Any]] = field(default_factory=list)  # (key, count, first id)
    window: str = ""
    local: str | None = None

    def first_fix(self) -> str | None:
        """The first remediation line of the incident's cause (else of its first member
        that has one): what the summary puts on the first screen."""
        cause = [m for m in self.members if m.get("finding_id") == self.cause_id]
        for m in cause + self.members:
            lines = m.get("remediation_lines") or []
            if lines:
                return str(lines[0])
        return None


def parse_impact(raw: Any) -> dict[str, Any]:
    """``impact_json`` as a dict; junk gives an empty dict.

    >>> parse_impact('{"gpu_seconds_lost": 5.9}'), parse_impact("oops"), parse_impact(None)
    ({'gpu_seconds_lost': 5.9}, {}, {})
    """
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def combine_impact(
    members: list[dict[str, Any]], gpu_seconds: float | None
) -> list[tuple[str, str]]:
    """Impact lines ``(number, label)`` for a group of findings, most important first.

    >>> combine_impact([{"impact": {"processes_killed": 1, "x": 2}}, {"impact": {"processes_killed": 2}}], 12.4)
    [('12', 'GPU-seconds lost'), ('3', 'processes killed'), ('2.0', 'x')]
    """
    per_kind: dict[tuple[str, str], float] = {}
    for f in members:
        kind = str(f.get("kind") or f.get("key") or "")
        for key, raw in (f.get("impact") or {}).items():
            v = _number(raw)
            if v is None or key in NOT_IMPACT:
                continue
            how = IMPACT.get(key, ("", "sum", 1))[1]
            k = (key, kind if how == "sum" else "")
            if k not in per_kind:
                per_kind[k] = v
            elif how == "sum":
                per_kind[k] += v
            elif how == "max":
                per_kind[k] = max(per_kind[k], v)
            else:
                per_kind[k] = min(per_kind[k], v)
    values: dict[str, float] = {}
    for (key, _kind), v in per_kind.items():  # several kinds measuring one effect: the largest
        values[key] = max(values.get(key, v), v)
    if gpu_seconds is not None:
        values["gpu_seconds_lost"] = gpu_seconds
    order = list(IMPACT)
    out = []
    for key in sorted(values, key=lambda k: (order.index(k) if k in order else len(order), k)):
        label, _how, digits = IMPACT.get(key, (key.replace("_", " "), "sum", 1))
        if key == "gpu_seconds_lost" and values[key] <= 0:
            continue
        out.append((f"{values[key]:,.{digits}f}", label))
    return out


def load_findings(store: Store, tf: TimeFormatter) -> list[dict[str, Any]]:
    """Every finding in rank order, with x0/x1 (epoch ms), parsed impact and readable times."""
    if not store.has("findings"):
        return []
    have = store.columns("findings")
    if "rank" in have:
        order = "rank NULLS LAST"
    else:
        order = (
            "CASE severity "
            + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SEVERITY_ORDER))
            + " ELSE 9 END"
        )
        order = order if "severity" in have else ""
    if order and "start_ts" in have:
        order += ", start_ts"
    rows = store.records("findings", FINDING_COLUMNS, order=order)
    for i, r in enumerate(rows):
        if r["finding_id"] is None:
            r["finding_id"] = i + 1
        r["severity"] = str(r["severity"] or "info")
        r["x0"] = r["start_ts"]
        r["x1"] = r["end_ts"] if r["end_ts"] is not None else r["start_ts"]
        r["impact"] = parse_impact(r["impact_json"]) or (
            {"note": r["impact"]} if isinstance(r["impact"], str) and r["impact"] else {}
        )
        r["impact_text"] = r["impact"].get("note") if set(r["impact"]) == {"note"} else None
        if r["impact_text"]:
            r["impact"] = {}
        r["label"] = str(r["title"] or r["key"] or r["kind"] or "finding")
        r["window"] = tf.window(r["start_ts"], r["end_ts"])
        r["local"] = tf.local(r["start_ts"])
        r["remediation_lines"] = [
            ln for ln in str(r["remediation"] or "").splitlines() if ln.strip()
        ]
        r["caveat_lines"] = [ln for ln in str(r["caveats"] or "").splitlines() if ln.strip()]
    return rows


def load_incidents(
    store: Store, findings: list[dict[str, Any]], tf: TimeFormatter
) -> list[Incident]:
    """Chains in rank order; each finding belongs to exactly one incident."""
    by_id = {f["finding_id"]: f for f in findings}
    incidents: list[Incident] = []
    seen: set[Any] = set()
    rows = (
        store.records("chains", CHAIN_COLUMNS, order="rank NULLS LAST, chain_id")
        if store.usable("chains", "chain_id")
        else []
    )
    for c in rows:
        ids = _ids(c["finding_ids"]) or [
            f["finding_id"] for f in findings if f.get("chain_id") == c["chain_id"]
        ]
        members = [by_id[i] for i in ids if i in by_id and i not in seen]
        if not members:
            continue
        seen.update(f["finding_id"] for f in members)
        incidents.append(_incident(c, members, tf))
    for f in findings:  # findings no chain claims (or no chains table): their own incident
        if f["finding_id"] in seen:
            continue
        c = {"chain_id": None, "title": f["label"], "severity": f["severity"], "start_ts": f["x0"],
             "end_ts": f["x1"], "summary": f["summary"], "cause_finding_id": f["finding_id"],
             "gpu_seconds_lost": f["gpu_seconds_lost"]}  # fmt: skip
        incidents.append(_incident(c, [f], tf))
    incidents.sort(
        key=lambda i: (
            i.rank,
            SEVERITY_ORDER.index(i.severity) if i.severity in SEVERITY_ORDER else 9,
        )
    )
    for n, inc in enumerate(incidents, 1):
        inc.rank = n
        inc.chain_id = inc.chain_id if inc.chain_id is not None else 100_000 + n
    return incidents


def _incident(c: dict[str, Any], members: list[dict[str, Any]], tf: TimeFormatter) -> Incident:
    x0 = (
        c["start_ts"]
        if c.get("start_ts") is not None
        else min((f["x0"] for f in members if f["x0"] is not None), default=None)
    )
    x1 = (
        c["end_ts"]
        if c.get("end_ts") is not None
        else max((f["x1"] for f in members if f["x1"] is not None), default=None)
    )
    gpu = _number(c.get("gpu_seconds_lost"))
    if gpu is None:
        per_kind: dict[str, float] = {}
        for f in members:
            v = _number(f.get("gpu_seconds_lost"))
            if v is not None:
                per_kind[str(f["kind"])] = per_kind.get(str(f["kind"]), 0.0) + v
        gpu = max(per_kind.values()) if per_kind else None
    sev = str(c.get("severity") or members[0]["severity"])
    keys: dict[str, list[Any]] = {}
    for f in members:
        keys.setdefault(str(f["key"] or f["kind"] or "?"), []).append(f["finding_id"])
    return Incident(
        chain_id=c.get("chain_id"),  # type: ignore[arg-type]
        rank=int(c.get("rank") or 10**9),
        title=str(c.get("title") or members[0]["label"]),
        severity=sev,
        x0=x0,
        x1=x1,
        summary=str(c.get("summary") or members[0]["summary"] or ""),
        members=members,
        cause_id=c.get("cause_finding_id") or members[0]["finding_id"],
        period_s=_number(c.get("period_s")),
        occurrences=c.get("occurrences"),
        impact=combine_impact(members, gpu),
        keys=[(k, len(ids), ids[0]) for k, ids in keys.items()],
        window=tf.window(x0, x1),
        local=tf.local(x0),
    )


def _ids(raw: Any) -> list[int]:
    out = []
    for part in str(raw or "").split(","):
        part = part.strip()
        if part.lstrip("-").isdigit():
            out.append(int(part))
    return out


def detector_status(store: Store) -> list[dict[str, Any]]:
    """``detector_status`` rows, the ones that could not run first."""
    rows = store.records("detector_status", ["detector", "status", "reason", "findings"])
    rows.sort(key=lambda r: (r["status"] == "evaluated", str(r["detector"] or "")))
    return rows


def verdict(
    findings: list[dict[str, Any]],
    incidents: list[Incident],
    detectors: list[dict[str, Any]],
    has_findings_table: bool,
) -> dict[str, str]:
    """One line: the top incident and its cost, or what could and could not be checked.

    Never an all-clear while detectors could not be evaluated ("cannot conclude").
    """
    skipped = [d for d in detectors if d["status"] != "evaluated"]
    ran = len(detectors) - len(skipped)
    checks = ""
    if detectors:
        checks = f"{ran} of {len(detectors)} detectors evaluated"
        if skipped:
            names = ", ".join(str(d["detector"]) for d in skipped[:6]) + (
                ", …" if len(skipped) > 6 else ""
            )
            checks += f"; cannot conclude on {names} (inputs missing)"
    if incidents:
        top = incidents[0]
        text = f"{top.severity.upper()}: {top.title}"
        if top.impact:
            text += " — " + ", ".join(f"{n} {label}" for n, label in top.impact[:2])
        more = len(incidents) - 1
        if more:
            text += f" (+{more} more incident{'s' if more > 1 else ''})"
        return {"level": top.severity, "text": text, "checks": checks}
    if has_findings_table and detectors:
        if skipped:
            text = f"No incident found by the {ran} detectors that ran; {len(skipped)} could not be evaluated, so this is not an all-clear."
            return {"level": "warn", "text": text, "checks": checks}
        return {
            "level": "ok",
            "text": f"No incident found: all {ran} detectors ran and found nothing.",
            "checks": checks,
        }
    if has_findings_table:
        return {"level": "ok", "text": "No findings: detectors found nothing.", "checks": checks}
    return {"level": "none", "text": "No findings (detectors not run).", "checks": checks}
