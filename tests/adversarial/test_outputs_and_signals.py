"""Outputs never destroy and never lie; a signal stops a run at once and cleanly; stdout
carries only the document asked for. Real bundles, the real command line (in process, or
as real processes where signals, locks and file descriptors matter), real DuckDB files.

What is promised (docs/limits.md, "Outputs"): ``--db`` replaces only a database Hindsight
wrote (``--force`` overrides) and never an input; every output is written at a temporary
name beside it and renamed into place only when the whole run succeeded; two runs cannot
write one path at once; SIGINT/SIGTERM leave nothing behind, one line, exit 130/143.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from conftest import Jail
from hostile import ERROR_PREFIX, FIX, VMSTAT, valid, write_tgz
from typer.testing import CliRunner

import analyzer.analysis
import analyzer.fleet
import reports.diff_text
import reports.markdown
from analyzer import __version__
from analyzer import query as query_module
from analyzer import redact as redact_module
from analyzer.cli import app
from analyzer.outputs import LOCK_SUFFIX, is_hindsight_database

BIN = Path(sys.executable).parent  # the virtualenv's console scripts
SAR_A = FIX / "sar" / "local-debian12-sysstat12.6.1__sar-A-f-sa.data.txt"


def cli(*args: str | Path) -> tuple[int, str, str]:
    """The real command line, in process: exit code, stdout, stderr."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def bundle_dir(jail: Jail, name: str = "bundle") -> Path:
    d = jail.root / name
    d.mkdir()
    (d / "vmstat.out").write_bytes(VMSTAT)
    return d


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones included) and its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_one_error(code: int, stderr: str, match: str, expected_code: int = 2) -> None:
    assert code == expected_code, (code, stderr)
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), stderr
    assert match in lines[0], (match, lines[0])


def analyzed_at(db: Path) -> datetime:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.sql("SELECT analyzed_at FROM bundle").fetchall()[0][0]
    finally:
        con.close()


# --- 1. --db replaces only what Hindsight wrote, and never an input ---------------------


def _csv(path: Path) -> None:
    path.write_text("host,ts\ngpu01,1\n")


def _stranger_db(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.sql("CREATE TABLE accounts AS SELECT 42 AS balance")
    con.close()


def _bundle_view(path: Path) -> None:
    """Looks like ours by its column, but ``bundle`` is a view that reads a file."""
    secret = path.with_name("secret.txt")
    secret.write_text("do not read me\n")
    con = duckdb.connect(str(path))
    con.sql(
        "CREATE VIEW bundle AS SELECT '0.1.0' AS analyzer_version, content "
        f"FROM read_text('{secret}')"
    )
    con.close()


@pytest.mark.parametrize("make", [_csv, _stranger_db, _bundle_view], ids=["csv", "db", "view"])
def test_db_refuses_to_replace_a_file_hindsight_did_not_write(jail: Jail, make) -> None:  # type: ignore[no-untyped-def]
    out = jail.root / "out"
    out.mkdir()
    db = out / "a.duckdb"
    make(db)
    before = files(out)
    code, stdout, stderr = cli("analyze", bundle_dir(jail), "-q", "-o", out / "r.html", "--db", db)
    assert_one_error(code, stderr, f"{db} exists and is not a database written by Hindsight")
    assert stdout == "" and files(out) == before  # untouched, no report, nothing left
    assert not is_hindsight_database(db)
    code, _, stderr = cli(
        "analyze", jail.root / "bundle", "-q", "-o", out / "r.html", "--db", db, "--force"
    )
    assert code == 0, stderr
    assert is_hindsight_database(db)
    assert sorted(files(out)) == sorted({*before, "r.html"})  # replaced in place, no leftovers


def test_db_replaces_a_database_hindsight_wrote_and_leaves_nothing_beside(jail: Jail) -> None:
    out = jail.root / "out"
    b = bundle_dir(jail)
    args = ("analyze", b, "-q", "-o", out / "r.html", "--db", out / "a.duckdb")
    assert cli(*args)[0] == 0
    first = analyzed_at(out / "a.duckdb")
    assert cli(*args)[0] == 0
    assert analyzed_at(out / "a.duckdb") > first
    assert sorted(files(out)) == ["a.duckdb", "r.html"]  # no .wal, no temporary, no lock


def _archive(jail: Jail) -> tuple[Path, Path]:
    bundle = write_tgz(jail.root / "evidence.tgz", valid())
    return bundle, bundle


def _dir_file(jail: Jail) -> tuple[Path, Path]:
    d = bundle_dir(jail)
    return d, d / "vmstat.out"


@pytest.mark.parametrize(
    ("make", "option", "extra"),
    [
        (_archive, "--db", ["--force"]),
        (_archive, "-o", []),
        (_archive, "--json", []),
        (_archive, "--db", ["--force", "--redact"]),  # the original, not the redacted copy
        (_dir_file, "--db", ["--force"]),
        (_dir_file, "--md", []),
    ],
    ids=["db-is-bundle", "report-is-bundle", "json-is-bundle", "redact", "db-in-dir", "md-in-dir"],
)
def test_no_output_ever_overwrites_an_input(
    jail: Jail, make, option: str, extra: list[str]
) -> None:  # type: ignore[no-untyped-def]
    bundle, victim = make(jail)
    before = victim.read_bytes()
    args = ["analyze", bundle, "-q", "-o", jail.root / "r.html", option, victim, *extra]
    if option == "-o":
        args = ["analyze", bundle, "-q", option, victim, *extra]
    code, _, stderr = cli(*args)
    assert_one_error(code, stderr, f"{victim}: it is an input of this run")
    assert victim.read_bytes() == before
    assert not (jail.root / "r.html").exists()
    assert [p.name for p in victim.parent.iterdir() if p.name.startswith(".")] == []


def test_a_database_view_cannot_read_files_while_we_look(jail: Jail) -> None:
    """The ownership check opens a stranger's database sealed: even selecting from its
    view could not read the file (the view is never selected, and could not be)."""
    db = jail.root / "view.duckdb"
    _bundle_view(db)
    assert not is_hindsight_database(db)
    from analyzer.sql import connect_sealed

    con = connect_sealed(db)
    with pytest.raises(duckdb.PermissionException):
        con.sql("SELECT * FROM bundle").fetchall()
    con.close()


# --- 2. Whole or not at all -----------------------------------------------------------


def test_a_failed_run_leaves_every_previous_output_as_it_was(
    jail: Jail, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = jail.root / "out"
    b = bundle_dir(jail)
    args = ["analyze", b, "-q", "-o", out / "r.html", "--db", out / "a.duckdb"]
    args += ["--json", out / "r.json", "--md", out / "r.md"]
    assert cli(*args)[0] == 0
    before = files(out)
    assert sorted(before) == ["a.duckdb", "r.html", "r.json", "r.md"]

    def boom(*_a: object, **_k: object) -> str:  # the last output, after all the others
        raise RuntimeError("injected")

    monkeypatch.setattr(reports.markdown, "render_markdown", boom)
    code, _, stderr = cli(*args)
    assert_one_error(code, stderr, "internal error: RuntimeError: injected", expected_code=1)
    assert files(out) == before  # byte for byte, and no temporary file left


def test_the_database_is_built_beside_its_path_and_renamed_at_the_end(
    jail: Jail, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = jail.root / "out"
    b = bundle_dir(jail)
    args = ("analyze", b, "-q", "-o", out / "r.html", "--db", out / "a.duckdb")
    assert cli(*args)[0] == 0
    first = analyzed_at(out / "a.duckdb")
    real = analyzer.analysis.analyse
    seen: dict[str, object] = {}

    def spy(store, **kw):  # type: ignore[no-untyped-def]
        seen["old"] = analyzed_at(out / "a.duckdb")  # the old database, still whole
        seen["names"] = sorted(p.name for p in out.iterdir())
        seen["store"] = store.path
        return real(store, **kw)

    monkeypatch.setattr(analyzer.analysis, "analyse", spy)
    assert cli(*args)[0] == 0
    assert seen["old"] == first
    temp = Path(str(seen["store"]))
    assert temp.parent == out and re.fullmatch(r"\.a\.duckdb\.\d+-[0-9a-f]{8}\.tmp", temp.name)
    claimed = {f".a.duckdb{LOCK_SUFFIX}", f".r.html{LOCK_SUFFIX}", temp.name, "a.duckdb", "r.html"}
    assert claimed <= set(seen["names"]) <= claimed | {f"{temp.name}.wal"}  # type: ignore[arg-type]
    assert analyzed_at(out / "a.duckdb") > first
    assert sorted(files(out)) == ["a.duckdb", "r.html"]


def test_export_query_redact_diff_and_fleet_replace_their_outputs_whole(
    jail: Jail, monkeypatch: pytest.MonkeyPatch
) -> None:
    b, b2 = bundle_dir(jail), bundle_dir(jail, "bundle2")
    out = jail.root / "out"
    db = out / "a.duckdb"
    assert cli("analyze", b, "-q", "-o", out / "r.html", "--db", db)[0] == 0
    runs = {  # command -> (arguments, function to break for the second run)
        "export": (["export", db, out / "tables", "-q"], (query_module, "export_tables")),
        "query": (
            ["query", db, "SELECT 1 AS x", "-f", "json", "-o", out / "q.json"],
            (query_module, "_json_text"),
        ),
        "redact": (["redact", b, "-o", out / "clean.tgz", "-q"], (redact_module, "_redact_stream")),
        "diff": (
            [
                "diff",
                b,
                b,
                "-o",
                out / "d.html",
                "--md",
                out / "d.md",
                "--json",
                out / "d.json",
                "-q",
            ],
            (reports.diff_text, "markdown"),
        ),
        "fleet": (
            ["fleet", b, b2, "-j", "1", "-o", out / "f.html", "--json", out / "f.json", "-q"],
            (analyzer.fleet, "json_text"),  # after the dataset and the page
        ),
    }
    for name, (args, _) in runs.items():
        code, _, stderr = cli(*args)
        assert code == 0, (name, stderr)
    before = files(out)
    for name, (args, (module, attr)) in runs.items():

        def boom(*_a: object, **_k: object) -> None:
            raise RuntimeError("injected")

        with monkeypatch.context() as m:
            m.setattr(module, attr, boom)
            code, _, stderr = cli(*args)
        assert code == 1 and "RuntimeError: injected" in stderr, (name, code, stderr)
        assert files(out) == before, name  # every earlier output intact, nothing beside it


# --- 3. One writer per path -------------------------------------------------------------


@pytest.fixture(scope="module")
def big_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle whose analysis takes seconds (1 h of a 64-CPU host): a run is caught
    mid-parse."""
    out = tmp_path_factory.mktemp("big") / "big.tgz"
    subprocess.run(
        [BIN / "hindsight", "synth", out, "--hours", "1", "--cpus", "64"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def _wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.01)


def test_a_second_run_on_the_same_db_fails_at_once(jail: Jail, big_bundle: Path) -> None:
    out = jail.root / "out"
    out.mkdir()
    db = out / "same.duckdb"
    env = dict(os.environ, TMPDIR=str(jail.scratch))

    def cmd(report: str) -> list[str]:
        return [
            str(BIN / "analyze"),
            str(big_bundle),
            "-q",
            "-o",
            str(out / report),
            "--db",
            str(db),
        ]

    first = subprocess.Popen(
        cmd("a.html"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(lambda: (out / f".same.duckdb{LOCK_SUFFIX}").exists())
        t0 = time.monotonic()
        second = subprocess.run(cmd("b.html"), env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
        assert first.poll() is None, "the first run must still be running"
    finally:
        _, stderr = first.communicate(timeout=120)
    assert_one_error(
        second.returncode,
        second.stderr,
        f"another hindsight run (pid {first.pid}) is writing {db}",
    )
    assert took < 10, took  # at once: interpreter start-up, no analysis
    assert first.returncode == 0, stderr
    assert sorted(files(out)) == ["a.html", "same.duckdb"]  # b.html never written
    assert is_hindsight_database(db)


def test_a_lock_left_by_a_dead_process_is_taken_over(jail: Jail) -> None:
    out = jail.root / "out"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (out / f".a.duckdb{LOCK_SUFFIX}").write_text(f"{dead.pid}\n")
    code, _, stderr = cli(
        "analyze", bundle_dir(jail), "-q", "-o", out / "r.html", "--db", out / "a.duckdb"
    )
    assert code == 0, stderr
    assert sorted(files(out)) == ["a.duckdb", "r.html"]


# --- 4. Signals -------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_run_at_once_and_leaves_nothing(
    jail: Jail, big_bundle: Path, sig: signal.Signals
) -> None:
    out = jail.root / "out"
    outputs = [
        "-o",
        str(out / "r.html"),
        "--db",
        str(out / "a.duckdb"),
        "--json",
        str(out / "r.json"),
    ]
    assert cli("analyze", bundle_dir(jail), "-q", *outputs)[0] == 0  # the previous outputs
    before = files(out)
    tmp = jail.root / "child-tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    child = subprocess.Popen(
        [str(BIN / "analyze"), str(big_bundle), "-q", *outputs],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:  # mid-parse: the bundle is being extracted and parsed in the temporary directory
        _wait_for(lambda: sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) > 4 << 20)
        time.sleep(0.3)
        assert child.poll() is None, "the run must still be going"
        t0 = time.monotonic()
        child.send_signal(sig)
        stdout, stderr = child.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if child.poll() is None:
            child.kill()
    assert took < 2.0, took
    assert child.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig]
    assert stderr == f"hindsight: error: interrupted ({sig.name})\n" and stdout == ""
    assert list(tmp.iterdir()) == []  # extraction, UTF-8 copies, spill: all gone
    assert files(out) == before  # the previous outputs untouched, no temporary, no lock


# --- 5. stdout carries only the document -------------------------------------------------


@pytest.mark.parametrize("quiet", [False, True], ids=["summary", "quiet"])
def test_json_to_stdout_is_only_json(jail: Jail, quiet: bool) -> None:
    args = [str(BIN / "analyze"), str(bundle_dir(jail)), "-o", str(jail.root / "r.html")]
    args += ["--json", "-", *(["-q"] if quiet else [])]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=jail.cwd)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1 and doc["bundle"]["name"] == "bundle"
    if quiet:
        assert r.stderr == ""
    else:  # the text summary went to stderr
        assert r.stderr.startswith("Hindsight ") and "coverage" in r.stderr


def test_markdown_to_stdout_is_only_markdown(jail: Jail) -> None:
    args = [str(BIN / "analyze"), str(bundle_dir(jail)), "-o", str(jail.root / "r.html")]
    r = subprocess.run([*args, "--md", "-"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = r.stderr.splitlines()  # the text summary went to stderr
    assert summary[0] == f"Hindsight {__version__} — bundle"
    assert any(line.startswith("  coverage  ") for line in summary)
    assert r.stdout.startswith("## Hindsight: ") and r.stdout.endswith("._\n")
    assert summary[0] not in r.stdout and "  coverage  " not in r.stdout


@pytest.mark.parametrize("when", ["before any output", "after one line, 2>&1"])
def test_a_reader_that_stops_early_is_not_an_error(jail: Jail, when: str) -> None:
    """``analyze ... --md - | head``: the reader closes the pipe (at once, or after the
    first line with stderr merged into it); the report is still written, the exit code is
    the analysis's (0) and no error is printed."""
    report = jail.root / "r.html"
    args = [str(BIN / "analyze"), str(bundle_dir(jail)), "-o", str(report), "--md", "-"]
    merged = when.endswith("2>&1")
    stderr = subprocess.STDOUT if merged else subprocess.PIPE
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=jail.cwd)
    assert child.stdout is not None
    if merged:
        assert child.stdout.readline().startswith("## Hindsight: ")
    child.stdout.close()
    errors = ""
    if child.stderr is not None:
        with child.stderr:
            errors = child.stderr.read()
    assert child.wait(timeout=120) == 0, errors
    assert report.is_file() and "error" not in errors
    if not merged:
        assert errors.startswith("Hindsight ")  # the summary, on its own pipe


def test_two_outputs_on_stdout_are_refused(jail: Jail) -> None:
    code, stdout, stderr = cli("analyze", bundle_dir(jail), "--json", "-", "--md", "-")
    assert_one_error(code, stderr, "only one output can go to stdout ('-'), not --json and --md")
    assert stdout == ""


# --- 6. --db on weeks of sysstat history ----------------------------------------------------


def sar_days(folder: Path, days: int, interval_s: int) -> Path:
    """``days`` files of real ``sar -A`` text (the fixture's sections, each sample's rows
    repeated every ``interval_s`` seconds over the whole day), one per day."""
    banner, _, rest = SAR_A.read_text().partition("\n\n")
    sections: dict[str, list] = {}  # header -> [rows of one sample, averages, per-sample header]
    last = None
    for block in (b.splitlines() for b in rest.split("\n\n") if b.strip()):
        if not block[0][:2].isdigit():  # "Average:" / "Summary:" after per-sample blocks
            if last is not None:
                sections[last][1] = block
            continue
        head = block[0][8:]
        if head in sections:
            sections[head][2] = True  # a header before every sample (sar -I ALL)
            continue
        rows = [line[8:] for line in block[1:] if line[:8] == block[1][:8]]
        averages = [line for line in block[1:] if not line[:2].isdigit()]  # Average:, Summary:
        sections[head], last = [rows, averages, False], head
    folder.mkdir(parents=True)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for d in range(days):
        day = start + timedelta(days=d)
        times = [f"{day + timedelta(seconds=i):%H:%M:%S}" for i in range(0, 86400, interval_s)]
        parts = [banner.replace("11/29/26", f"{day:%m/%d/%y}")]
        for head, (rows, averages, per_sample) in sections.items():
            if per_sample:
                prev = ["00:00:00", *times[:-1]]
                parts += [
                    "\n".join([p + head] + [t + r for r in rows])
                    for p, t in zip(prev, times, strict=True)
                ]
                parts += ["\n".join(averages)] if averages else []
            else:
                body = ["00:00:00" + head] + [t + r for t in times for r in rows] + averages
                parts.append("\n".join(body))
        (folder / f"sar-A-{day:%d}.txt").write_text("\n\n".join(parts) + "\n")
    return folder


@pytest.mark.slow
def test_db_analyses_four_weeks_of_sar_history_within_its_memory_limit(jail: Jail) -> None:
    """28 daily ``sar -A`` files at 10 min: the grid's centring took an exact median of
    every expanded second (24 M values) and ran out of DuckDB's 512 MB (exit 1)."""
    bundle = sar_days(jail.root / "sar-history", 28, 600)
    db = jail.root / "a.duckdb"
    code, _, stderr = cli("analyze", bundle, "-q", "-o", jail.root / "r.html", "--db", db)
    assert code == 0, stderr
    con = duckdb.connect(str(db), read_only=True)
    lo, hi, n = con.sql("SELECT min(ts), max(ts), count(*) FROM signals").fetchall()[0]
    con.close()
    assert hi - lo == timedelta(days=8) and n == 8 * 86400 + 1  # bounded, as documented
