"""Score the analyzer on the real-incident library (samples/real/, its README).

Each bundle there is a real capture of this project's capture script with incidents
injected at exactly logged times; ``<name>.truth.json`` holds them (kind = the detector
that should report it, ``start``/``end`` in epoch seconds) and the quiet windows between
them. This module runs the real pipeline on every bundle and grades it:

- per incident: found or not (a finding of its kind overlapping its window), the start
  and end errors of the reported window (union of the overlapping findings of that
  kind), its severity, and whether the errors are within `TOLERANCE_S`; an OOM kill by
  the kernel's kill time (1 s) and its chain's start against the cgroup's first limit
  hit (`CHAIN_TOLERANCE_S`);
- per quiet window: every finding above ``info`` that overlaps it (a false alarm) —
  except CPU contention while the neighbours the injector recorded outside the capture
  (other tenants' work, ``background[].series``) kept every CPU busy over the part of the
  finding inside the window (or the capture's own raw mpstat and PSI, read by observe.py,
  show every CPU busy and tasks waiting there), and disk findings while they wrote ≥
  `NEIGHBOURS_WRITE_MB_S`: that load is real, and is listed as explained;
- per finding (every finding of the bundle): its evidence numbers recomputed from the raw
  files by samples/real/recompute.py (observe.py's parsers, no analyzer code) over the
  finding's window — agreeing within 5 %, disagreeing, or not recomputed (with why).

Host reclaim starts when memory runs out, not when the load starts allocating: a
``memory_pressure`` incident whose raw /proc/vmstat shows when reclaim began
(``observed.reclaim_span_s_from_start``, observe.py) starts there.

``python -m tests.real.library_score`` prints the table (and ``--write-baseline`` records what
holds now in `BASELINE`, which ``tests/real/test_library.py`` then enforces: a found
incident may not be lost, a window within tolerance may not drift out, a quiet window
may not gain a finding above info, a bundle may not gain evidence numbers that disagree
with its raw files). These are real captures, unlike the synthetic
scenario suite, which only checks the generator against itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "samples" / "real"
BASELINE = Path(__file__).with_name("baseline.json")
#: seconds the reported start and end may be off (issue: 3 s; an OOM kill: 1 s)
TOLERANCE_S = {"oom_kill": 1.0}
DEFAULT_TOLERANCE_S = 3.0
#: a finding counts for an incident when it overlaps the window widened by this much
MATCH_SLACK_S = 5.0
#: an OOM kill's chain starts where its cgroup first hit the limit, within this much
CHAIN_TOLERANCE_S = 5.0
#: a finding reaching this far into a quiet window from outside it is not an alarm
QUIET_EDGE_S = 3.0
SEVERITY = ["info", "minor", "major", "critical"]


@dataclass
class IncidentScore:
    bundle: str
    id: str
    kind: str
    found: bool
    start_err_s: float | None = None
    end_err_s: float | None = None
    within: bool = False
    severity: str | None = None
    findings: list[str] = field(default_factory=list)  # keys and windows of the matches
    tolerance_s: float = DEFAULT_TOLERANCE_S
    chain_start_err_s: float | None = None  # OOM: chain start - the limit's first hit


#: median neighbour CPU (share of all CPUs) above which a quiet window is contended for real
NEIGHBOURS_SATURATE = 0.9
#: neighbours' peak writes above which a disk finding in a quiet window is theirs
NEIGHBOURS_WRITE_MB_S = 50.0


@dataclass
class QuietScore:
    bundle: str
    start: float
    end: float
    alarms: list[str] = field(default_factory=list)  # findings above info inside
    explained: list[str] = field(default_factory=list)  # contention by saturating neighbours
    neighbour_cpu_pct: float | None = None  # median, % of one CPU


@dataclass
class EvidenceScore:
    """The numbers of one finding against the raw files (samples/real/recompute.py)."""

    bundle: str
    finding: str  # key and window
    checked: int = 0
    agree: int = 0
    differ: list[str] = field(default_factory=list)  # "signal stat: reported vs raw"
    not_recomputed: list[str] = field(default_factory=list)  # "signal: why"


@dataclass
class BundleScore:
    bundle: str
    incidents: list[IncidentScore]
    quiet: list[QuietScore]
    evidence: list[EvidenceScore] = field(default_factory=list)


def _epoch(t: datetime) -> float:
    return t.astimezone(UTC).timestamp()


def _kinds(incident: dict[str, Any]) -> list[str]:
    kind = incident["kind"]
    kinds = list(kind) if isinstance(kind, list) else [kind]
    return kinds + [k for k in incident.get("also_kinds", []) if k not in kinds]


def grade(
    name: str,
    truth: dict[str, Any],
    findings: list[dict[str, Any]],
    chains: list[dict[str, Any]] | None = None,
    bundle: Path | None = None,
) -> BundleScore:
    """The scores of one bundle from its truth and the analyzer's findings (and chains);
    ``bundle``: its raw files, read by samples/real/observe.py (never by the analyzer) to
    tell whether a quiet window's host was saturated for real."""
    spans = [(f, _epoch(f["start"]), _epoch(f["end"])) for f in findings]
    chain_of = {i: c for c in chains or [] for i in c["finding_ids"]}
    incidents = [_incident(name, inc, spans, chain_of) for inc in truth["incidents"]]
    quiet = []
    cpus = int(truth.get("made_with", {}).get("host", {}).get("nproc") or 0)
    for w in truth.get("quiet_windows", []):
        a, z = float(w["start"]), float(w["end"])
        q = QuietScore(name, a, z, neighbour_cpu_pct=_neighbour_cpu(truth, a, z))
        for f, s, e in spans:
            inside = min(z, e) - max(a, s)
            # a window edge within the tolerance of the quiet window's own edge is not an
            # alarm (incident windows may be off by as much)
            if (
                f["severity"] == "info"
                or inside <= 0
                or (inside <= QUIET_EDGE_S and (s < a or e > z))
            ):
                continue
            text = f"{f['key']} ({f['severity']}) {s - a:+.0f}..{e - a:+.0f} s"
            why = _neighbours(truth, f["kind"], max(a, s), min(z, e), cpus, bundle)
            if why:
                text += f" ({why})"
            (q.explained if why else q.alarms).append(text)
        quiet.append(q)
    return BundleScore(name, incidents, quiet)


def _incident(
    name: str,
    inc: dict[str, Any],
    spans: list[tuple[dict[str, Any], float, float]],
    chain_of: dict[int, dict[str, Any]],
) -> IncidentScore:
    """One incident: its findings of the right kind, their window errors. An OOM kill is
    judged by the kill time (the kernel log line, ``observed.kill_time``), and its chain by
    where the cgroup first hit its limit (``observed.limit_first_hit``, when known)."""
    kinds, a, z = _kinds(inc), float(inc["start"]), float(inc["end"])
    tol = max(TOLERANCE_S.get(k, DEFAULT_TOLERANCE_S) for k in kinds)
    observed = inc.get("observed") or {}
    kill = observed.get("kill_time") if "oom_kill" in kinds else None
    if kill is not None:
        a = z = float(kill)
    reclaim = observed.get("reclaim_span_s_from_start") if "memory_pressure" in kinds else None
    if reclaim:  # host reclaim began when memory ran out (module docstring)
        a += float(reclaim[0])
    hits = [
        (f, s, e)
        for f, s, e in spans
        if f["kind"] in kinds and s < z + MATCH_SLACK_S and e > a - MATCH_SLACK_S
    ]
    score = IncidentScore(name, inc["id"], "/".join(kinds), bool(hits), tolerance_s=tol)
    if not hits:
        return score
    s0, e0 = min(s for _, s, _ in hits), max(e for _, _, e in hits)
    score.severity = max((f["severity"] for f, _, _ in hits), key=SEVERITY.index)
    score.findings = [f"{f['key']} {s - a:+.0f}..{e - z:+.0f} s" for f, s, e in hits]
    score.start_err_s = round(s0 - a, 1)
    if kill is not None:  # a point event: the second of the kill
        score.within = abs(s0 - a) <= tol
        first_hit = observed.get("limit_first_hit")
        chain = next((chain_of[f["id"]] for f, _, _ in hits if f.get("id") in chain_of), None)
        if first_hit is not None and chain is not None:
            score.chain_start_err_s = round(_epoch(chain["start"]) - float(first_hit), 1)
            score.within = score.within and abs(score.chain_start_err_s) <= CHAIN_TOLERANCE_S
        return score
    score.end_err_s = round(e0 - z, 1)
    score.within = abs(s0 - a) <= tol and abs(e0 - z) <= tol
    return score


def _neighbours(
    truth: dict[str, Any], kind: str, a: float, z: float, cpus: int, bundle: Path | None
) -> str | None:
    """Why a finding of ``kind`` in [a, z] is the neighbours' real load, or None."""
    if kind == "cpu_contention" and cpus:
        busy = _foreign(truth, "foreign_cpu_pct_of_one_cpu", a, z, "median")
        if busy is not None and busy >= NEIGHBOURS_SATURATE * 100 * cpus:
            return f"neighbours {busy:.0f} % of a CPU"
        raw = _raw_saturation(bundle, a, z) if bundle is not None else None
        if raw is not None:
            return f"{raw}; neighbours {busy or 0:.0f} % of a CPU"
    if kind in ("io_saturation", "checkpoint_stall"):
        wrote = _foreign(truth, "foreign_write_mb_s", a, z, "max")
        if wrote is not None and wrote >= NEIGHBOURS_WRITE_MB_S:
            return f"neighbours wrote {wrote:.0f} MB/s"
    return None


#: the host saturated for real, from its raw files: %idle median at most, CPU PSI at least
RAW_IDLE_MAX_PCT, RAW_PSI_MIN_PCT = 5.0, 50.0


def _library_module(name: str) -> Any:
    """observe.py or recompute.py of samples/real (scripts beside the bundles)."""
    sys.path.insert(0, str(LIBRARY))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def _raw_saturation(bundle: Path, a: float, z: float) -> str | None:
    """The raw mpstat/PSI of ``bundle`` (observe.py) show every CPU busy and tasks waiting
    over [a, z]: in a window with no injected load, that is the neighbours' contention."""
    observe = _library_module("observe")
    o = observe.cpu_common(_raw(bundle, observe), a, z, [])
    idle, psi = o["idle_pct_all"]["median"], o.get("psi_cpu_some_pct")
    if idle is None or psi is None or idle > RAW_IDLE_MAX_PCT or psi < RAW_PSI_MIN_PCT:
        return None
    return f"raw mpstat %idle {idle:.0f}, CPU PSI {psi:.0f} %"


_RAW: dict[Path, Any] = {}


def _raw(bundle: Path, observe: Any) -> Any:
    if bundle not in _RAW:
        _RAW[bundle] = observe.Bundle(bundle)
    return _RAW[bundle]


def _neighbour_cpu(truth: dict[str, Any], a: float, z: float) -> float | None:
    """Median CPU of the processes outside the capture (% of one CPU) in [a, z]."""
    return _foreign(truth, "foreign_cpu_pct_of_one_cpu", a, z, "median")


def _foreign(truth: dict[str, Any], column: str, a: float, z: float, how: str) -> float | None:
    """The median or max of a background column in [a, z] (None without samples)."""
    values = []
    for bg in truth.get("background", []):
        cols = bg.get("series_columns") or []
        if "epoch" not in cols or column not in cols:
            continue
        i, j = cols.index("epoch"), cols.index(column)
        values += [float(r[j]) for r in bg.get("series", []) if a <= float(r[i]) <= z]
    if not values:
        return None
    values.sort()
    return values[-1] if how == "max" else values[len(values) // 2]


def library() -> list[tuple[Path, dict[str, Any]]]:
    """(bundle, truth) of every bundle in the library, by name."""
    out = []
    for truth_path in sorted(LIBRARY.glob("*.truth.json")):
        truth = json.loads(truth_path.read_text(encoding="utf-8"))
        out.append((LIBRARY / truth["bundle"], truth))
    return out


def score_bundle(bundle: Path, truth: dict[str, Any]) -> BundleScore:
    """Run the real pipeline on ``bundle`` (no outputs) and grade it."""
    from analyzer import pipeline

    result = pipeline.run(bundle, pipeline.Options(report=None))
    score = grade(truth["scenario"], truth, result.findings, result.chains, bundle)
    score.evidence = evidence(truth["scenario"], bundle, result.findings)
    return score


def evidence(name: str, bundle: Path, findings: list[dict[str, Any]]) -> list[EvidenceScore]:
    """Every finding's evidence numbers against the raw files of ``bundle``."""
    recompute = _library_module("recompute")
    raw = _raw(bundle, _library_module("observe"))
    out = []
    for f in findings:
        a, z = _epoch(f["start"]), _epoch(f["end"])
        e = EvidenceScore(name, f"{f['key']} {_clock(a)}–{_clock(z)}")
        for c in recompute.check_finding(raw, f, _epoch):
            if c.agree is None:
                e.not_recomputed.append(f"{c.signal}: {c.why}")
                continue
            e.checked += 1
            e.agree += bool(c.agree)
            if not c.agree:
                e.differ.append(f"{c.signal} {c.stat}: {c.reported} vs raw {c.recomputed}")
        out.append(e)
    return out


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def table(scores: list[BundleScore]) -> str:
    """The Markdown table kept in docs/detectors.md."""
    lines = [
        "| bundle | incident | kind | found | start err (s) | end err (s) | chain start err (s) | within | severity |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in scores:
        for i in b.incidents:
            lines.append(
                f"| {b.bundle} | {i.id} | {i.kind} | {'yes' if i.found else '**no**'} | "
                f"{_num(i.start_err_s)} | {_num(i.end_err_s)} | {_num(i.chain_start_err_s)} | "
                f"{'yes' if i.within else ('**no**' if i.found else '–')} | {i.severity or '–'} |"
            )
    found = sum(i.found for b in scores for i in b.incidents)
    within = sum(i.within for b in scores for i in b.incidents)
    total = sum(len(b.incidents) for b in scores)
    windows = [q for b in scores for q in b.quiet]
    alarms = [q for q in windows if q.alarms]
    lines += [
        "",
        f"{found} of {total} incidents found, {within} within tolerance "
        f"({DEFAULT_TOLERANCE_S:g} s; OOM kill {TOLERANCE_S['oom_kill']:g} s, its chain's "
        f"start {CHAIN_TOLERANCE_S:g} s from the limit's first hit); "
        f"{len(alarms)} of {len(windows)} quiet windows with a finding above info.",
    ]
    for q in alarms:
        lines.append(f"- quiet window of {q.bundle}: {'; '.join(q.alarms)}")
    for q in windows:
        if q.explained:
            lines.append(f"- the neighbours' own load in {q.bundle}: {'; '.join(q.explained)}")
    return "\n".join([*lines, "", evidence_table(scores)])


def evidence_table(scores: list[BundleScore]) -> str:
    """Per finding: its evidence numbers recomputed from the raw files (recompute.py)."""
    lines = [
        "| bundle | finding (UTC) | numbers | agree within 5 % | differ | not recomputed |",
        "|---|---|---|---|---|---|",
    ]
    for b in scores:
        for e in b.evidence:
            lines.append(
                f"| {e.bundle} | {e.finding} | {e.checked} | {e.agree} | "
                f"{'; '.join(e.differ) or '–'} | {'; '.join(e.not_recomputed) or '–'} |"
            )
    rows = [e for b in scores for e in b.evidence]
    checked, agree = sum(e.checked for e in rows), sum(e.agree for e in rows)
    skipped = sum(len(e.not_recomputed) for e in rows)
    lines += [
        "",
        f"{len(rows)} findings, {checked} evidence numbers recomputed from the raw files: "
        f"{agree} agree within 5 %, {checked - agree} differ; {skipped} not recomputed.",
    ]
    return "\n".join(lines)


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1f}"


def baseline_of(scores: list[BundleScore]) -> dict[str, Any]:
    return {
        "incidents": {
            f"{i.bundle}/{i.id}": {"found": i.found, "within": i.within}
            for b in scores
            for i in b.incidents
        },
        "quiet_alarms": {
            f"{q.bundle}/{q.start:.0f}": len(q.alarms) for b in scores for q in b.quiet
        },
        "evidence_differ": {b.bundle: sum(len(e.differ) for e in b.evidence) for b in scores},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.real.library_score", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--write-baseline", action="store_true", help=f"record the result in {BASELINE.name}"
    )
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    args = parser.parse_args(argv)
    scores = [score_bundle(b, t) for b, t in library()]
    if args.json:
        print(json.dumps([asdict(s) for s in scores], indent=1))
    else:
        print(table(scores))
    if args.write_baseline:
        BASELINE.write_text(json.dumps(baseline_of(scores), indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
