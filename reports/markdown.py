"""The Markdown summary for a ticket body (``analyze --md FILE``).

Same facts as the HTML report (:mod:`reports.incidents`, :mod:`analyzer.audit`,
:mod:`reports.coverage`), cut to what a ticket needs: the verdict, ranked incidents with their
windows and impact, the top remediations, configuration deviations and one coverage line.
Bounded (:data:`MAX_CHARS`) so it fits any tracker's body limit.

Every string from the bundle is escaped for Markdown (:func:`md`): ``<``, ``>`` and ``&``
become entities and Markdown punctuation is backslash-escaped, so a hostile process name
can neither inject HTML nor links. Remediation text keeps its `code spans` (rendered
literally by every Markdown engine).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import duckdb

from analyzer.audit import run_audit
from reports.coverage import coverage_context
from reports.incidents import detector_status, load_findings, load_incidents, verdict
from reports.queries import Store
from reports.symptom_view import symptom_views
from reports.timefmt import TimeFormatter

MAX_INCIDENTS = 10
MAX_REMEDIATIONS = 6
MAX_DEVIATIONS = 6
MAX_CHARS = 12_000
MAX_SYMPTOM_WINDOWS = 8
MAX_SYMPTOM_CAUSES = 3
_PUNCT = re.compile(r"([\\`*_{}\[\]|~])")
_CODE = re.compile(r"`([^`\n]+)`")


def md(text: Any) -> str:
    """Escape a data string for Markdown (one line).

    >>> print(md("<img src=x onerror=alert(1)> *bold* [l](javascript:x) a|b"))
    &lt;img src=x onerror=alert(1)&gt; \\*bold\\* \\[l\\](javascript:x) a\\|b
    """
    s = re.sub(r"\s+", " ", str("" if text is None else text))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _PUNCT.sub(r"\\\1", s)


def md_code_spans(text: Any) -> str:
    """Like :func:`md` but `backtick spans` stay code spans (their content is literal)."""
    raw, out, last = re.sub(r"\s+", " ", str(text or "")).strip(), [], 0
    for m in _CODE.finditer(raw):
        out.append(md(raw[last : m.start()]))
        out.append("`" + m.group(1) + "`")
        last = m.end()
    out.append(md(raw[last:]))
    return "".join(out)


def render_markdown(
    con: duckdb.DuckDBPyConnection, *, role: str = "auto", report_name: str | None = None
) -> str:
    """The Markdown summary of the store behind ``con``."""
    store = Store(con)
    meta = store.bundle()
    tf = TimeFormatter(meta.get("timezone"))
    findings = load_findings(store, tf)
    incidents = load_incidents(store, findings, tf)
    detectors = detector_status(store)
    v = verdict(findings, incidents, detectors, store.has("findings"))
    lines = [f"## Hindsight: {md(meta.get('host') or 'unknown host')} — {md(v['text'])}", ""]
    facts = [f"capture {md(tf.window(meta.get('start_utc'), meta.get('end_utc')) or 'unknown')}"]
    if meta.get("kernel"):
        facts.append(f"kernel {md(meta['kernel'])}")
    if meta.get("name"):
        facts.append(f"bundle {md(meta['name'])}")
    lines += [" · ".join(facts), ""]
    lines += _symptom_lines(symptom_views(store, tf)[0])
    if incidents:
        lines += [
            "### Incidents (ranked)",
            "",
            "| # | severity | incident | window (UTC) | impact |",
            "|---|---|---|---|---|",
        ]
        for inc in incidents[:MAX_INCIDENTS]:
            impact = "; ".join(f"{n} {label}" for n, label in inc.impact[:3]) or "—"
            lines.append(
                f"| {inc.rank} | **{inc.severity.upper()}** | {md(inc.title)} | {md(inc.window)} | {md(impact)} |"
            )
        if len(incidents) > MAX_INCIDENTS:
            lines.append(
                f"\n…and {len(incidents) - MAX_INCIDENTS} more incidents in the full report."
            )
        lines.append("")
        for inc in incidents[:MAX_INCIDENTS]:
            keys: dict[str, int] = {}
            for f in inc.members:
                keys[str(f["key"] or f["kind"])] = keys.get(str(f["key"] or f["kind"]), 0) + 1
            found = ", ".join(
                f"`{k}`" + (f" ×{n}" if n > 1 else "")
                for k, n in keys.items()
                if _CODE.fullmatch(f"`{k}`")
            )
            lines.append(f"{inc.rank}. {md(inc.summary)} Findings: {found}.")
        lines.append("")
        fixes = _remediations(incidents)
        if fixes:
            lines += ["### Top remediations", ""]
            lines += [f"- **{md(key)}**: {md_code_spans(text)}" for key, text in fixes]
            lines.append("")
    audit = run_audit(store, role)
    deviations = [r for r in audit.rows if r["status"] == "deviation"]
    if deviations:
        lines += [f"### Configuration deviations ({audit.role} host)", ""]
        for r in deviations[:MAX_DEVIATIONS]:
            lines.append(
                f"- {md(r['setting'])}: {md(r['observed'])} (recommended {md(r['recommended'])}); fix: `{r['fix'].replace('`', '')}`"
            )
        lines.append("")
    cov = coverage_context(store)
    skipped = [d for d in detectors if d["status"] != "evaluated"]
    line = f"**Coverage:** {md(cov['line'])}."
    if detectors:
        line += f" Detectors: {len(detectors) - len(skipped)} of {len(detectors)} evaluated"
        if skipped:
            line += "; cannot conclude on " + ", ".join(
                f"{md(d['detector'])} ({md(d['reason'] or 'inputs missing')})" for d in skipped[:8]
            )
        line += "."
    else:
        line += " Detectors were not run: nothing can be concluded about incidents."
    lines += [line, ""]
    tail = (
        f"_Full report: {md(report_name)}"
        if report_name
        else "_Full report: the HTML file from `analyze`"
    )
    lines.append(tail + f" (Hindsight {md(meta.get('analyzer_version') or '')})._")
    text = "\n".join(lines) + "\n"
    if len(text) > MAX_CHARS:
        text = (
            text[: MAX_CHARS - 60].rsplit("\n", 1)[0] + "\n\n_(truncated; see the full report)_\n"
        )
    return text


def _symptom_lines(views: list[dict[str, Any]]) -> list[str]:
    """The ticket's lead when the bundle has an application symptom: what it did, its
    windows with their best explanation, and the ranked causes in words."""
    lines: list[str] = []
    for v in views:
        lines += ["### Symptom", "", f"**{md(v['headline'])}**", ""]
        for w in v["windows"][:MAX_SYMPTOM_WINDOWS]:
            top = w["top"]
            why = (
                f"{md(top['label'])}, leads by {w['top_lag']} s"
                if top
                else "no known mechanism explains it"
            )
            ratio = f" (×{w['ratio']:.1f})" if w["ratio"] is not None else ""
            lines.append(f"- {md(w['time'])}: {md(w['level_text'])}{ratio} — {why}")
        if len(v["windows"]) > MAX_SYMPTOM_WINDOWS:
            lines.append(f"- …and {len(v['windows']) - MAX_SYMPTOM_WINDOWS} more windows")
        if v["windows"]:
            lines.append("")
        for c in v["causes"][:MAX_SYMPTOM_CAUSES]:
            lines.append(
                f"{c['n']}. **{md(c['label'])}** (cause in {c['windows']} of {c['n_windows']} "
                f"windows): {md_code_spans(c['sentence'])}"
            )
        if v["causes"]:
            lines.append("")
    return lines


def _remediations(incidents: list[Any]) -> list[tuple[str, str]]:
    """The first remediation line of each finding key, most important incidents first."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for inc in incidents:
        for f in inc.members:
            key = str(f["key"] or f["kind"])
            if key in seen or not f["remediation_lines"]:
                continue
            seen.add(key)
            out.append((key, f["remediation_lines"][0]))
    return out[:MAX_REMEDIATIONS]


def write_markdown(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    *,
    role: str = "auto",
    report_name: str | None = None,
) -> None:
    """Write :func:`render_markdown` to ``path`` (``-`` = stdout)."""
    text = render_markdown(con, role=role, report_name=report_name)
    if str(path) == "-":
        sys.stdout.write(text)
    else:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
