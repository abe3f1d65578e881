"""Text forms of a `DiffResult`: the Markdown ticket body (``--md``) and the terminal summary.

Renderers, like the diff page (`reports.diff_html`): `analyzer.diff` computes the result.
When both captures have an application symptom (`analyzer.diff_symptom`), the Markdown
starts with a "Symptom" section (its P50/P99/mean before → after, the causes gone or new,
the configuration changes of their mechanisms) followed by the host configuration
changes; `symptom_view` prepares what both the page and the Markdown show.

Strings that come from bundles (host names, finding titles, config values) are escaped
for Markdown tables (``|``, backticks, newlines, HTML brackets) so they cannot break the
table or inject markup; control characters are dropped.
"""

from __future__ import annotations

import re
from typing import Any

from analyzer.diff import DiffResult
from analyzer.diff_symptom import mechanism_words
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


SYMPTOM_STATS = ("p50", "p99", "mean")


def _signed_pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.0f} %".replace("-", "−")


def symptom_view(r: DiffResult) -> list[dict[str, Any]]:
    """The matched symptoms, the headline's first: per symptom its title, the table rows
    (side, seconds, p50, p99, mean, windows), the change in %, its explanations and the
    configuration changes of their mechanisms (change rows of ``r.config``). [] when
    there is no pair."""
    sym = r.symptoms or {}
    matched = sym.get("matched") or []
    lead = sym.get("lead")
    order = sorted(range(len(matched)), key=lambda i: (i != lead, i))
    by_key = {c["key"]: c for c in r.config.get("changes", [])}
    out = []
    for i in order:
        m = matched[i]
        related = [
            {"group": rel["mechanism_group"], "words": mechanism_words(rel["mechanism_group"]),
             "changes": [by_key[k] for k in rel["keys"] if k in by_key]}
            for rel in m["related_config"]
        ]  # fmt: skip
        out.append(
            {"index": i, "m": m, "lead": i == lead, "title": m["label"], "unit": m["unit"] or "",
             "rows": [(side, m[side]) for side in ("before", "after")],
             "change": {k: _signed_pct(m["change_pct"].get(k)) for k in SYMPTOM_STATS},
             "explanations": m["explanations"], "related": related}
        )  # fmt: skip
    return out


def _symptom_markdown(r: DiffResult) -> list[str]:
    views = symptom_view(r)
    sym = r.symptoms or {}
    if not views and not (sym.get("only_before") or sym.get("only_after")):
        return []
    lines = ["", "## Symptom (per-second values over the aligned span)", ""]
    for v in views:
        m = v["m"]
        worse = "higher is worse" if m["worse"] != "down" else "lower is worse"
        lines += [
            f"### {md_escape(v['title'])} ({md_escape(v['unit']) or 'no unit'}, {worse}): {m['verdict']}",
            "",
            "| | seconds | p50 | p99 | mean | symptom windows |",
            "|---|---|---|---|---|---|",
        ]
        for side, d in v["rows"]:
            lines.append(
                f"| {side} | {d['n']} | {fmt(d['p50'])} | {fmt(d['p99'])} | {fmt(d['mean'])} | {d['windows']} |"
            )
        c = v["change"]
        lines.append(f"| change | | {c['p50']} | {c['p99']} | {c['mean']} | |")
        srcs = f"{md_escape(m['before']['source'])} → {md_escape(m['after']['source'])}"
        lines += [
            "",
            f"Matched by family, labels and stat ({md_escape(m['match'])}); sources: {srcs}.",
        ]
        if v["explanations"]:
            lines += [
                "",
                "| mechanism | candidate | windows explained before → after | status |",
                "|---|---|---|---|",
            ]
            for e in v["explanations"]:
                mech = f"{md_escape(e['mechanism_group'])} ({md_escape(mechanism_words(e['mechanism_group']))})"
                lines.append(
                    f"| {mech} | {md_escape(e['candidate'])} ({e['candidate_type']}) | "
                    f"{e['before_windows']} → {e['after_windows']} | {e['status']} |"
                )
        else:
            lines += ["", "No cause was found on either side."]
        for rel in v["related"]:
            if not rel["changes"]:
                lines += [
                    "",
                    f"No configuration change of {md_escape(rel['words'])} ({md_escape(rel['group'])}).",
                ]
                continue
            lines += [
                "",
                f"Configuration changes of {md_escape(rel['words'])} ({md_escape(rel['group'])}):",
            ]
            for ch in rel["changes"][:8]:
                lines.append(
                    f"- {md_escape(ch['key'])}: {md_escape(ch['before']) or '–'} → {md_escape(ch['after']) or '–'} ({ch['direction'] or ch['change']})"
                )
            if len(rel["changes"]) > 8:
                lines.append(f"- and {len(rel['changes']) - 8} more (all below)")
        lines.append("")
    for side in ("before", "after"):
        for u in sym.get(f"only_{side}") or []:
            lines.append(f"- only {side} (not compared): {md_escape(u['name'])}")
    return lines[:-1] if lines[-1] == "" else lines


def _config_markdown(r: DiffResult) -> list[str]:
    lines = ["", "## Host configuration changes", ""]
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
    return lines


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
    symptom = _symptom_markdown(r)
    if symptom:  # the symptom first, the configuration changes right under it
        lines += symptom + _config_markdown(r)
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
    if not symptom:
        lines += _config_markdown(r)
    return "\n".join(lines) + "\n"


def summary(r: DiffResult) -> str:
    """A few lines for the terminal."""
    out = [r.headline]
    for v in symptom_view(r):
        m, u = v["m"], v["unit"]
        if m["is_primary"]:
            b, a = m["before"], m["after"]
            out.append(
                f"  {m['verdict']:6s} {v['title']}: p50 {fmt(b['p50'], u)} → {fmt(a['p50'], u)}, "
                f"p99 {fmt(b['p99'], u)} → {fmt(a['p99'], u)} (per-second values)"
            )
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
