"""Stage 3, *parse* (and store): every data file through its parser into the store.

`ParseStage` parses on ``PARSE_WORKERS`` threads (polars, numpy and DuckDB release the
GIL, so two files use both cores), the biggest file ready first (`analyzer.scheduler`),
and starts while the archive is still being read:
`offer` is called by the bundle reader for each member as soon as it is complete, and
once ``manifest.json`` has been seen (the capture writes it near the start of the
archive) each data file is identified and queued right away, so a 24 h bundle's
mpstat is parsed while its snapshots are still being decompressed. Files that came
before the manifest, and anything the final identification sees differently, are
queued by `finish`.

Order: files that write a common table (sar and sadf, iostat text and JSON...) are
parsed one after the other in archive order, each queued only once the previous one is
done, so every table receives its rows in the same order on every run whatever the
scheduling.

A file that cannot be parsed becomes a `collectors` row with status ``failed`` and its
reason; its rows already streamed to the store are removed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from analyzer.bundle import BundleFile
from analyzer.errors import LimitError, ParseError
from analyzer.manifest import Manifest, is_exit_code, load_manifest
from analyzer.parsers import PARSERS
from analyzer.parsers._read import line_bounds_violation
from analyzer.parsers.base import Coverage, ParseContext, ParseResult
from analyzer.scheduler import BiggestFirst
from analyzer.sniff import COMPANION_SUFFIXES, Identified, identify_all
from analyzer.store import Store

PARSE_WORKERS = 2  # files parsed at once (the reference machine has 2 cores)
PROGRESS_FILE_BYTES = 4_000_000  # files this big get their own progress line
STDERR_TAIL_LINES = 5
HISTORY_NOTE = (
    "history: the host's own sysstat daily file, converted there with sadf -j; "
    "its rows lie before the capture window"
)


@dataclass
class _Job:
    """One data file's parse: its `collectors` row, rows per table, parser metadata."""

    item: Identified
    row: dict[str, Any]
    counts: dict[str, int] = field(default_factory=dict)
    meta: list[dict[str, object]] = field(default_factory=list)
    future: Future | None = None


class ParseStage:
    """Parses the data files of one bundle into ``store``; see the module docstring."""

    def __init__(self, store: Callable[[], Store], options: Any, say: Callable[[str], None]):
        self._store_factory, self.options = store, options
        self._store: Store | None = None
        self._said = _Say(say)
        self._pool = BiggestFirst(PARSE_WORKERS, name="hindsight-parse")
        self._lock = threading.Lock()
        self._jobs: list[_Job] = []
        self._last: dict[str, Future] = {}  # table -> the last job writing it
        self._top: str | None = None  # the archive's top directory, as far as seen
        self._manifest: Manifest | None = None
        self._manifest_path: Path | None = None

    @property
    def store(self) -> Store:
        """The store, created on first use (a bundle that cannot be opened makes none)."""
        with self._lock:
            if self._store is None:
                self._store = self._store_factory()
            return self._store

    def offer(self, f: BundleFile) -> None:
        """A member just extracted (``rel`` as in the archive): queue it if it can go now."""
        if self._top is None:
            self._top = f.rel.split("/", 1)[0] + "/" if "/" in f.rel else ""
        if not f.rel.startswith(self._top):
            return  # no single top directory after all: `finish` sorts it out
        rel = f.rel[len(self._top) :]
        if rel == "manifest.json":
            self._manifest, self._manifest_path = load_manifest(f.path), f.path
        elif self._manifest is not None and PurePosixPath(rel).suffix not in COMPANION_SUFFIXES:
            item = identify_all([BundleFile(rel, f.path, f.size)], self._manifest)[0]
            if item.role == "data" and item.tool:
                self._submit(item, self._manifest)

    def manifest(self, path: Path | None) -> Manifest:
        """The bundle's manifest (at ``path``; None: there is none), read only once."""
        if path is not None and path == self._manifest_path and self._manifest is not None:
            return self._manifest
        return load_manifest(path)

    def early(self) -> dict[Path, Identified]:
        """Files identified while the archive was read, by path (for `identify_all`)."""
        return {j.item.file.path: j.item for j in self._jobs}

    def finish(
        self, identified: list[Identified], manifest: Manifest
    ) -> tuple[list[dict[str, Any]], dict[str, int], list[dict[str, object]]]:
        """Parse what is left, wait for everything; `collectors` rows in file order,
        rows per table, parser metadata."""
        started = {j.item.file.path: j for j in self._jobs}
        companions: dict[str, list[Identified]] = {}
        for i in identified:
            if i.companion_of:
                companions.setdefault(i.companion_of, []).append(i)
        rows: list[tuple[Identified, _Job | None]] = []
        for item in identified:
            if item.companion_of:
                continue
            job = started.get(item.file.path)
            if job is not None and (job.item != item or manifest is not self._manifest):
                self._redo(job)  # seen differently once the whole archive was read
                job = None
            if job is None and item.role == "data" and item.tool:
                job = self._submit(item, manifest)
            rows.append((item, job))
        errors = [j.future.exception() for j in self._jobs if j.future is not None]
        first = next((e for e in errors if e is not None), None)  # archive order: same error
        if first is not None:
            raise first
        out: list[dict[str, Any]] = []
        for item, job in rows:
            row = job.row if job is not None else _base_row(item, manifest)
            _attach_companions(row, companions.pop(item.file.rel, []))
            out.append(row)
        out += [_orphan_row(owner, orphans, manifest) for owner, orphans in companions.items()]
        tables: dict[str, int] = {}
        metas: list[dict[str, object]] = []
        for _item, job in rows:  # merged in file order: the same result every run
            if job is not None:
                for name, n in job.counts.items():
                    tables[name] = tables.get(name, 0) + n
                metas += job.meta
        return out, tables, metas

    def close(self) -> None:
        """Wait for the running parses, then close the store (also after an error)."""
        self._pool.shutdown(cancel=True)
        if self._store is not None:
            self._store.close()

    def _submit(self, item: Identified, manifest: Manifest) -> _Job:
        job = _Job(item, _base_row(item, manifest))
        tables = list(PARSERS[item.tool].TABLES)
        before = [self._last[t] for t in tables if t in self._last]
        job.future = self._pool.submit(lambda: self._run(job, manifest), item.file.size, before)
        for t in tables:
            self._last[t] = job.future
        self._jobs.append(job)
        return job

    def _redo(self, job: _Job) -> None:  # rare: a member outside the first one's directory
        """Drop an early parse whose file turned out to be named or seen otherwise."""
        wait([job.future])
        for name in job.counts:
            self.store.discard(name, job.item.file.rel)
        self._jobs.remove(job)

    def _run(self, job: _Job, manifest: Manifest) -> None:
        self._said.parsing(job.item)
        _parse_one(job.item, manifest, self.store, self.options, job.row, job.counts, job.meta)


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


def _parse_one(
    item: Identified,
    manifest: Manifest,
    store: Store,
    options: Any,
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
    _count_implausible(cov, store.dropped(item.file.rel))
    metas.append(dict(result.meta))
    row |= coverage_fields(cov)
    row["tables"] = ",".join(written)
    if is_history(item.file.rel, manifest):
        row["notes"] = "\n".join(n for n in (row.get("notes"), HISTORY_NOTE) if n)
    if cov.total == 0:
        row["status"] = "empty"
    elif cov.parsed == 0:
        row["status"] = "failed" if cov.n_skipped else "empty"
        row.setdefault("reason", "no data line could be parsed")
    else:
        row["status"] = "partial" if cov.n_skipped else "parsed"


def _count_implausible(cov: Coverage, dropped: dict[str, int]) -> None:
    """Rows the store refused for their stamp (`analyzer.store.TS_RANGE`) become skipped
    lines of their file (one row per data line; never more than were parsed)."""
    for name, n in sorted(dropped.items()):
        moved = min(n, cov.parsed)
        cov.parsed -= moved
        cov.add_skipped("timestamp outside 1970-01-01..2099-12-31 UTC", moved)
        cov.notes.append(f"{n} row(s) of {name} dropped: timestamp outside 1970–2099 UTC")


def is_history(rel: str, manifest: Manifest) -> bool:
    """A sysstat daily file the capture converted (``history/``, manifest ``history.files``)."""
    return rel.startswith("history/") or rel in manifest.history_files


def _discard(store: Store, written: list[str], rel: str, tables: dict[str, int]) -> None:
    """A parse that failed midway keeps none of the rows it had already streamed."""
    for name in written:
        tables[name] = tables.get(name, 0) - store.discard(name, rel)


def coverage_fields(cov: Coverage) -> dict[str, Any]:
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
        "collector": entry.name if entry else stem(item.file.rel),
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


def _orphan_row(owner: str, orphans: list[Identified], manifest: Manifest) -> dict[str, Any]:
    """An .err/.status whose output file is absent."""
    row = {"file": owner, "collector": stem(owner), "status": "missing", "bytes": 0}
    row["reason"] = "no output file; only the collector's stderr/status was captured"
    entry = manifest.collector_for(owner)
    if entry:
        row |= {
            "collector": entry.name,
            "manifest_status": entry.status,
            "reason": entry.reason or row["reason"],
        }
    _attach_companions(row, orphans)
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


def stem(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    return name.split(".", 1)[0] or name
