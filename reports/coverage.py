"""Coverage section and appendix data: every input file's fate, every detector's status, the
bundle manifest, and SQL to reproduce any number of the report.

Inputs: ``collectors`` (one row per bundle file: status, lines parsed/skipped with reasons),
``detector_status`` (via :mod:`reports.incidents`), ``bundle``; all optional.
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath
from typing import Any

from reports.queries import Store, skip_reasons

STATUS_ORDER = [
    "failed", "refused", "timeout", "unrecognised", "partial", "missing",
    "empty", "parser pending", "skipped", "parsed", "metadata",
]  # fmt: skip
PROBLEM_STATUSES = {"failed", "refused", "timeout", "unrecognised"}
#: rows of the coverage table on the page (problems first); the rest are counted by status
#: (the report stays small whatever the bundle holds: `collectors` has every row)
MAX_ROWS = 400
COLLECTOR_COLUMNS = [
    "file", "collector", "tool", "status", "bytes", "lines_total", "lines_parsed",
    "lines_structure", "lines_skipped", "parsed_pct", "skip_reasons", "notes",
    "stderr_tail", "exit_code", "manifest_status", "reason", "tables",
]  # fmt: skip


def coverage_context(store: Store) -> dict[str, Any]:
    """Collector rows (problems first), counts per status and line totals."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    rows = store.records("collectors", COLLECTOR_COLUMNS)
    rows.sort(key=lambda r: (rank.get(str(r["status"]), -1), str(r["file"] or "")))
    counts: dict[str, int] = {}
    parsed = skipped = 0
    for r in rows:
        counts[str(r["status"])] = counts.get(str(r["status"]), 0) + 1
        r["reasons"] = skip_reasons(r["skip_reasons"])
        parsed += int(r["lines_parsed"] or 0)
        skipped += int(r["lines_skipped"] or 0)
    problems = sum(n for s, n in counts.items() if s in PROBLEM_STATUSES)
    line = f"{counts.get('parsed', 0)} of {len(rows)} input files parsed fully"
    if counts.get("partial"):
        line += f", {counts['partial']} partially"
    if problems:
        line += f", {problems} failed or unreadable"
    if counts.get("missing"):
        line += f", {counts['missing']} collectors missing"
    line += f"; {parsed:,} lines parsed, {skipped:,} skipped (each with a reason)"
    hidden: dict[str, int] = {}
    for r in rows[MAX_ROWS:]:
        hidden[str(r["status"])] = hidden.get(str(r["status"]), 0) + 1
    more = ", ".join(f"{n:,} {s}" for s, n in hidden.items())
    return {"rows": rows[:MAX_ROWS], "counts": counts, "total": len(rows), "line": line,
            "lines_parsed": parsed, "lines_skipped": skipped,
            "more": f"{len(rows) - MAX_ROWS:,} more files not listed here ({more})" if more else ""}  # fmt: skip


def reproduce(
    store: Store, meta: dict[str, Any], incidents: list[Any], panels: list[Any]
) -> dict[str, Any]:
    """``hindsight query`` examples for the numbers on the page."""
    source = str(meta.get("source_path") or meta.get("name") or "bundle.tgz")
    bundle = shlex.quote(PurePosixPath(source).name or source)

    def cmd(sql: str) -> str:
        return f"hindsight query {bundle} {shlex.quote(sql)}"

    examples = [
        ("Incidents, ranked", cmd("SELECT rank, severity, title, start_ts, end_ts, gpu_seconds_lost FROM chains ORDER BY rank")),
        ("Every finding", cmd("SELECT finding_id, key, severity, start_ts, end_ts, summary FROM findings ORDER BY rank")),
        ("Detectors that could not run", cmd("SELECT detector, reason FROM detector_status WHERE status <> 'evaluated'")),
        ("Coverage of every input file", cmd("SELECT file, status, lines_parsed, lines_skipped, skip_reasons FROM collectors")),
        ("Host configuration facts", cmd("SELECT snapshot, key, value FROM host_config WHERE key LIKE 'vm.%'")),
    ]  # fmt: skip
    for inc in incidents[:5]:
        for f in inc.members[:1]:
            fid = f["finding_id"]
            examples.append(
                (
                    f"Evidence of finding {fid} ({f['key']})",
                    cmd(
                        f"SELECT signal, value, baseline, unit, note FROM finding_evidence WHERE finding_id = {int(fid)}"
                    ),
                )
            )
            if f["start_ts"] is not None and store.has("signals"):
                examples.append((f"The 1 s signals around finding {fid}", cmd(
                    f"SELECT * FROM signals WHERE epoch_ms(ts) BETWEEN {int(f['x0']) - 30000} AND {int(f['x1'] or f['x0']) + 30000} ORDER BY ts"
                )))  # fmt: skip
    charts = [(p.title, [cmd(" ".join(q.split())) for q in p.sql]) for p in panels if p.sql]
    return {"bundle": bundle, "examples": examples, "charts": charts}


def manifest_rows(meta: dict[str, Any], tf: Any) -> list[tuple[str, str]]:
    """The bundle row as (field, value) pairs for the appendix."""
    out = []
    for key, value in meta.items():
        if value is None or value == "":
            continue
        if key in ("start_utc", "end_utc", "analyzed_at"):
            value = tf.utc(value)
        out.append((key, str(value)))
    return out
