"""Text forms of a `DiffResult`: the Markdown ticket body (``--md``) and the terminal summary.

Renderers, like the diff page (`reports.diff_html`): `analyzer.diff` computes the result.

Strings that come from bundles (host names, finding titles, config values) are escaped
for Markdown tables (``|``, backticks, newlines, HTML brackets) so they cannot break the
table or inject markup; control characters are dropped.
"""

from __future__ import annotations

import re
from typing import Any

from analyzer.diff import DiffResult
from analyzer.names import UNSAFE

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|<>#])")


def md_escape(value: Any) -> str:
    """A value safe inside a Markdown table cell.

    >>> md_escape("a|b<script>`x`\\n")
    'a\\\\|b\\\\<script\\\\>\\\\`x\\\\` '
    """
    text = "" if value is None else str(value)
    text = UNSAFE.sub(" ", text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def fmt(v: Any, unit: str = "") -> str:
    """A value for a table cell: floats to 0 or 1 decimal, None as '–', ``unit`` after."""
    if v is None:
        return "–"
    s = str(v)
    if isinstance(v, float):
        s = f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}"
    return f"{s} {unit}".strip() if unit else s


def signal_rows(r: DiffResult, *, all_rows: bool = False) -> list[dict[str, Any]]:
    """Signals present on at least one side (all of them with ``all_rows``)."""
    return [s for s in r.stats if all_rows or s["before"]["n"] or s["after"]["n"]]


def markdown(r: DiffResult) -> str:
    """The Markdown document of ``r`` (``hindsight diff --md``)."""
    b, a = r.before, r.after
    lines = [
        "# Hindsight diff",
        "",
        f"**{md_escape(r.headline).replace(chr(92) + '`', '`')}**",
        "",
        f"- before: {md_escape(b.get('host'))} · {md_escape(b.get('name'))} · {b['seconds']} s from {fmt(b.get('t0'))}",
        f"- after: {md_escape(a.get('host'))} · {md_escape(a.get('name'))} · {a['seconds']} s from {fmt(a.get('t0'))}",
        f"- compared: the first {r.aligned_s} s of each capture (aligned by time since capture start)",
    ]
    lines += [f"- note: {md_escape(n)}" for n in r.notes]
    lines += ["", "## Signals (per-second values over the aligned span)", ""]
    lines += [
        "| signal | unit | p50 before → after | p95 before → after | p99 before → after | max before → after | σ before → after | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in signal_rows(r):
        sb, sa = s["before"], s["after"]
        cells = [f"{fmt(sb[k])} → {fmt(sa[k])}" for k in ("p50", "p95", "p99", "max", "std")]
        lines.append(
            f"| {s['label']} | {s['unit']} | " + " | ".join(cells) + f" | {s['verdict']} |"
        )
    for h in r.histograms:
        lines += [
            "",
            f"## {h['label'][:1].upper() + h['label'][1:]} histogram (µs, bucket upper bounds)",
            "",
        ]
        lines += ["| | events | p50 | p95 | p99 | max |", "|---|---|---|---|---|---|"]
        for side in ("before", "after"):
            d = h[side]
            if d is None:
                lines.append(f"| {side} | not captured | | | | |")
            else:
                lines.append(
                    f"| {side} | {d['total']} | {fmt(d['p50'])} | {fmt(d['p95'])} | {fmt(d['p99'])} | {fmt(d['max'])} |"
                )
    lines += ["", "## Findings", ""]
    if r.findings:
        lines += [
            "| finding | status | before (count, s) | after (count, s) |",
            "|---|---|---|---|",
        ]
        for f in r.findings:
            fb, fa = f["before"], f["after"]
            cb = f"{fb['count']}, {fmt(fb['duration_s'])}" if fb else "–"
            ca = f"{fa['count']}, {fmt(fa['duration_s'])}" if fa else "–"
            lines.append(
                f"| {md_escape(f['key'])} ({md_escape(f['noun'])}) | {f['status']} | {cb} | {ca} |"
            )
    else:
        lines.append("No findings on either side.")
    lines += ["", "## Host configuration changes", ""]
    changes = r.config.get("changes", [])
    if r.config.get("missing"):
        lines.append(
            "Not compared: host configuration missing " + " and ".join(r.config["missing"]) + "."
        )
    elif changes:
        lines += ["| group | setting | before | after | change |", "|---|---|---|---|---|"]
        for c in changes:
            change = c["direction"] or c["change"]
            lines.append(
                f"| {c['group']} | {md_escape(c['key'])} | {md_escape(c['before'])} | {md_escape(c['after'])} | {change} |"
            )
    else:
        lines.append(f"No change in the {r.config.get('compared', 0)} settings compared.")
    return "\n".join(lines) + "\n"


def summary(r: DiffResult) -> str:
    """A few lines for the terminal."""
    out = [r.headline]
    for s in signal_rows(r):
        if s["verdict"] in ("better", "worse"):
            sb, sa = s["before"], s["after"]
            out.append(
                f"  {s['verdict']:6s} {s['label']}: p50 {fmt(sb['p50'], s['unit'])} → {fmt(sa['p50'], s['unit'])}, "
                f"p95 {fmt(sb['p95'], s['unit'])} → {fmt(sa['p95'], s['unit'])}"
            )
    n = len(r.config.get("changes", []))
    if n:
        out.append(f"  {n} host setting(s) changed")
    return "\n".join(out) + "\n"
