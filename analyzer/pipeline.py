"""The whole analysis, stage by stage: open -> identify -> parse -> store -> render.

`run()` is the one entry point the CLI calls. It never lets one bad file stop the
analysis: a file that cannot be parsed becomes a `collectors` row with status ``failed``
and its reason. Only whole-bundle problems raise (`BundleError`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer import __version__
from analyzer.bundle import Bundle, Limits, open_bundle
from analyzer.errors import ParseError
from analyzer.manifest import Manifest, load_manifest
from analyzer.parsers import PARSERS
from analyzer.parsers.base import Coverage, ParseContext, ParseResult, remove_scratch
from analyzer.sniff import Identified, identify_all
from analyzer.store import Store

JSON_SCHEMA_VERSION = 1
STDERR_TAIL_LINES = 5


@dataclass
class Options:
    """What the user asked for. ``report``/``db``/``json_path`` None = not written
    (``db`` None keeps the database in memory)."""

    report: Path | None = None
    db: Path | None = None
    json_path: Path | None = None
    strict: bool = False
    limits: Limits = field(default_factory=Limits)
    debug: bool = False
    progress: Callable[[str], None] | None = None


@dataclass
class Result:
    """What an analysis produced, for the terminal summary and the JSON output."""

    bundle: dict[str, Any]
    collectors: list[dict[str, Any]]
    tables: dict[str, int]
    findings: list[dict[str, Any]]
    report: Path | None
    db: Path | None


def run(source: Path, options: Options) -> Result:
    """Analyse the bundle at ``source`` (archive or directory)."""
    say = options.progress or (lambda _msg: None)
    say("opening bundle")
    with open_bundle(source, limits=options.limits, strict=options.strict) as bundle:
        files = {f.rel: f for f in bundle.files}
        manifest = load_manifest(files["manifest.json"].path if "manifest.json" in files else None)
        say("identifying files")
        identified = identify_all(bundle.files, manifest)
        store = Store(options.db)
        try:
            rows, tables, metas = _parse_all(identified, manifest, store, options, say)
            rows += _refused_rows(bundle) + _missing_rows(manifest, files)
            bundle_row = _bundle_row(bundle, manifest, metas, store)
            store.write("bundle", _frame([bundle_row]), None)
            store.write("collectors", _frame(rows), None)
            findings: list[dict[str, Any]] = []
            if options.report is not None:
                say("rendering report")
                from reports.html import render_html

                render_html(store.con, options.report)
            result = Result(bundle_row, rows, tables, findings, options.report, options.db)
            if options.json_path is not None:
                write_json(result, options.json_path)
            return result
        finally:
            store.close()
            remove_scratch()


def _parse_all(
    identified: list[Identified],
    manifest: Manifest,
    store: Store,
    options: Options,
    say: Callable[[str], None],
) -> tuple[list[dict[str, Any]], dict[str, int], list[dict[str, object]]]:
    companions = {i.companion_of: [] for i in identified if i.companion_of}
    for i in identified:
        if i.companion_of:
            companions[i.companion_of].append(i)
    rows: list[dict[str, Any]] = []
    tables: dict[str, int] = {}
    metas: list[dict[str, object]] = []
    for item in identified:
        if item.companion_of:
            continue
        row = _base_row(item, manifest)
        _attach_companions(row, companions.pop(item.file.rel, []))
        if item.role == "data" and item.tool:
            say(f"parsing {item.file.rel} ({item.tool})")
            _parse_one(item, manifest, store, options, row, tables, metas)
        rows.append(row)
    for owner, orphans in companions.items():  # .err/.status whose output file is absent
        row = {"file": owner, "collector": _stem(owner), "status": "missing", "bytes": 0}
        row["reason"] = "no output file; only the collector's stderr/status was captured"
        entry = manifest.collector_for(owner)
        if entry:
            row |= {"collector": entry.name, "manifest_status": entry.status, "reason": entry.reason or row["reason"]}
        _attach_companions(row, orphans)
        rows.append(row)
    return rows, tables, metas


def _parse_one(
    item: Identified,
    manifest: Manifest,
    store: Store,
    options: Options,
    row: dict[str, Any],
    tables: dict[str, int],
    metas: list[dict[str, object]],
) -> None:
    module = PARSERS[item.tool]
    entry = manifest.collector_for(item.file.rel)
    ctx = ParseContext(
        file_name=item.file.rel.rsplit("/", 1)[-1],
        tz="UTC" if manifest.present else None,
        capture_start=manifest.start,
        capture_end=manifest.end,
        interval_s=manifest.interval_s,
        boot_time=manifest.boot_time,
        command=entry.command if entry else None,
        host=manifest.hostname,
        max_line_bytes=options.limits.max_line_bytes,
        max_lines=options.limits.max_lines,
    )
    try:
        result: ParseResult = module.parse(item.file.path, ctx)
        result.coverage.check()
        written = []
        for name, frame in result.tables.items():
            n = store.write(name, frame, item.file.rel)
            tables[name] = tables.get(name, 0) + n
            written.append(name)
    except ParseError as e:
        row |= {"status": "failed", "reason": str(e)}
        return
    except Exception as e:
        if options.debug:
            raise
        row |= {"status": "failed", "reason": f"internal error in the {item.tool} parser: {type(e).__name__}: {str(e)[:300]}"}
        return
    cov = result.coverage
    metas.append(dict(result.meta))
    row |= _coverage_fields(cov)
    row["tables"] = ",".join(written)
    if cov.total == 0:
        row["status"] = "empty"
    elif cov.parsed == 0:
        row["status"] = "failed" if cov.n_skipped else "empty"
        row.setdefault("reason", "no data line could be parsed")
    else:
        row["status"] = "partial" if cov.n_skipped else "parsed"


def _coverage_fields(cov: Coverage) -> dict[str, Any]:
    reasons = {f"structure: {k}": v for k, v in cov.structure.items()}
    reasons |= {f"skipped: {k}": v for k, v in cov.skipped.items()}
    return {
        "lines_total": cov.total,
        "lines_parsed": cov.parsed,
        "lines_structure": cov.n_structure,
        "lines_skipped": cov.n_skipped,
        "parsed_pct": cov.parsed_pct,
        "skip_reasons": json.dumps(reasons, sort_keys=True),
        "notes": "\n".join(cov.notes) or None,
    }


def _base_row(item: Identified, manifest: Manifest) -> dict[str, Any]:
    entry = manifest.collector_for(item.file.rel)
    status = {
        "manifest": "metadata",
        "capture_log": "metadata",
        "capture_state": "metadata",
        "unrecognised": "unrecognised",
        "pending": "parser pending",
    }.get(item.role, "empty" if item.file.size == 0 else "unrecognised")
    row: dict[str, Any] = {
        "file": item.file.rel,
        "collector": entry.name if entry else _stem(item.file.rel),
        "tool": item.tool,
        "status": status,
        "bytes": item.file.size,
        "reason": item.note or None,
    }
    if entry:
        row |= {"manifest_status": entry.status, "exit_code": entry.exit_code}
        if entry.reason:
            row["reason"] = entry.reason
    return row


def _attach_companions(row: dict[str, Any], companions: list[Identified]) -> None:
    for c in companions:
        try:
            text = c.file.path.read_bytes()[-8192:].decode("utf-8", "replace")
        except OSError:
            continue
        if c.role == "stderr" and text.strip():
            row["stderr_tail"] = "\n".join(text.strip().splitlines()[-STDERR_TAIL_LINES:])
        elif c.role == "status":
            for token in text.split():
                if token.startswith("rc=") and token[3:].lstrip("-").isdigit():
                    row["exit_code"] = int(token[3:])


def _refused_rows(bundle: Bundle) -> list[dict[str, Any]]:
    rows = [
        {"file": name, "collector": None, "status": "refused", "bytes": None, "reason": reason}
        for name, reason in bundle.refused
    ]
    if bundle.truncated:
        rows.append({"file": "*", "status": "refused", "reason": bundle.truncated})
    return rows


def _missing_rows(manifest: Manifest, files: dict[str, Any]) -> list[dict[str, Any]]:
    """Collectors the manifest lists whose output is not in the bundle."""
    rows = []
    for c in manifest.collectors:
        out = (c.output or "").lstrip("./")
        if out in files or (out and (out.rsplit(".", 1)[0] + ".err") in files):
            continue
        rows.append(
            {
                "file": out or None,
                "collector": c.name,
                "tool": c.tool,
                "status": c.status if c.status in ("missing", "skipped", "failed", "timeout") else "missing",
                "manifest_status": c.status,
                "exit_code": c.exit_code,
                "reason": c.reason or "listed in the manifest but not in the bundle",
            }
        )
    return rows


def _bundle_row(bundle: Bundle, manifest: Manifest, metas: list[dict[str, object]], store: Store) -> dict[str, Any]:
    def meta(key: str) -> Any:
        return next((m[key] for m in metas if m.get(key) not in (None, "")), None)

    start, end = manifest.start, manifest.end
    if start is None or end is None:
        seen = _time_span(store)
        start, end = start or seen[0], end or seen[1]
    return {
        "name": bundle.name,
        "source_path": str(bundle.source),
        "host": manifest.hostname or meta("host"),
        "kernel": manifest.kernel or meta("kernel"),
        "os": manifest.os,
        "arch": manifest.arch or meta("arch"),
        "cpus": manifest.cpus or meta("cpus"),
        "start_utc": start,
        "end_utc": end,
        "interval_s": manifest.interval_s,
        "timezone": manifest.timezone,
        "capture_version": manifest.capture_version,
        "format_version": manifest.format_version,
        "manifest_present": manifest.present,
        "interrupted": manifest.interrupted,
        "refused_members": len(bundle.refused),
        "notes": "\n".join(manifest.notes) or None,
        "analyzer_version": __version__,
        "analyzed_at": datetime.now(UTC),
    }


def _time_span(store: Store) -> tuple[datetime | None, datetime | None]:
    """Earliest and latest ``ts`` over all stored time-series tables."""
    parts = []
    for name in store.tables():
        cols = {r[0] for r in store.con.sql(f"DESCRIBE \"{name}\"").fetchall()}
        if "ts" in cols:
            parts.append(f'SELECT min(ts) AS lo, max(ts) AS hi FROM "{name}"')
    if not parts:
        return None, None
    lo, hi = store.con.sql(f"SELECT min(lo), max(hi) FROM ({' UNION ALL '.join(parts)})").fetchall()[0]
    return lo, hi


def _frame(rows: list[dict[str, Any]]):
    import polars as pl

    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def _stem(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    return name.split(".", 1)[0] or name


def write_json(result: Result, path: Path) -> None:
    """The machine-readable result (versioned; schema in docs/json-output.md)."""
    doc = {
        "schema_version": JSON_SCHEMA_VERSION,
        "analyzer_version": __version__,
        "bundle": result.bundle,
        "findings": result.findings,
        "collectors": result.collectors,
        "tables": result.tables,
    }
    text = json.dumps(doc, default=_json_default, indent=2, sort_keys=True)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
    else:
        path.write_text(text + "\n", encoding="utf-8")


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return str(value)
