"""Digests of every table the parse stage stores, to prove a parser rewrite changes nothing.

Issue #17 rewrites ``analyzer/parsers/`` as one engine; its acceptance asks that on every
fixture, sample and the benchmark's 1 h and 24 h bundles the tables, row order, types,
values and coverage stay identical. ``before.json`` (beside this file) records them as
they were before the rewrite::

    python -m tests.parsers_digest.digest --write     # (re)record before.json
    python -m tests.parsers_digest.digest --check     # recompute; print every difference, exit 1
    python -m tests.parsers_digest.digest --check --only fixtures samples   # no bench bundles

Inputs (keys of ``inputs`` in before.json):

- ``fixtures/<path>``: every file under tests/fixtures that the sniffer gives to a parser
  (`analyzer.sniff.identify_all`, as for a file of a bundle without manifest), parsed as a
  one-file bundle directory; the files no parser takes are listed in ``not_parsed`` with
  the sniffer's verdict, so a file that starts or stops being taken is a difference too;
- ``samples/<path>``: every ``*.tgz`` under samples/ (the demos and samples/real);
- ``bench/<name>``: the benchmark's bundles (`tests.benchmarks.bundles`: ``hindsight synth``
  with the benchmark's shape, length and seed), generated into a temporary directory (or
  ``--cache DIR``) from the parameters recorded in before.json's ``bench`` section.

Each input goes through the pipeline's own stages (`analyzer.pipeline`: open the bundle,
identify, `analyzer.parse_stage.ParseStage`, the store's ``bundle`` and ``collectors``
rows) into a DuckDB `analyzer.store.Store` (in memory; a file for the bench bundles); the
analysis after the parse stage (signals, detectors) is not run. Then every table of the
store is read back and digested: row count, columns (name and DuckDB type, in order), a
SHA-256 per column over its values in stored order (the null mask; the exact bits of
numbers and timestamps, little-endian; the byte length and UTF-8 bytes of each string), and
one SHA-256 over all of that. Coverage is the ``collectors`` table (the parse stage's
account of every file: status, lines parsed / structure / skipped with the reasons,
notes), also kept as readable fields per file so a difference says what changed.

Left out because they change from run to run, not with the parsers (see `VOLATILE`):
``bundle.analyzed_at`` (the time of the run), ``bundle.source_path`` (temporary
directories, the checkout's path) and ``bundle.analyzer_version`` (the package version).
``collectors.tables`` is compared as a set (`SORTED_LISTS`: one parser writes its tables
in a varying order). Everything else is deterministic: two ``--write`` runs give the same
before.json (also with another ``--jobs``: each fixture is parsed on its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BEFORE = Path(__file__).resolve().parent / "before.json"
FIXTURES = ROOT / "tests" / "fixtures"
SAMPLES = ROOT / "samples"
CLASSES = ("fixtures", "samples", "bench")
FORMAT = 1

#: Columns that differ between two runs on the same input whatever the parsers do:
#: the time of the run, the input's path (temporary directories, the checkout's
#: location) and the package version. Left out of the digests.
VOLATILE: dict[str, tuple[str, ...]] = {
    "bundle": ("analyzed_at", "source_path", "analyzer_version"),
}

#: Comma-separated lists compared as sets (sorted). ``collectors.tables`` lists a file's
#: tables in the order they were first written, and for ``sadf -p`` that order changes
#: from run to run (analyzer/parsers/sadf.py builds the tables in the order of
#: ``data["table"].unique()``, which polars does not keep stable); the tables' rows
#: themselves do not change.
SORTED_LISTS: dict[str, tuple[str, ...]] = {"collectors": ("tables",)}

#: The benchmark's bundles digested: (shape, size) as in `tests.benchmarks.bundles` (its full
#: table: `python -m tests.benchmarks.run --size 1h 24h --shape small big`).
BENCH = (("big", "1h"), ("big", "24h"), ("small", "1h"), ("small", "24h"))
#: The seed `tests.benchmarks.bundles.bundle` passes to `analyzer.synth.Spec`.
BENCH_SEED = 7

#: ``collectors`` columns kept readable per file (all of them are in its digest too).
COVERAGE_FIELDS = (
    "tool",
    "status",
    "lines_total",
    "lines_parsed",
    "lines_structure",
    "lines_skipped",
    "skip_reasons",
    "tables",
    "reason",
    "notes",
)
#: hex digits of each column's digest kept in before.json: they only say which column
#: changed; the proof is the table's SHA-256 (over the full column digests), kept whole
SHORT = 8
SCHEMA_ID = 8  # hex digits of a schema's id in before.json
BATCH_ROWS = 1 << 20
#: tables kept without per-column digests in before.json: ``collectors`` is also kept
#: readable per file (``coverage``), which says more than a column's digest
NO_COLUMN_DIGESTS = ("collectors",)


# --------------------------------------------------------------------------- digests


def digest_table(con: Any, name: str) -> dict[str, Any]:
    """Row count, columns and value digests of table ``name``, read in stored order."""
    from analyzer.sql import ident

    cols = [
        (str(c), str(t))
        for c, t in con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND table_name = ? ORDER BY column_index",
            [name],
        ).fetchall()
        if c not in VOLATILE.get(name, ())
    ]
    hashers = [_ColumnHash() for _ in cols]
    rows = 0
    select = ", ".join(
        f"array_to_string(list_sort(string_split({ident(c)}, ',')), ',') AS {ident(c)}"
        if c in SORTED_LISTS.get(name, ())
        else ident(c)
        for c, _ in cols
    )
    # No ORDER BY: DuckDB returns a table's rows in insertion order
    # (preserve_insertion_order, on by default), i.e. as the parse stage stored them.
    rel = con.sql(f"SELECT {select} FROM {ident(name)}")
    # to_arrow_reader: DuckDB >= 1.4 (fetch_record_batch before, deprecated since)
    reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
    for batch in reader(BATCH_ROWS):
        rows += batch.num_rows
        for h, column in zip(hashers, batch.columns, strict=True):
            h.update(column)
    digests = [h.hexdigest() for h in hashers]
    whole = hashlib.sha256(
        json.dumps([rows, [[c, t, d] for (c, t), d in zip(cols, digests, strict=True)]]).encode()
    ).hexdigest()
    return {
        "rows": rows,
        "columns": [[c, t, d[:SHORT]] for (c, t), d in zip(cols, digests, strict=True)],
        "sha256": whole,
    }


class _ColumnHash:
    """SHA-256 of one column's values in order, the same however the rows are batched:
    the null mask, the values (nulls as zero / empty) and, for strings, their lengths
    are hashed as three separate streams."""

    def __init__(self) -> None:
        self.nulls, self.values, self.lengths = (hashlib.sha256() for _ in range(3))

    def update(self, arr: Any) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        t = arr.type
        self.nulls.update(np.asarray(arr.is_null(), dtype=np.uint8))
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            s = pc.fill_null(arr, "").cast(pa.large_string())
            offsets = np.frombuffer(s.buffers()[1], dtype=np.int64)[
                s.offset : s.offset + len(s) + 1
            ]
            self.lengths.update(np.diff(offsets).astype("<i8"))
            data = s.buffers()[2]
            if data is not None:
                self.values.update(memoryview(data)[offsets[0] : offsets[-1]])
        elif pa.types.is_boolean(t):
            self.values.update(np.asarray(pc.fill_null(arr, False), dtype=np.uint8))
        elif pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
            self._fixed(pc.fill_null(arr.cast(pa.int64()), 0))
        elif pa.types.is_integer(t) or pa.types.is_floating(t):
            self._fixed(pc.fill_null(arr, 0))  # floats: their exact bits
        else:  # no stored table has another type today; still digest it, row by row
            for v in arr.to_pylist():
                self.values.update(repr(v).encode() + b"\x1f")

    def _fixed(self, arr: Any) -> None:
        import numpy as np

        values = arr.to_numpy(zero_copy_only=False)
        self.values.update(np.ascontiguousarray(values.astype(values.dtype.newbyteorder("<"))))

    def hexdigest(self) -> str:
        parts = (self.nulls, self.values, self.lengths)
        return hashlib.sha256(b"".join(h.digest() for h in parts)).hexdigest()


def digest_store(con: Any) -> dict[str, Any]:
    """Every table of the store, and the coverage of every file (``collectors``)."""
    names = [
        str(r[0])
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY table_name"
        ).fetchall()
    ]
    out: dict[str, Any] = {"tables": {n: digest_table(con, n) for n in names}}
    if "collectors" in names:
        out["coverage"] = coverage(con)
    return out


def coverage(con: Any) -> dict[str, dict[str, Any]]:
    """The parse stage's account of each file, by file (``collectors`` rows)."""
    cur = con.execute("SELECT * FROM collectors")
    names = [d[0] for d in cur.description]
    out: dict[str, dict[str, Any]] = {}
    for values in cur.fetchall():
        row = dict(zip(names, values, strict=True))
        entry = {k: row[k] for k in COVERAGE_FIELDS if row.get(k) is not None}
        if "skip_reasons" in entry:
            entry["skip_reasons"] = json.loads(entry["skip_reasons"])
        for c in SORTED_LISTS["collectors"]:
            if c in entry:
                entry[c] = ",".join(sorted(entry[c].split(",")))
        # a collector the manifest lists without an output file has no file: its name
        base = row["file"] if row.get("file") is not None else f"(collector {row.get('collector')})"
        key, n = str(base), 1
        while key in out:  # two rows for one name (e.g. refused members): keep both
            n += 1
            key = f"{base} #{n}"
        out[key] = entry
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- parsing


def parse_and_digest(source: Path, db: Path | None = None) -> dict[str, Any]:
    """Parse the bundle ``source`` (archive or directory) as `analyzer.pipeline` does up
    to the store's ``bundle`` and ``collectors`` rows, then digest the store (in memory,
    or the new file ``db``).

    The body is `analyzer.pipeline._analyse` from `open_bundle` to the ``collectors``
    write, with the same helpers (change both together);
    ``test_digest_reads_what_analyze_stores`` checks that ``analyze --db`` stores the
    same tables."""
    from analyzer import pipeline
    from analyzer.bundle import open_bundle
    from analyzer.malloc_tune import keep_big_blocks
    from analyzer.parse_stage import ParseStage
    from analyzer.parsers._read import remove_scratch
    from analyzer.sniff import identify_all
    from analyzer.store import Store

    options = pipeline.Options(db=db)
    keep_big_blocks()  # as `analyze` runs its parsers (speed only)
    stage = ParseStage(lambda: Store(db), options, lambda _msg: None)
    try:
        with open_bundle(
            source, limits=options.limits, strict=options.strict, on_file=stage.offer
        ) as bundle:
            files = {f.rel: f for f in bundle.files}
            manifest = stage.manifest(
                files["manifest.json"].path if "manifest.json" in files else None
            )
            identified = identify_all(bundle.files, manifest, stage.early())
            rows, _counts, metas = stage.finish(identified, manifest)
            store = stage.store
            rows += pipeline._refused_rows(bundle) + pipeline._missing_rows(manifest, files)
            bundle_row = pipeline._bundle_row(bundle, manifest, metas, store)
            store.write("bundle", pipeline._frame([bundle_row]), None)
            store.write("collectors", pipeline._frame(rows), None)
            return digest_store(store.con)
    finally:
        stage.close()
        remove_scratch()


def sniff_file(path: Path) -> tuple[str | None, str]:
    """The tool the sniffer gives ``path`` as a file of a bundle without manifest, or
    None and the verdict (role and note) when no parser takes it."""
    from analyzer.bundle import BundleFile
    from analyzer.manifest import load_manifest
    from analyzer.sniff import identify_all

    item = identify_all([BundleFile(path.name, path, path.stat().st_size)], load_manifest(None))[0]
    if item.role == "data" and item.tool:
        return item.tool, ""
    return None, f"{item.role}: {item.note}" if item.note else item.role


#: Files under tests/fixtures that describe fixtures rather than being one: provenance,
#: the value checks of `tests/parsers/golden.py` and the golden files themselves.
NOT_FIXTURES = (GOLDEN_SUFFIX := ".golden.json", ".expected.json", "PROVENANCE.md")


def fixture_paths() -> list[Path]:
    return sorted(
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and not p.is_symlink() and not p.name.endswith(NOT_FIXTURES)
    )


def golden_path(fixture: Path) -> Path:
    """The expected-output file beside ``fixture``: ``<name>.golden.json``."""
    return fixture.with_name(fixture.name + GOLDEN_SUFFIX)


def fixture_key(fixture: Path) -> str:
    return "fixtures/" + fixture.relative_to(FIXTURES).as_posix()


def golden_text(entry: dict[str, Any] | None, verdict: str = "") -> str:
    """A fixture's golden file: its digest entry (tables with their columns, coverage,
    the fixture's own sha256), or the sniffer's verdict for a file no parser takes. One
    line per table and per covered file, keys sorted (small, readable diffs)."""
    doc = {"not_parsed": verdict} if entry is None else entry
    return dumps(doc, {"tables": 2, "coverage": 2})


def load_goldens() -> tuple[dict[str, Any], dict[str, str]]:
    """Every fixture's golden file: (inputs, not_parsed) keyed as `digest_fixtures` keys
    them. A fixture without a golden file is simply absent (`differences` says so)."""
    inputs: dict[str, Any] = {}
    not_parsed: dict[str, str] = {}
    for fixture in fixture_paths():
        golden = golden_path(fixture)
        if not golden.exists():
            continue
        doc = json.loads(golden.read_text())
        if "not_parsed" in doc:
            not_parsed[fixture_key(fixture)] = doc["not_parsed"]
        else:
            inputs[fixture_key(fixture)] = doc
    return inputs, not_parsed


def write_goldens(inputs: dict[str, Any], not_parsed: dict[str, str]) -> int:
    """Write the golden file of every fixture in ``inputs``/``not_parsed``; remove those
    of fixtures that are gone. Returns how many were written."""
    n = 0
    for fixture in fixture_paths():
        key = fixture_key(fixture)
        if key in inputs or key in not_parsed:
            text = golden_text(inputs.get(key), not_parsed.get(key, ""))
            golden = golden_path(fixture)
            if not golden.exists() or golden.read_text() != text:
                golden.write_text(text)
                n += 1
    for golden in FIXTURES.rglob("*" + GOLDEN_SUFFIX):
        if not golden.with_name(golden.name.removesuffix(GOLDEN_SUFFIX)).exists():
            golden.unlink()
    return n


def sample_paths() -> list[Path]:
    return sorted(SAMPLES.rglob("*.tgz"))


def _map(fn: Any, tasks: list[Any], jobs: int) -> list[Any]:
    """``[fn(t) for t in tasks]`` on ``jobs`` processes (in order, whatever their number)."""
    if jobs <= 1 or len(tasks) <= 1:
        return [fn(t) for t in tasks]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: polars and DuckDB run threads, which fork would copy in any state
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        return list(pool.map(fn, tasks, chunksize=max(1, min(8, len(tasks) // (4 * jobs)))))


def digest_fixtures(work: Path, say: Any, jobs: int) -> tuple[dict[str, Any], dict[str, str]]:
    """Every fixture a parser takes, each as a one-file bundle directory."""
    inputs: dict[str, Any] = {}
    not_parsed: dict[str, str] = {}
    tasks = [(str(p), str(work / f"f{i}")) for i, p in enumerate(fixture_paths())]
    for key, verdict, digest in _map(_fixture_task, tasks, jobs):
        if digest is None:
            not_parsed[key] = verdict
        else:
            inputs[key] = digest
    say(f"fixtures: {len(inputs)} parsed, {len(not_parsed)} taken by no parser")
    return inputs, not_parsed


def _fixture_task(task: tuple[str, str]) -> tuple[str, str, dict[str, Any] | None]:
    """One fixture: (key, the sniffer's verdict, its digest or None when no parser takes it)."""
    path, scratch = Path(task[0]), Path(task[1])
    key = fixture_key(path)
    tool, verdict = sniff_file(path)
    if tool is None:
        return key, verdict, None
    bundle_dir = scratch / "fixture"  # the same name every time: it is the bundle's name
    bundle_dir.mkdir(parents=True)
    try:
        shutil.copyfile(path, bundle_dir / path.name)
        return key, "", {"sha256": sha256_file(path), **_safely(parse_and_digest, bundle_dir)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def digest_samples(say: Any, jobs: int) -> dict[str, Any]:
    """Every sample bundle (the archive itself is parsed, as ``analyze`` would)."""
    inputs: dict[str, Any] = {}
    for key, digest, seconds in _map(_sample_task, [str(p) for p in sample_paths()], jobs):
        inputs[key] = digest
        say(f"  {key}: {seconds:.1f} s")
    return inputs


def _sample_task(path_text: str) -> tuple[str, dict[str, Any], float]:
    path = Path(path_text)
    t0 = time.perf_counter()
    digest = {"sha256": sha256_file(path), **_safely(parse_and_digest, path)}
    return "samples/" + path.relative_to(SAMPLES).as_posix(), digest, time.perf_counter() - t0


def _safely(fn: Any, *args: Any) -> dict[str, Any]:
    """A bundle the pipeline refuses as a whole is recorded with its error."""
    from analyzer.errors import HindsightError

    try:
        return fn(*args)
    except HindsightError as e:
        return {"error": f"{type(e).__name__}: {e}"}


# --------------------------------------------------------------------------- bench


def bench_params() -> dict[str, dict[str, Any]]:
    """The `analyzer.synth.Spec` of each benchmark bundle in `BENCH`, every field
    spelled out (so a later change of a default does not change the bundle), taken from
    the benchmark's own module (it may move; imported only here, for ``--write``)."""
    import importlib

    from analyzer.synth import Spec

    module = None
    for name in ("tests.tools.bench", "tests.benchmarks.bundles"):
        try:
            candidate = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(candidate, "SHAPES") and hasattr(candidate, "SIZES"):
            module = candidate
            break
    if module is None:
        raise SystemExit("no benchmark module (tests.tools.bench, tests.benchmarks.bundles)")
    out: dict[str, dict[str, Any]] = {}
    for shape_name, size in BENCH:
        shape = module.SHAPES[shape_name]
        spec = Spec(
            cpus=shape.cpus,
            gpus=shape.gpus,
            disks=shape.disks,
            seconds=module.SIZES[size],
            seed=BENCH_SEED,
        )
        fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
        fields["start"] = fields["start"].isoformat()
        fields["incidents"] = [dataclasses.asdict(i) for i in fields["incidents"]]
        out[f"synth-{shape_name}-{size}"] = {
            "generator": "analyzer.synth.generate(analyzer.synth.Spec(**spec))",
            "benchmark": f"{module.__name__}.bundle(cache, {size!r}, SHAPES[{shape_name!r}])",
            "spec": fields,
        }
    return out


def bench_bundle(name: str, params: dict[str, Any], where: Path, say: Any) -> Path:
    """The bundle for ``params``, generated into ``where`` (reused when already there)."""
    from analyzer.synth import Incident, Spec, generate

    fields = dict(params["spec"])
    fields["start"] = datetime.fromisoformat(fields["start"])
    fields["incidents"] = [Incident(**i) for i in fields["incidents"]]
    key = hashlib.sha256(json.dumps(params["spec"], sort_keys=True).encode()).hexdigest()[:12]
    out = where / f"{name}-{key}.tgz"
    if not out.exists():
        t0 = time.perf_counter()
        generate(Spec(**fields), out)
        say(f"  {name}: generated in {time.perf_counter() - t0:.1f} s")
    return out


def digest_bench(
    params: dict[str, dict[str, Any]], work: Path, cache: Path | None, say: Any
) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    where = cache or work
    where.mkdir(parents=True, exist_ok=True)
    for name, p in params.items():
        tgz = bench_bundle(name, p, where, say)
        db = work / f"{name}.duckdb"  # a file: DuckDB may spill instead of holding GBs
        t0 = time.perf_counter()
        try:
            inputs["bench/" + name] = {"sha256": sha256_file(tgz), **parse_and_digest(tgz, db)}
        finally:
            for leftover in (db, Path(f"{db}.wal")):
                leftover.unlink(missing_ok=True)
            if cache is None:
                tgz.unlink(missing_ok=True)
                tgz.with_name(tgz.name.removesuffix(".tgz") + ".ground-truth.json").unlink(
                    missing_ok=True
                )
        say(f"  {name}: parsed and digested in {time.perf_counter() - t0:.1f} s")
    return inputs


# --------------------------------------------------------------------------- record


def compute(
    classes: Iterable[str],
    bench: dict[str, dict[str, Any]] | None,
    cache: Path | None = None,
    say: Any = print,
    jobs: int = 1,
) -> dict[str, Any]:
    """The digests of ``classes`` (`CLASSES`); ``bench``: the bench bundles' parameters."""
    doc: dict[str, Any] = {"inputs": {}, "not_parsed": {}, "seconds": {}}
    with tempfile.TemporaryDirectory(prefix="hindsight-digest-") as tmp:
        work = Path(tmp)
        for cls in classes:
            t0 = time.perf_counter()
            if cls == "fixtures":
                inputs, doc["not_parsed"] = digest_fixtures(work, say, jobs)
            elif cls == "samples":
                inputs = digest_samples(say, jobs)
            else:
                inputs = digest_bench(bench or {}, work, cache, say)
            doc["inputs"] |= inputs
            doc["seconds"][cls] = round(time.perf_counter() - t0, 1)
            n = sum(len(v.get("tables", {})) for v in inputs.values())
            say(f"{cls}: {len(inputs)} inputs, {n} tables, {doc['seconds'][cls]} s")
    return doc


def environment() -> dict[str, str]:
    import duckdb
    import numpy
    import polars
    import pyarrow

    return {
        "python": sys.version.split()[0],
        "duckdb": duckdb.__version__,
        "polars": polars.__version__,
        "pyarrow": pyarrow.__version__,
        "numpy": numpy.__version__,
    }


def _schema_id(columns: list[list[str]]) -> str:
    return hashlib.sha256(json.dumps(columns).encode()).hexdigest()[:SCHEMA_ID]


def compact(inputs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """before.json's form of ``inputs``: each table's columns (names and types, the same
    for most inputs) once under ``schemas[table][id]``; the table keeps the id and its
    column digests in the same order (none for a table without rows)."""
    schemas: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    for key, entry in inputs.items():
        tables = {}
        for name, t in entry.get("tables", {}).items():
            columns = [c[:2] for c in t["columns"]]
            sid = _schema_id(columns)
            schemas.setdefault(name, {})[sid] = columns
            small = {"rows": t["rows"], "schema": sid, "sha256": t["sha256"]}
            if t["rows"] and name not in NO_COLUMN_DIGESTS:
                small["values"] = " ".join(c[2][:SHORT] for c in t["columns"])
            tables[name] = small
        out[key] = entry | ({"tables": tables} if "tables" in entry else {})
    return out, schemas


def expand(inputs: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """The inverse of `compact`: columns as ``[name, type, digest]`` again."""
    out: dict[str, Any] = {}
    for key, entry in inputs.items():
        tables = {}
        for name, t in entry.get("tables", {}).items():
            columns = schemas[name][t["schema"]]
            if "values" in t:
                values = t["values"].split()
            else:  # no rows (every column's digest is that of nothing), or collectors
                values = [_empty_digest() if not t["rows"] else "-"] * len(columns)
            tables[name] = {
                "rows": t["rows"],
                "columns": [[c, ty, d] for (c, ty), d in zip(columns, values, strict=True)],
                "sha256": t["sha256"],
            }
        out[key] = entry | ({"tables": tables} if "tables" in entry else {})
    return out


def _empty_digest() -> str:
    h = _ColumnHash()
    return h.hexdigest()[:SHORT]


def dumps(doc: dict[str, Any], levels: dict[str, int] | None = None) -> str:
    """before.json's text (or a golden file's, with its ``levels``: how deep each top key
    is spread over lines): one line per table, per file's coverage and per fixture taken
    by no parser (small diffs), keys sorted."""

    def block(obj: Any, indent: int, depth: int) -> str:
        if depth == 0 or not isinstance(obj, dict) or not obj:
            return json.dumps(obj, sort_keys=True, ensure_ascii=False)
        pad = " " * indent
        items = [
            f"{pad} {json.dumps(k, ensure_ascii=False)}: {block(v, indent + 1, depth - 1)}"
            for k, v in sorted(obj.items())
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"

    if levels is None:
        levels = {"inputs": 3, "schemas": 2, "bench": 1, "not_parsed": 1, "environment": 1}
    parts = [f" {json.dumps(k)}: {block(v, 1, levels.get(k, 0))}" for k, v in sorted(doc.items())]
    return "{\n" + ",\n".join(parts) + "\n}\n"


def load(path: Path | None = None) -> dict[str, Any]:
    """before.json (or ``path``) with its inputs expanded (`expand`)."""
    doc = json.loads((path or BEFORE).read_text())
    doc["inputs"] = expand(doc.get("inputs", {}), doc.get("schemas", {}))
    if not any(k.startswith("fixtures/") for k in doc["inputs"]):  # fixtures: golden files
        inputs, doc["not_parsed"] = load_goldens()
        doc["inputs"] |= inputs
    return doc


def write(classes: list[str], cache: Path | None, jobs: int, path: Path = BEFORE) -> None:
    """Compute ``classes`` and record them in ``path`` (other classes kept as they are)."""
    old = load(path) if path.exists() else {}
    bench = bench_params() if "bench" in classes else old.get("bench", {})
    new = compute(classes, bench, cache, jobs=jobs)
    keep = {k: v for k, v in old.get("inputs", {}).items() if k.split("/", 1)[0] not in classes}
    inputs = keep | new["inputs"]
    fixtures = {k: inputs.pop(k) for k in list(inputs) if k.startswith("fixtures/")}
    if "fixtures" in classes:  # in the recorded form (`compact`): a rerun changes nothing
        n = write_goldens(expand(*compact(fixtures)), new["not_parsed"])
        print(f"wrote {n} golden file(s) beside the fixtures")
    inputs, schemas = compact(inputs)
    doc = {
        "about": "digests of the parse stage's tables on the samples and bench bundles before "
        "the parser rewrite (issue #17); the fixtures' are their golden files "
        "(<fixture>.golden.json); python -m tests.parsers_digest.digest --check compares "
        "(see its docstring)",
        "format": FORMAT,
        # informational: a difference in --check says whether the environment changed
        "environment": environment(),
        "volatile_columns_left_out": VOLATILE,
        "bench": bench,
        "schemas": schemas,
        "inputs": inputs,
    }
    # The seconds per class are printed, not recorded: they differ on every run.
    path.write_text(dumps(doc))
    print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


# --------------------------------------------------------------------------- compare


def differences(before: dict[str, Any], after: dict[str, Any], classes: list[str]) -> list[str]:
    """Every difference between the recorded and recomputed digests of ``classes``."""
    out: list[str] = []

    def of(doc: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in doc.get("inputs", {}).items() if k.split("/", 1)[0] in classes}

    old, new = of(before), of(after)
    for key in sorted(old.keys() | new.keys()):
        if key not in new:
            out.append(f"{key}: recorded, but no longer an input")
        elif key not in old:
            out.append(f"{key}: new input, not recorded in before.json")
        else:
            out += [f"{key}: {d}" for d in _input_diffs(old[key], new[key])]
    if "fixtures" in classes:
        a, b = before.get("not_parsed", {}), after.get("not_parsed", {})
        for key in sorted(a.keys() | b.keys()):
            if a.get(key) != b.get(key):
                was = a.get(key) or ("parsed" if key in old else "not an input")
                now = b.get(key) or ("parsed" if key in new else "not an input")
                out.append(f"{key}: the sniffer's verdict {was!r} -> {now!r}")
    return out


def _input_diffs(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if a.get("sha256") != b.get("sha256"):
        out.append(
            f"the input itself changed (sha256 {str(a.get('sha256'))[:12]} -> "
            f"{str(b.get('sha256'))[:12]}): re-record it with --write if that is intended"
        )
    if a.get("error") != b.get("error"):
        out.append(f"error {a.get('error')!r} -> {b.get('error')!r}")
    ta, tb = a.get("tables", {}), b.get("tables", {})
    for name in sorted(ta.keys() | tb.keys()):
        if name not in tb:
            out.append(f"table {name}: gone (had {ta[name]['rows']} rows)")
        elif name not in ta:
            out.append(f"table {name}: new ({tb[name]['rows']} rows)")
        else:
            out += [f"table {name}: {d}" for d in _table_diffs(ta[name], tb[name])]
    ca, cb = a.get("coverage", {}), b.get("coverage", {})
    for f in sorted(ca.keys() | cb.keys()):
        if f not in cb:
            out.append(f"coverage of {f}: gone")
        elif f not in ca:
            out.append(f"coverage of {f}: new {cb[f]}")
        else:
            for field in sorted(ca[f].keys() | cb[f].keys()):
                was, now = ca[f].get(field), cb[f].get(field)
                if was == now:
                    continue
                if isinstance(was, dict) and isinstance(now, dict):  # skip_reasons: what changed
                    keys = sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))
                    was = {k: was.get(k) for k in keys}
                    now = {k: now.get(k) for k in keys}
                out.append(f"coverage of {f}: {field} {was!r} -> {now!r}")
    return out


def _table_diffs(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if a["rows"] != b["rows"]:
        out.append(f"rows {a['rows']} -> {b['rows']}")
    cols_a = {c[0]: c for c in a["columns"]}
    cols_b = {c[0]: c for c in b["columns"]}
    names_a, names_b = [c[0] for c in a["columns"]], [c[0] for c in b["columns"]]
    if names_a != names_b:
        gone = [n for n in names_a if n not in cols_b]
        new = [n for n in names_b if n not in cols_a]
        out.append(f"columns {names_a} -> {names_b} (gone {gone}, new {new})")
    common = [n for n in names_a if n in cols_b]
    types = [
        f"{n} {cols_a[n][1]} -> {cols_b[n][1]}" for n in common if cols_a[n][1] != cols_b[n][1]
    ]
    if types:
        out.append("types " + "; ".join(types))
    values = [
        n
        for n in common
        if "-" not in (cols_a[n][2], cols_b[n][2]) and cols_a[n][2][:SHORT] != cols_b[n][2][:SHORT]
    ]
    if values:
        out.append("values differ in " + ", ".join(values))
    if not out and a["sha256"] != b["sha256"]:
        out.append(f"sha256 {a['sha256'][:12]} -> {b['sha256'][:12]}")
    return out


def check(
    classes: list[str], cache: Path | None = None, jobs: int = 1, say: Any = print
) -> list[str]:
    """Recompute ``classes`` and return every difference from before.json."""
    if not BEFORE.exists():
        return [f"{BEFORE} is missing: record it with --write"]
    before = load()
    if before.get("format") != FORMAT:
        return [f"before.json has format {before.get('format')}, this script {FORMAT}"]
    missing = [c for c in classes if c == "bench" and not before.get("bench")]
    if missing:
        return ["before.json records no bench bundles: --write --only bench first"]
    after = compute(classes, before.get("bench", {}), cache, say, jobs)
    diffs = differences(before, after, classes)
    env = environment()
    if diffs and env != before.get("environment"):
        say(
            f"note: the environment differs from the recording: {before.get('environment')} -> {env}"
        )
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.parsers_digest.digest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="record before.json")
    mode.add_argument("--check", action="store_true", help="compare with before.json")
    ap.add_argument("--only", nargs="+", choices=CLASSES, default=list(CLASSES))
    ap.add_argument("--cache", type=Path, help="keep the generated bench bundles here, reuse them")
    ap.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes for the fixtures"
    )
    ap.add_argument("--out", type=Path, default=BEFORE, help="--write: this file, not before.json")
    a = ap.parse_args(argv)
    classes = [c for c in CLASSES if c in a.only]
    if a.write:
        write(classes, a.cache, a.jobs, a.out)
        return 0
    diffs = check(classes, a.cache, a.jobs)
    for d in diffs:
        print(d)
    print(f"{len(diffs)} difference(s) in {', '.join(classes)}")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
