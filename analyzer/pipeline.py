"""The whole analysis, stage by stage: open -> identify -> parse -> store -> render.

`run()` is the one entry point the CLI calls. It never lets one bad file stop the
analysis: a file that cannot be parsed becomes a `collectors` row with status ``failed``
and its reason. Only whole-bundle problems raise (`BundleError`).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer import __version__
from analyzer.bundle import Bundle, Limits, open_bundle
from analyzer.errors import HindsightError, LimitError, ParseError
from analyzer.manifest import Manifest, bundle_path, is_exit_code, load_manifest
from analyzer.parallel import run_groups
from analyzer.parsers import PARSERS
from analyzer.parsers.base import (
    Coverage,
    ParseContext,
    ParseResult,
    line_bounds_violation,
    remove_scratch,
)
from analyzer.sniff import Identified, identify_all
from analyzer.store import Store

JSON_SCHEMA_VERSION = 1
STDERR_TAIL_LINES = 5
PROGRESS_FILE_BYTES = 4_000_000  # files this big get their own progress line
PARSE_WORKERS = 2  # files parsed at once (the reference machine has 2 cores)


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
    markdown: Path | None = None  # --md: Markdown summary for a ticket ('-' = stdout)
    role: str = "auto"  # --role: training | inference | auto (configuration audit)


@dataclass
class Result:
    """What an analysis produced, for the terminal summary and the JSON output."""

    bundle: dict[str, Any]
    collectors: list[dict[str, Any]]
    tables: dict[str, int]
    findings: list[dict[str, Any]]
    report: Path | None
    db: Path | None
    chains: list[dict[str, Any]] = field(default_factory=list)
    detectors: list[dict[str, Any]] = field(default_factory=list)


def run(source: Path, options: Options) -> Result:
    """Analyse the bundle at ``source`` (archive or directory)."""
    say = options.progress or (lambda _msg: None)
    _check_outputs(options)
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
            say("analysing (signals, detectors, correlation)")
            from analyzer.analysis import analyse

            analysis = analyse(store, debug=options.debug)
            findings = analysis.finding_dicts()
            if options.report is not None:
                say("rendering report")
                from reports.html import render_html

                render_html(store.con, options.report, role=options.role)
            if options.markdown is not None:
                from reports.markdown import write_markdown

                name = options.report.name if options.report is not None else None
                write_markdown(store.con, options.markdown, role=options.role, report_name=name)
            result = Result(bundle_row, rows, tables, findings, options.report, options.db)
            result.chains, result.detectors = analysis.chain_dicts(), analysis.status
            if options.json_path is not None:
                write_json(result, options.json_path)
            return result
        finally:
            store.close()
            remove_scratch()


def _check_outputs(options: Options) -> None:
    """Fail before the work, with a clear message, when an output cannot be written."""
    outputs = {"report": options.report, "database": options.db, "JSON": options.json_path}
    outputs["Markdown"] = getattr(options, "markdown", None)
    for what, path in outputs.items():
        if path is None or str(path) == "-":
            continue
        parent = next((q for q in Path(path).absolute().parents if q.exists()), None)
        if Path(path).is_dir():
            raise HindsightError(f"cannot write the {what} to {path}: it is a directory")
        if parent is not None and not parent.is_dir():
            raise HindsightError(f"cannot write the {what} to {path}: {parent} is not a directory")


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
    jobs: list[tuple[Identified, dict[str, Any], dict[str, int], list[dict[str, object]]]] = []
    for item in identified:
        if item.companion_of:
            continue
        row = _base_row(item, manifest)
        _attach_companions(row, companions.pop(item.file.rel, []))
        if item.role == "data" and item.tool:
            jobs.append((item, row, {}, []))
        rows.append(row)
    said = _Say(say)
    groups = _groups([j[0] for j in jobs])

    def parse_group(group: list[int]) -> None:
        for k in group:
            item, row, counts, meta = jobs[k]
            said.parsing(item)
            _parse_one(item, manifest, store, options, row, counts, meta)

    run_groups(parse_group, groups, PARSE_WORKERS)
    tables: dict[str, int] = {}
    metas: list[dict[str, object]] = []
    for _item, _row, counts, meta in jobs:  # merged in file order: the same result every run
        for name, n in counts.items():
            tables[name] = tables.get(name, 0) + n
        metas += meta
    for owner, orphans in companions.items():  # .err/.status whose output file is absent
        row = {"file": owner, "collector": _stem(owner), "status": "missing", "bytes": 0}
        row["reason"] = "no output file; only the collector's stderr/status was captured"
        entry = manifest.collector_for(owner)
        if entry:
            row |= {
                "collector": entry.name,
                "manifest_status": entry.status,
                "reason": entry.reason or row["reason"],
            }
        _attach_companions(row, orphans)
        rows.append(row)
    return rows, tables, metas


class _Say:
    """Progress lines for the parse stage: big files get their own line, small ones one."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say, self.small_said, self.lock = say, False, threading.Lock()

    def parsing(self, item: Identified) -> None:
        with self.lock:
            if item.file.size >= PROGRESS_FILE_BYTES:
                self.say(f"parsing {item.file.rel} ({item.tool}, {item.file.size / 1e6:.0f} MB)")
            elif not self.small_said:
                self.small_said = True
                self.say("parsing small files")


def _groups(items: list[Identified]) -> list[list[int]]:
    """Indexes of ``items`` grouped so that no two groups write the same table.

    Each group is parsed in file order by one worker, so every table receives its rows
    in the same order on every run whatever the scheduling. Biggest groups first.
    """
    owner: dict[str, int] = {}  # table -> group id
    parent: list[int] = []

    def find(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for k, item in enumerate(items):
        parent.append(k)
        for table in PARSERS[item.tool].TABLES:
            if table in owner:
                parent[find(k)] = find(owner[table])
            else:
                owner[table] = k
    groups: dict[int, list[int]] = {}
    for k in range(len(items)):
        groups.setdefault(find(k), []).append(k)
    return sorted(groups.values(), key=lambda g: -sum(items[k].file.size for k in g))


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
    over = line_bounds_violation(item.file.path, ctx.max_line_bytes, ctx.max_lines)
    if over:  # docs/limits.md: the file is refused, the rest of the bundle goes on
        if options.strict:
            raise LimitError(f"{item.file.rel}: {over} (--strict)")
        row |= {"status": "refused", "reason": over}
        return
    written: list[str] = []

    def sink(name: str, frame: Any) -> None:  # big files stream their rows chunk by chunk
        n = store.append(name, frame, item.file.rel)
        tables[name] = tables.get(name, 0) + n
        if name not in written:
            written.append(name)

    ctx.sink = sink
    try:
        result: ParseResult = module.parse(item.file.path, ctx)
        result.coverage.check()
        for name, frame in result.tables.items():
            sink(name, frame)
        store.flush(item.file.rel)
    except ParseError as e:
        _discard(store, written, item.file.rel, tables)
        row |= {"status": "failed", "reason": str(e)}
        return
    except Exception as e:
        _discard(store, written, item.file.rel, tables)
        if options.debug:
            raise
        row |= {
            "status": "failed",
            "reason": f"internal error in the {item.tool} parser: {type(e).__name__}: {str(e)[:300]}",
        }
        return
    cov = result.coverage
    metas.append(dict(result.meta))
    row |= _coverage_fields(cov)
    row["tables"] = ",".join(written)
    if _is_history(item.file.rel, manifest):
        row["notes"] = "\n".join(n for n in (row.get("notes"), HISTORY_NOTE) if n)
    if cov.total == 0:
        row["status"] = "empty"
    elif cov.parsed == 0:
        row["status"] = "failed" if cov.n_skipped else "empty"
        row.setdefault("reason", "no data line could be parsed")
    else:
        row["status"] = "partial" if cov.n_skipped else "parsed"


def _discard(store: Store, written: list[str], rel: str, tables: dict[str, int]) -> None:
    """A parse that failed midway keeps none of the rows it had already streamed."""
    for name in written:
        tables[name] = tables.get(name, 0) - store.discard(name, rel)


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
            with open(c.file.path, "rb") as fh:  # only the tail: an .err file may be huge
                fh.seek(max(0, c.file.size - 8192))
                text = fh.read(8192).decode("utf-8", "replace")
        except OSError:
            continue
        if c.role == "stderr" and text.strip():
            row["stderr_tail"] = "\n".join(text.strip().splitlines()[-STDERR_TAIL_LINES:])
        elif c.role == "status":
            for token in text.split():
                digits = token[3:].removeprefix("-")  # ASCII only: int("²") raises
                if token.startswith("rc=") and digits.isascii() and digits.isdigit():
                    rc = int(token[3:])
                    row["exit_code"] = rc if is_exit_code(rc) else None


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
        out = bundle_path(c.output or "")
        if out in files or (out and (out.rsplit(".", 1)[0] + ".err") in files):
            continue
        rows.append(
            {
                "file": out or None,
                "collector": c.name,
                "tool": c.tool,
                "status": c.status
                if c.status in ("missing", "skipped", "failed", "timeout")
                else "missing",
                "manifest_status": c.status,
                "exit_code": c.exit_code,
                "reason": c.reason or "listed in the manifest but not in the bundle",
            }
        )
    return rows


def _bundle_row(
    bundle: Bundle, manifest: Manifest, metas: list[dict[str, object]], store: Store
) -> dict[str, Any]:
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
        "history_start_utc": _history_start(store, bundle, manifest),
        "trigger": manifest.trigger,
        "trigger_utc": manifest.trigger_time,
        "refused_members": len(bundle.refused),
        "notes": "\n".join(manifest.notes + _host_notes(manifest, metas)) or None,
        "analyzer_version": __version__,
        "analyzed_at": datetime.now(UTC),
    }


HISTORY_NOTE = (
    "history: the host's own sysstat daily file, converted there with sadf -j; "
    "its rows lie before the capture window"
)


def _is_history(rel: str, manifest: Manifest) -> bool:
    """A sysstat daily file the capture converted (``history/``, manifest ``history.files``)."""
    return rel.startswith("history/") or rel in manifest.history_files


def _history_start(store: Store, bundle: Bundle, manifest: Manifest) -> datetime | None:
    """Earliest ``ts`` of the rows that came from history files."""
    files = [f.rel for f in bundle.files if _is_history(f.rel, manifest)]
    if not files:
        return None
    names = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    parts = []
    for name in store.tables():
        cols = {r[0] for r in store.con.sql(f'DESCRIBE "{name}"').fetchall()}
        if {"ts", "source_file"} <= cols:
            parts.append(f'SELECT min(ts) AS lo FROM "{name}" WHERE source_file IN ({names})')
    if not parts:
        return None
    return store.con.sql(f"SELECT min(lo) FROM ({' UNION ALL '.join(parts)})").fetchall()[0][0]


def _host_notes(manifest: Manifest, metas: list[dict[str, object]]) -> list[str]:
    """A bundle whose files name more than one host (mixed up by hand) says so."""
    hosts = {str(m["host"]) for m in metas if m.get("host") not in (None, "")}
    hosts |= {manifest.hostname} if manifest.hostname else set()
    if len(hosts) < 2:
        return []
    names = ", ".join(sorted(hosts)[:5])
    return [
        f"files name {len(hosts)} different hosts ({names}): their rows are mixed in the tables"
    ]


def _time_span(store: Store) -> tuple[datetime | None, datetime | None]:
    """Earliest and latest ``ts`` over all stored time-series tables."""
    parts = []
    for name in store.tables():
        cols = {r[0] for r in store.con.sql(f'DESCRIBE "{name}"').fetchall()}
        if "ts" in cols:
            parts.append(f'SELECT min(ts) AS lo, max(ts) AS hi FROM "{name}"')
    if not parts:
        return None, None
    lo, hi = store.con.sql(
        f"SELECT min(lo), max(hi) FROM ({' UNION ALL '.join(parts)})"
    ).fetchall()[0]
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
        "chains": result.chains,
        "detectors": result.detectors,
        "detectors_not_evaluated": [
            d for d in result.detectors if d.get("status") == "not evaluated"
        ],
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
