"""The short terminal summary printed at the end of `analyze`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from analyzer.pipeline import Result

_NOT_INPUT = {"metadata"}


def _fmt_time(t: Any) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(t, datetime) else "unknown"


def format_summary(result: Result) -> str:
    """Host, time span, findings, per-collector coverage and the report path."""
    b = result.bundle
    lines = [
        f"Hindsight {b.get('analyzer_version')} — {b.get('name')}",
        f"  host      {b.get('host') or 'unknown'}  kernel {b.get('kernel') or 'unknown'}",
        f"  span      {_fmt_time(b.get('start_utc'))} → {_fmt_time(b.get('end_utc'))}",
    ]
    if result.findings:
        lines.append(f"  findings  {len(result.findings)}")
        for f in result.findings[:10]:
            lines.append(f"    [{f.get('severity')}] {f.get('title')}")
    else:
        lines.append("  findings  none (no detector fired)")
    lines.append("  coverage")
    for r in result.collectors:
        if r.get("status") in _NOT_INPUT:
            continue
        pct = r.get("parsed_pct")
        pct_text = f"{pct:5.1f}%" if isinstance(pct, float) else "   — "
        parsed = r.get("lines_parsed")
        detail = f"{parsed} lines" if parsed is not None else (r.get("reason") or "")
        lines.append(
            f"    {str(r.get('file') or '-')[:38]:38} {r.get('tool') or '-'!s:12} "
            f"{r.get('status')!s:14} {pct_text}  {detail[:60]}"
        )
    if result.report is not None:
        lines.append(f"  report    {result.report}")
    if result.db is not None:
        lines.append(f"  database  {result.db}")
    return "\n".join(lines)
