"""The whole analysis, stage by stage: open -> identify -> parse -> store -> render.

`run()` is the one entry point the CLI calls. It never lets one bad file stop the
analysis: a file that cannot be parsed becomes a `collectors` row with status ``failed``
and its reason (`analyzer.parse_stage`). Only whole-bundle problems raise (`BundleError`).

The report and the Markdown summary are rendered by the `Renderers` the caller passes
(the CLI: ``reports.render.HOST``) while the analysed store is open: the analyzer never
imports ``reports`` (layers point one way).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from analyzer import __version__
from analyzer.bundle import Bundle, Limits, open_bundle
from analyzer.errors import BundleError
from analyzer.malloc_tune import keep_big_blocks
from analyzer.manifest import Manifest, bundle_path
from analyzer.names import display_name, fs_text
from analyzer.outputs import Outputs, emit, print_to, write_text
from analyzer.parse_stage import ParseStage, is_history
from analyzer.parsers._read import remove_scratch
from analyzer.sniff import identify_all
from analyzer.sql import ident, seal
from analyzer.store import Store
from analyzer.symptoms import app_series
from analyzer.symptoms.digest import symptom_dicts

JSON_SCHEMA_VERSION = 1


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
    force: bool = False  # --force: --db may replace a file Hindsight did not write
    inputs: list[Path] = field(default_factory=list)  # more inputs no output may overwrite
    app_series: list[Path] = field(default_factory=list)  # --app-series (analyzer/symptoms)
    tz: str | None = None  # --tz: the zone of --app-series times written without one


#: renders one document from the analysed store: ``(con, options) -> text``
Renderer = Callable[[duckdb.DuckDBPyConnection, Options], str]


@dataclass(frozen=True)
class Renderers:
    """How the documents the options ask for are rendered, supplied by the caller (the
    analyzer never imports ``reports``): ``report`` the HTML report (``Options.report``),
    ``markdown`` the ticket summary (``Options.markdown``)."""

    report: Renderer | None = None
    markdown: Renderer | None = None


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
    symptoms: list[dict[str, Any]] = field(default_factory=list)  # analyzer.symptoms.digest


def run(source: Path, options: Options, renderers: Renderers | None = None) -> Result:
    """Analyse the bundle at ``source`` (archive or directory).

    Every output is claimed first and written at a temporary name; all are renamed into
    place together once the analysis succeeded (`analyzer.outputs`). ``renderers`` must
    render each document the options ask for (a ValueError before any work otherwise).
    """
    renderers = renderers or Renderers()
    if options.report is not None and renderers.report is None:
        raise ValueError("Options.report needs Renderers.report (reports.render.HOST)")
    if options.markdown is not None and renderers.markdown is None:
        raise ValueError("Options.markdown needs Renderers.markdown (reports.render.HOST)")
    with Outputs([source, *options.inputs, *options.app_series], force=options.force) as out:
        temp = _claim_outputs(out, options)
        result, texts = _analyse(source, options, renderers, temp, out.own_files())
        out.commit()
    for text in texts:  # '-': stdout gets only the document, once everything is in place
        print_to(sys.stdout, text)
    return result


def _require_tool_output(source: Path, identified: list, has_manifest: bool) -> None:
    """A bundle without a manifest in which no file is any tool's output is not input the
    analyzer can use (exit 2), not an empty report of an unknown host."""
    if has_manifest or any(i.role in ("data", "pending") for i in identified):
        return
    names = [display_name(i.file.rel) for i in identified]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise BundleError(
        f"{fs_text(source.name)}: no tool output recognised (no manifest.json; found {shown or 'no file'}); "
        "a bundle holds the capture's files (capture/hindsight-capture.sh) or tool outputs "
        "such as vmstat, iostat -x, mpstat, sar, dmesg"
    )


def _claim_outputs(out: Outputs, options: Options) -> dict[str, Path | None]:
    """Fail before the work, with a clear message, when an output cannot be written;
    the temporary path of each output (None: not written, or stdout)."""
    return {
        "database": out.add(options.db, "database", database=True),
        "report": out.add(options.report, "report"),
        "JSON": out.add(options.json_path, "JSON"),
        "Markdown": out.add(options.markdown, "Markdown"),
    }


def _analyse(
    source: Path,
    options: Options,
    renderers: Renderers,
    temp: dict[str, Path | None],
    own: set[Path],
) -> tuple[Result, list[str]]:
    """The analysis, its files written at their ``temp`` paths; the text for stdout.
    ``own``: our lock and temporary files, not part of a bundle directory they lie in."""
    say = options.progress or (lambda _msg: None)
    keep_big_blocks()  # parsers free and reallocate 8-16 MiB blocks per chunk
    series = [app_series.read(p, options.tz) for p in options.app_series]  # fail early
    say("opening bundle")
    stage = ParseStage(lambda: Store(temp["database"]), options, say)
    stdout: list[str] = []
    try:
        # data files are parsed while the rest of the archive is read (parse_stage.py)
        with open_bundle(
            source, limits=options.limits, strict=options.strict, on_file=stage.offer
        ) as bundle:
            if bundle.workdir is None and own:  # a directory: outputs may be inside it
                bundle.files = [f for f in bundle.files if f.path.resolve() not in own]
            files = {f.rel: f for f in bundle.files}
            manifest = stage.manifest(
                files["manifest.json"].path if "manifest.json" in files else None
            )
            say("identifying files")
            identified = identify_all(bundle.files, manifest, stage.early())
            _require_tool_output(source, identified, "manifest.json" in files)
            rows, tables, metas = stage.finish(identified, manifest)
            store = stage.store
            rows += _refused_rows(bundle) + _missing_rows(manifest, files)
            bundle_row = _bundle_row(bundle, manifest, metas, store)
            rows += [_app_series_row(store, s, tables) for s in series]  # not the bundle's span
            store.write("bundle", _frame([bundle_row]), None)
            store.write("collectors", _frame(rows), None)
            seal(store.con)  # from here on no SQL can touch the file system (docs/security.md)
            say("analysing (signals, detectors, correlation)")
            from analyzer.analysis import analyse

            analysis = analyse(store, debug=options.debug)
            bundle_row |= analysis.bundle_changes  # e.g. the data's span won (signals.py)
            findings = analysis.finding_dicts()
            if options.report is not None and renderers.report is not None:
                say("rendering report")
                emit(temp["report"], renderers.report(store.con, options), stdout)
            if options.markdown is not None and renderers.markdown is not None:
                emit(temp["Markdown"], renderers.markdown(store.con, options), stdout)
            result = Result(bundle_row, rows, tables, findings, options.report, options.db)
            result.chains, result.detectors = analysis.chain_dicts(), analysis.status
            result.symptoms = symptom_dicts(store.con)
            if options.json_path is not None:
                emit(temp["JSON"], json_text(result), stdout)
    finally:
        stage.close()
        remove_scratch()
    return result, stdout


def _app_series_row(
    store: Store, s: app_series.AppSeries, tables: dict[str, int]
) -> dict[str, Any]:
    """Store one --app-series file's rows; its ``collectors`` row."""
    if s.frame.height:
        tables["app_series"] = tables.get("app_series", 0) + store.write(
            "app_series", s.frame, None
        )
    return app_series.collectors_row(s)


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
        "source_path": fs_text(bundle.source),
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


def _history_start(store: Store, bundle: Bundle, manifest: Manifest) -> datetime | None:
    """Earliest ``ts`` of the rows that came from history files."""
    files = [f.rel for f in bundle.files if is_history(f.rel, manifest)]
    parts = [
        f"SELECT min(ts) AS lo FROM {ident(name)} WHERE list_contains($files, source_file)"
        for name in _tables_with(store, "ts", "source_file")
    ]
    if not files or not parts:
        return None
    union = " UNION ALL ".join(parts)
    return store.con.sql(f"SELECT min(lo) FROM ({union})", params={"files": files}).fetchall()[0][0]


def _tables_with(store: Store, *columns: str) -> list[str]:
    """The store's tables that have every one of ``columns``."""
    rows = store.con.sql(
        "SELECT table_name FROM duckdb_columns() WHERE schema_name = 'main' "
        "AND list_contains($cols, column_name) GROUP BY table_name "
        "HAVING count(DISTINCT column_name) = len($cols) ORDER BY table_name",
        params={"cols": list(columns)},
    ).fetchall()
    return [str(r[0]) for r in rows if r[0] in set(store.tables())]


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
    parts = [
        f"SELECT min(ts) AS lo, max(ts) AS hi FROM {ident(name)}"
        for name in _tables_with(store, "ts")
    ]
    if not parts:
        return None, None
    union = " UNION ALL ".join(parts)
    lo, hi = store.con.sql(f"SELECT min(lo), max(hi) FROM ({union})").fetchall()[0]
    return lo, hi


def _frame(rows: list[dict[str, Any]]):
    import polars as pl

    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def write_json(result: Result, path: Path) -> None:
    """Write `json_text` to ``path`` atomically (``-``: stdout)."""
    if str(path) == "-":
        print_to(sys.stdout, json_text(result))
    else:
        write_text(path, json_text(result), "JSON")


def json_text(result: Result) -> str:
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
        "symptoms": result.symptoms,
    }
    return json.dumps(doc, default=_json_default, indent=2, sort_keys=True) + "\n"


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return str(value)
