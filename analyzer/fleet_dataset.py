"""The fleet dataset: many hosts' analysed tables as one Parquet dataset, partitioned by host.

Layout (hive, readable unchanged by DuckDB, pyarrow, Spark SQL and Trino; docs/scale.md)::

    DATASET/
      _hindsight_fleet.json           marker + per-host load record (below)
      <table>/host=<host>/part-0.parquet   one file per table per host (zstd)

Every table the single-bundle analysis makes is written (source tables, ``signals``,
``findings``...). ``host`` is the partition column (VARCHAR); it is *not* stored in the
files. The ``bundle`` table's own ``host`` column (the name as the manifest gave it) is
stored as ``reported_host``, since the partition value would otherwise shadow it.

``<host>`` comes from the manifest's hostname (else the bundle name), sanitised by
`partition_name`: characters outside ``A-Za-z0-9._-`` become ``_``, runs of dots collapse,
leading/trailing dots and dashes are dropped, 64 characters at most; a name already taken
gets ``-2``, ``-3``... So a partition value is never a path separator, ``.`` or ``..``.

``_hindsight_fleet.json``: ``{"format": "hindsight-fleet", "format_version": 1,
"analyzer_version", "hosts": [{"host", "reported_host", "bundle", "source", "status"
("ok" | "failed"), "error", "tables": {table: rows}, "findings", "seconds", "report"}]}``.
A bundle that cannot be analysed is listed with ``status: failed`` and its error; the
others still load.
"""

from __future__ import annotations

import glob
import json
import multiprocessing
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analyzer import __version__
from analyzer.cleanup import signal_handlers_installed
from analyzer.errors import HindsightError
from analyzer.query import EXPORT_MARKER, FLEET_MARKER, prepare_output_dir

ARCHIVE_SUFFIXES = (".tgz", ".tar.gz", ".tar")
PART_FILE = "part-0.parquet"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def partition_name(raw: str | None, fallback: str = "host") -> str:
    """A host name safe as a hive partition value and a path component.

    >>> partition_name("gpu01.example.com")
    'gpu01.example.com'
    >>> partition_name("../../etc/passwd")
    'etc_passwd'
    >>> partition_name("a/b=c d")
    'a_b_c_d'
    >>> partition_name("..", fallback="bundle-7")
    'bundle-7'
    """
    for candidate in (raw, fallback, "host"):
        s = _UNSAFE.sub("_", candidate or "")
        s = re.sub(r"\.{2,}", ".", s)
        s = re.sub(r"_{2,}", "_", s).strip("._-")[:64].strip("._-")
        if s:
            return s
    return "host"


def unique_names(names: list[str]) -> list[str]:
    """``names`` with ``-2``, ``-3``... appended to repeats (the capture's own rule)."""
    seen: set[str] = set()
    out = []
    for n in names:
        name, k = n, 2
        while name.lower() in seen:
            name = f"{n[:60]}-{k}"
            k += 1
        seen.add(name.lower())
        out.append(name)
    return out


def is_bundle_dir(path: Path) -> bool:
    """A directory that is one bundle (has a manifest, or holds no bundles of its own)."""
    if (path / "manifest.json").is_file():
        return True
    return not _child_bundles(path)


def _looks_like_bundle(path: Path) -> bool:
    """An archive by its name, or a directory holding a capture's manifest."""
    if path.is_symlink():
        return False
    if path.is_file():
        return path.name.lower().endswith(ARCHIVE_SUFFIXES)
    return path.is_dir() and (path / "manifest.json").is_file()


def _child_bundles(path: Path) -> list[Path]:
    try:
        children = sorted(path.iterdir())
    except OSError:
        return []
    return [c for c in children if _looks_like_bundle(c)]


def expand_inputs(items: list[str | Path]) -> list[Path]:
    """Bundles named by ``items``: archives, bundle directories, directories of bundles,
    or glob patterns (expanded here when the shell did not; a pattern picks archives and
    directories holding a ``manifest.json`` only, so a hand-made bundle directory must be
    named explicitly). Duplicates are dropped."""
    paths: list[Path] = []
    for item in items:
        p = Path(item)
        if not p.exists() and any(ch in str(item) for ch in "*?["):
            matches = sorted(Path(m) for m in glob.glob(str(item)))
            if not matches:
                raise HindsightError(f"{item}: no file matches")
            for m in matches:  # a pattern picks archives and capture directories only
                if _looks_like_bundle(m):
                    paths.append(m)
                elif m.is_dir() and not m.is_symlink():
                    paths += _child_bundles(m)
        elif not p.exists():
            raise HindsightError(f"{item}: no such file or directory")
        elif p.is_dir() and not is_bundle_dir(p):
            paths += _child_bundles(p)
        else:
            paths.append(p)
    seen: set[Path] = set()
    out = []
    for p in paths:
        key = p.resolve()
        if p.is_dir() and ((p / FLEET_MARKER).is_file() or (p / EXPORT_MARKER).is_file()):
            continue  # our own output (a dataset or an export), not a bundle
        if key not in seen:
            seen.add(key)
            out.append(p)
    if not out:
        raise HindsightError("no bundle given")
    return out


@dataclass
class HostLoad:
    """What loading one bundle gave (the marker file's ``hosts`` entries)."""

    index: int
    source: str
    bundle: str = ""
    reported_host: str | None = None
    host: str = ""
    status: str = "ok"
    error: str | None = None
    tables: dict[str, int] = field(default_factory=dict)
    findings: int = 0
    seconds: float = 0.0
    report: str | None = None
    report_error: str | None = None


#: writes one host's HTML report from its analysed store (the caller's renderer,
#: e.g. ``reports.html.render_html``: the analyzer never imports ``reports``)
HostReport = Callable[[Any, Path], object]


def _render(con: Any, path: Path, debug: bool, render: HostReport) -> tuple[str | None, str | None]:
    """The host's own HTML report; a rendering failure costs the report, not the host."""
    try:
        render(con, path)
    except Exception as e:
        if debug:
            raise
        return None, f"{type(e).__name__}: {str(e)[:300]}"
    return str(path), None


def _load_one(
    index: int, source: str, staging: str, report: HostReport | None, debug: bool
) -> HostLoad:
    """Analyse one bundle and write its tables to ``staging/<index>/`` (and its report
    with ``report``). Runs in a worker."""

    from analyzer.bundle import bundle_name
    from analyzer.pipeline import Options, run
    from analyzer.query import export_tables, stdout_to_stderr
    from analyzer.sql import connect_sealed

    t0 = time.monotonic()
    out = Path(staging) / str(index)
    out.mkdir(parents=True)
    load = HostLoad(index=index, source=source, bundle=bundle_name(Path(source)))
    db = out / "analysis.duckdb"
    try:
        with stdout_to_stderr():
            result = run(Path(source), Options(db=db, debug=debug))
        load.reported_host = result.bundle.get("host")
        load.findings = len(result.findings)
        con = connect_sealed(db)
        try:
            if report is not None:
                load.report, load.report_error = _render(con, out / "report.html", debug, report)
            load.tables = export_tables(
                con, out / "tables", file_name=PART_FILE, rename={"host": "reported_host"}
            )
        finally:
            con.close()
    except HindsightError as e:
        load.status, load.error = "failed", str(e)
    except Exception as e:
        if debug:
            raise
        load.status, load.error = "failed", f"internal error: {type(e).__name__}: {str(e)[:300]}"
    finally:
        db.unlink(missing_ok=True)
        Path(str(db) + ".wal").unlink(missing_ok=True)
    load.seconds = round(time.monotonic() - t0, 3)
    return load


def build_dataset(
    sources: list[Path],
    dataset: Path,
    *,
    jobs: int = 1,
    reports_dir: Path | None = None,
    render_report: HostReport | None = None,
    debug: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[HostLoad]:
    """Analyse every bundle (``jobs`` at a time) and write the dataset at ``dataset``;
    with ``reports_dir`` and ``render_report`` each host's report goes there too."""
    if reports_dir is not None and render_report is None:
        raise ValueError("reports_dir needs render_report (e.g. reports.html.render_html)")
    say = progress or (lambda _m: None)
    prepare_output_dir(dataset, FLEET_MARKER)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=dataset))
    try:
        args = [
            (i, str(s), str(staging), render_report if reports_dir is not None else None, debug)
            for i, s in enumerate(sources)
        ]
        loads: list[HostLoad] = []
        if jobs <= 1 or len(sources) == 1:
            for a in args:
                say(f"analysing {a[1]}")
                loads.append(_load_one(*a))
        else:
            ctx = multiprocessing.get_context("spawn")
            # Ctrl-C reaches the workers too: only the command answers it (analyzer.cleanup
            # stops them and removes their scratch space, all under its TMPDIR)
            quiet = {"initializer": signal.signal, "initargs": (signal.SIGINT, signal.SIG_IGN)}
            quiet = quiet if signal_handlers_installed() else {}
            workers = min(jobs, len(args))
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, **quiet) as pool:
                futures = [pool.submit(_load_one, *a) for a in args]
                for f in futures:
                    loads.append(f.result())
                    say(f"analysed {len(loads)}/{len(args)} bundles")
        _place(loads, staging, dataset, reports_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    write_marker(dataset, loads)
    return loads


def _place(loads: list[HostLoad], staging: Path, dataset: Path, reports_dir: Path | None) -> None:
    names = unique_names(
        [partition_name(x.reported_host, fallback=x.bundle or f"bundle-{x.index}") for x in loads]
    )
    if reports_dir is not None:
        reports_dir.mkdir(parents=True, exist_ok=True)
    for load, name in zip(loads, names, strict=True):
        load.host = name
        src = staging / str(load.index)
        if load.status == "ok":
            for table in load.tables:
                part = src / "tables" / table / PART_FILE
                if part.is_file():
                    target = dataset / table / f"host={name}"
                    target.mkdir(parents=True, exist_ok=True)
                    part.replace(target / PART_FILE)
        if load.report and reports_dir is not None and Path(load.report).is_file():
            final = reports_dir / f"{name}.report.html"
            shutil.move(load.report, final)
            load.report = str(final)
        else:
            load.report = None


def write_marker(dataset: Path, loads: list[HostLoad]) -> None:
    doc = {
        "format": "hindsight-fleet",
        "format_version": 1,
        "analyzer_version": __version__,
        "hosts": [asdict(x) for x in loads],
    }
    (dataset / FLEET_MARKER).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def read_marker(dataset: Path) -> list[HostLoad]:
    """The per-host load records of an existing dataset."""
    try:
        doc = json.loads((dataset / FLEET_MARKER).read_text(encoding="utf-8"))
        fields = set(HostLoad.__dataclass_fields__)
        return [HostLoad(**{k: v for k, v in h.items() if k in fields}) for h in doc["hosts"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HindsightError(f"{dataset}: unreadable {FLEET_MARKER}: {e}") from e


def row_counts(dataset: Path) -> dict[str, int]:
    """Rows per table of the dataset as `query` and `fleet` read it (for checks and docs)."""
    from analyzer.query import attach_fleet_views, tables
    from analyzer.sql import connect_sealed, ident

    con = connect_sealed(None)
    try:
        attach_fleet_views(con, dataset)
        return {
            name: int(con.sql(f"SELECT count(*) FROM {ident(name)}").fetchall()[0][0])
            for name in tables(con)
        }
    finally:
        con.close()
