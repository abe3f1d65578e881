"""The short terminal summary printed at the end of `analyze`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from analyzer.pipeline import Result
from analyzer.symptoms.digest import summary_lines

_NOT_INPUT = {"metadata"}


def _fmt_time(t: Any) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(t, datetime) else "unknown"


_RANK = {"critical": 0, "major": 1, "minor": 2, "info": 3}
#: findings listed before "… and N more"
MAX_FINDINGS = 10


def _ordered(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Most severe first, then the most GPU time lost, then the earliest."""
    return sorted(
        findings,
        key=lambda f: (
            _RANK.get(str(f.get("severity")), 4),
            -(f.get("gpu_seconds_lost") or 0.0),
            str(f.get("start") or ""),
        ),
    )


def _problem(r: dict[str, Any]) -> bool:
    """A coverage row worth a line: not fully parsed (skipped lines, failed, refused,
    unrecognised, missing collectors...)."""
    return not (r.get("status") == "parsed" and r.get("parsed_pct") in (None, 100.0))


def format_summary(result: Result, verbose: bool = False) -> str:
    """Host, time span, findings (most severe first), the coverage's problems (every file
    with ``verbose``) and the report path."""
    b = result.bundle
    lines = [
        f"Hindsight {b.get('analyzer_version')} — {b.get('name')}",
        f"  host      {b.get('host') or 'unknown'}  kernel {b.get('kernel') or 'unknown'}",
        f"  span      {_fmt_time(b.get('start_utc'))} → {_fmt_time(b.get('end_utc'))}",
    ]
    lines += summary_lines(result.symptoms)  # the application's symptom first (issue #18)
    if result.findings:
        lines.append(f"  findings  {len(result.findings)}")
        ordered = _ordered(result.findings)
        for f in ordered[:MAX_FINDINGS]:
            lines.append(f"    [{f.get('severity')}] {f.get('title')}")
        if len(ordered) > MAX_FINDINGS:
            lines.append(f"    … and {len(ordered) - MAX_FINDINGS} more (in the report)")
    else:
        lines.append("  findings  none (no detector fired)")
    rows = [r for r in result.collectors if r.get("status") not in _NOT_INPUT]
    shown = rows if verbose else [r for r in rows if _problem(r)]
    full = sum(1 for r in rows if not _problem(r))
    head = f"  coverage  {full} of {len(rows)} inputs parsed fully"
    if not verbose:
        head += f"; {len(shown)} with something to say" if shown else "; nothing skipped"
        head += " (--verbose: every file)"
    lines.append(head)
    for r in shown:
        pct = r.get("parsed_pct")
        pct_text = f"{pct:5.1f}%" if isinstance(pct, float) else "   — "
        parsed = r.get("lines_parsed")
        detail = f"{parsed} lines" if parsed is not None else (r.get("reason") or "")
        if parsed is not None and r.get("reason") and _problem(r):
            detail += f"; {r.get('reason')}"
        lines.append(
            f"    {str(r.get('file') or r.get('collector') or '-')[:38]:38} {r.get('tool') or '-'!s:12} "
            f"{r.get('status')!s:14} {pct_text}  {detail[:70]}"
        )
    if result.report is not None:
        lines.append(f"  report    {result.report}")
    if result.db is not None:
        lines.append(f"  database  {result.db}")
    return "\n".join(lines)
