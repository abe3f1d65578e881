"""A bundle is data, never code (docs/security.md), through the real commands.

Every case is a bundle a stranger could hand us: SQL in member names (aimed at absolute
sentinel paths and at a local secret file), names that are not UTF-8 or hold control,
bidi and glob characters, rows stamped in year 9999, files and directories we may not
read, a manifest whose window misses the data, a ``.duckdb`` whose tables are views over
local files. Each asserts what a user sees (exit code, what is refused and why, which
findings survive) and that nothing outside the run's own outputs was created or read.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import duckdb
import pytest
from conftest import Jail
from hostile import FIX, VMSTAT, Member, analyze, write_tgz
from typer.testing import CliRunner

from analyzer.cli import app

DMESG_OOM = (
    FIX / "dmesg" / "local-debian12-utillinux2.38.1-kernel6.18__memcg-oom__dmesg-iso.txt"
).read_bytes()
VM_LINES = VMSTAT.splitlines(keepends=True)
VM_STAMP = b"2026-11-29 17:23:37\n"


def vm_with_stamp(row: int, stamp: str) -> bytes:
    """The vmstat -t fixture with data row ``row`` (0-based) restamped ``stamp``."""
    lines = list(VM_LINES)
    i = 2 + row
    lines[i] = lines[i][: -len(VM_STAMP)] + stamp.encode() + b"\n"
    return b"".join(lines)


def tgz_raw_names(path: Path, members: dict[bytes, bytes]) -> Path:
    """A .tgz whose member names are the given bytes (GNU format: no UTF-8 re-encoding)."""
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape"
    ) as tar:
        for raw, data in members.items():
            info = tarfile.TarInfo(raw.decode("utf-8", "surrogateescape"))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    import gzip

    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    return path


def injections(jail: Jail, secret: Path) -> list[str]:
    """Member names that would write the sentinel or read ``secret`` if pasted into SQL."""
    target = jail.absolute
    return [
        f"vmstat-x'; COPY (SELECT 42 AS pwn) TO '{target}.csv'; SELECT 1 WHERE '1'='1.out",
        f"vmstat-y' UNION ALL SELECT content FROM read_text('{secret}') --.out",
        f"vmstat-z'); ATTACH '{target}.duckdb' AS pwn; CREATE TABLE pwn.t AS SELECT 1; --.out",
        'vmstat-q"; DROP TABLE collectors; --.out',
    ]


def flat(name: str) -> str:
    """Member names hold no '/' here (a '/' would make directories): the sentinel path's
    slashes become the division slash, the name stays one file."""
    return name.replace("/", "\u2215")


@pytest.fixture
def secret(tmp_path: Path, jail: Jail) -> tuple[Path, str]:
    token = "secret-" + jail.token
    path = tmp_path / "credentials.txt"
    path.write_text(f"aws_secret_access_key={token}\n")
    return path, token


def _all_output_text(out: Path) -> str:
    return "".join(
        p.read_text(encoding="utf-8", errors="replace") for p in out.iterdir() if p.is_file()
    )


# -- SQL in names -------------------------------------------------------------------------


@pytest.mark.parametrize("which", range(4))
def test_sql_in_a_member_name_is_only_a_name(
    jail: Jail, secret: tuple[Path, str], which: int
) -> None:
    path, token = secret
    name = flat(injections(jail, path)[which])
    bundle = write_tgz(jail.root / "b.tgz", [Member(f"b/{name}", VMSTAT)])
    out = analyze(bundle, jail.root / "out")
    out.assert_ok()
    row = out.by_file()[name]  # parsed under exactly its own name
    assert row["status"] == "parsed" and row["lines_parsed"] == 3
    assert (
        not Path(f"{jail.absolute}.csv").exists() and not Path(f"{jail.absolute}.duckdb").exists()
    )
    assert token not in _all_output_text(jail.root / "out")
    assert {t for t in out.doc["tables"]} >= {"vmstat"}


def test_sql_in_a_dmesg_member_name_keeps_the_oom_finding_and_its_log_lines(
    jail: Jail, secret: tuple[Path, str]
) -> None:
    path, token = secret
    name = flat(
        f"dmesg-a' OR source_file IN (SELECT content FROM read_text('{path}')) OR 'x'='y.log"
    )
    bundle = write_tgz(
        jail.root / "b.tgz", [Member(f"b/{name}", DMESG_OOM), *[Member("b/vmstat.out", VMSTAT)]]
    )
    out = analyze(bundle, jail.root / "out")
    out.assert_ok()
    kills = [f for f in out.doc["findings"] if f["key"] == "OOM_KILL"]
    assert kills and kills[0]["log_lines"], out.doc["findings"]
    assert {ln["source_file"] for ln in kills[0]["log_lines"]} == {name}
    assert token not in _all_output_text(jail.root / "out")


def test_a_missed_injection_cannot_read_or_write_files_the_connection_is_sealed(
    jail: Jail, secret: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A detector that pasted data into SQL (simulated) meets a connection that refuses
    every file access: its reads and writes fail, the analysis goes on."""
    path, token = secret
    import analyzer.analysis as analysis
    from analyzer.findings import NotEvaluated

    class Careless:  # what a detector with an injection bug would end up running
        NAME = "careless"

        @staticmethod
        def detect(ctx):  # type: ignore[no-untyped-def]
            try:
                ctx.con.sql(f"COPY (SELECT 1) TO '{jail.absolute}.csv'")
            except duckdb.PermissionException as e:
                return NotEvaluated("careless", f"refused: {e}")
            return NotEvaluated("careless", "wrote the file")

    class Reader(Careless):
        NAME = "reader"

        @staticmethod
        def detect(ctx):  # type: ignore[no-untyped-def]
            try:
                rows = ctx.con.sql(f"SELECT content FROM read_text('{path}')").fetchall()
            except duckdb.PermissionException as e:
                return NotEvaluated("reader", f"refused: {e}")
            return NotEvaluated("reader", f"read {rows}")

    monkeypatch.setattr(analysis, "DETECTORS", [*analysis.DETECTORS, Careless, Reader])
    out = analyze(
        write_tgz(jail.root / "b.tgz", [Member("b/vmstat.out", VMSTAT)]), jail.root / "out"
    )
    out.assert_ok()
    status = {d["detector"]: d["reason"] for d in out.doc["detectors"]}
    for name in ("careless", "reader"):
        assert status[name].startswith("refused: Permission Error"), status[name]
    assert not Path(f"{jail.absolute}.csv").exists()
    assert token not in _all_output_text(jail.root / "out")


def _stranger_db(path: Path, secret: Path) -> Path:
    """A .duckdb a stranger could send: `findings` is a view over a local file."""
    con = duckdb.connect(str(path))
    con.sql("CREATE TABLE bundle AS SELECT 'x' AS name, '0.1.0' AS analyzer_version")
    con.sql(f"CREATE VIEW findings AS SELECT content AS summary FROM read_text('{secret}')")
    con.close()
    return path


def test_query_on_a_strangers_database_does_not_read_local_files(
    jail: Jail, secret: tuple[Path, str]
) -> None:
    path, token = secret
    db = _stranger_db(jail.root / "stranger.duckdb", path)
    r = CliRunner().invoke(app, ["query", str(db), "SELECT * FROM findings"])
    assert r.exit_code == 2, r.output
    assert token not in r.stdout + r.stderr
    assert "--allow-file-access" in r.stderr and len(r.stderr.splitlines()) == 1
    # the user's own SQL is sealed too
    r = CliRunner().invoke(app, ["query", str(db), f"SELECT * FROM read_text('{path}')"])
    assert r.exit_code == 2 and token not in r.stdout + r.stderr
    r = CliRunner().invoke(app, ["query", str(db), f"COPY (SELECT 1) TO '{jail.absolute}.csv'"])
    assert r.exit_code == 2 and not Path(f"{jail.absolute}.csv").exists()


def test_query_reads_files_only_with_allow_file_access(
    jail: Jail, secret: tuple[Path, str]
) -> None:
    path, token = secret
    db = _stranger_db(jail.root / "stranger.duckdb", path)
    r = CliRunner().invoke(
        app, ["query", str(db), "SELECT * FROM findings", "--allow-file-access", "-f", "csv"]
    )
    assert r.exit_code == 0, r.output
    assert token in r.stdout  # the user asked for it


def test_export_and_diff_of_a_strangers_database_read_no_local_file(
    jail: Jail, secret: tuple[Path, str]
) -> None:
    path, token = secret
    db = _stranger_db(jail.root / "stranger.duckdb", path)
    r = CliRunner().invoke(app, ["export", str(db), str(jail.root / "exp"), "-q"])
    assert r.exit_code == 2, r.output
    assert token not in r.stdout + r.stderr
    exported = (
        [p for p in (jail.root / "exp").rglob("*") if p.is_file()]
        if (jail.root / "exp").exists()
        else []
    )
    assert all(token not in p.read_bytes().decode("latin-1") for p in exported)
    r = CliRunner().invoke(app, ["diff", str(db), str(db), "-o", str(jail.root / "d.html"), "-q"])
    assert token not in r.stdout + r.stderr
    if (jail.root / "d.html").exists():
        assert token not in (jail.root / "d.html").read_text()


def test_redact_and_fleet_treat_injected_names_as_names(
    jail: Jail, secret: tuple[Path, str]
) -> None:
    path, token = secret
    names = [flat(n) for n in injections(jail, path)]
    bundle = write_tgz(jail.root / "b.tgz", [Member(f"b/{n}", VMSTAT) for n in names])
    out = analyze(bundle, jail.root / "out", "--redact")
    out.assert_ok()
    assert token not in _all_output_text(jail.root / "out")
    r = CliRunner().invoke(
        app, ["fleet", str(bundle), str(bundle), "-o", str(jail.root / "fleet.html"), "-q"]
    )
    assert r.exit_code == 0, r.output
    assert token not in (jail.root / "fleet.html").read_text()
    assert not Path(f"{jail.absolute}.csv").exists()


# -- names are names ----------------------------------------------------------------------


def test_a_member_name_that_is_not_utf8_is_parsed_under_its_escaped_name(jail: Jail) -> None:
    bundle = tgz_raw_names(
        jail.root / "b.tgz", {b"b/vmstat\xff\xfe.out": VMSTAT, b"b/ok.out": VMSTAT}
    )
    out = analyze(bundle, jail.root / "out")
    out.assert_ok()
    row = out.by_file()["vmstat\\xff\\xfe.out"]
    assert row["status"] == "parsed" and row["lines_parsed"] == 3
    assert out.doc["tables"]["vmstat"] == 6
    assert "vmstat\\xff\\xfe.out" in out.report.read_text()


def test_a_bundle_path_that_is_not_utf8_is_analysed_and_shown_escaped(jail: Jail) -> None:
    raw = os.fsencode(str(jail.root)) + b"/caps\xe9.tgz"
    write_tgz(Path(os.fsdecode(raw)), [Member("b/vmstat.out", VMSTAT)])
    out = analyze(Path(os.fsdecode(raw)), jail.root / "out")
    out.assert_ok()
    assert out.doc["bundle"]["name"] == "caps\\xe9"
    assert out.doc["bundle"]["source_path"].endswith("/caps\\xe9.tgz")


def test_a_directory_bundle_with_non_utf8_names_reads_each_file(jail: Jail) -> None:
    d = os.fsencode(str(jail.root / "bundle"))
    os.mkdir(d)
    with open(d + b"/vm\xff.out", "wb") as f:
        f.write(VMSTAT)
    with open(d + b"/vm2.out", "wb") as f:
        f.write(VMSTAT)
    out = analyze(Path(os.fsdecode(d)), jail.root / "out")
    out.assert_ok()
    assert out.by_file()["vm\\xff.out"]["lines_parsed"] == 3
    assert out.doc["tables"]["vmstat"] == 6


@pytest.mark.parametrize(
    "name, shown",
    [
        ("vm\u202estat.out", "vm\\u202estat.out"),  # right-to-left override
        ("vm\u2066stat\u2069.out", "vm\\u2066stat\\u2069.out"),  # isolate
        ("vm\x1b[2Jstat.out", "vm\\x1b[2Jstat.out"),  # ANSI escape
        ("vm\nfake.out", "vm\\nfake.out"),  # newline
        ("vm\u200bstat.out", "vm\\u200bstat.out"),  # zero-width space
    ],
)
def test_control_and_bidi_characters_in_names_are_shown_escaped(
    jail: Jail, name: str, shown: str
) -> None:
    bundle = write_tgz(jail.root / "b.tgz", [Member(f"b/{name}", VMSTAT)])
    out = analyze(bundle, jail.root / "out")
    out.assert_ok()
    assert out.by_file()[shown]["status"] == "parsed"
    html = out.report.read_text()
    raw = name.replace("\n", "")  # the newline itself may appear in markup
    assert shown in html and raw not in html


@pytest.mark.parametrize(
    "names", [("x[1].out", "x1.out"), ("v*", "va"), ("v?.out", "v1.out"), ("[ab].out", "a.out")]
)
def test_glob_characters_in_names_are_not_patterns(jail: Jail, names: tuple[str, str]) -> None:
    """Each file is read from exactly its own bytes: a pattern would read the other one
    too, or none."""
    odd, plain = names
    short = b"".join(VM_LINES[:3])  # one data row
    d = jail.root / "bundle"
    d.mkdir()
    (d / odd).write_bytes(VMSTAT)
    (d / plain).write_bytes(short)
    out = analyze(d, jail.root / "out")
    out.assert_ok()
    rows = out.by_file()
    assert rows[odd]["lines_parsed"] == 3 and rows[plain]["lines_parsed"] == 1
    assert out.doc["tables"]["vmstat"] == 4


# -- one bad item costs only itself --------------------------------------------------------


@pytest.mark.parametrize(
    "stamp", ["9999-12-31 23:59:59", "2100-01-01 00:00:00", "1969-12-31 23:59:59"]
)
def test_a_row_stamped_out_of_range_is_dropped_and_counted(jail: Jail, stamp: str) -> None:
    bundle = write_tgz(jail.root / "b.tgz", [Member("b/vmstat.out", vm_with_stamp(1, stamp))])
    out = analyze(bundle, jail.root / "out")
    out.assert_ok()
    row = out.by_file()["vmstat.out"]
    assert row["status"] == "partial" and row["lines_parsed"] == 2 and row["lines_skipped"] == 1
    assert "timestamp outside" in row["skip_reasons"]
    assert out.doc["tables"]["vmstat"] == 2
    assert out.doc["bundle"]["end_utc"].startswith("2026-")


def test_a_row_of_year_9999_among_good_ones_does_not_stop_the_detectors(jail: Jail) -> None:
    dmesg = (
        DMESG_OOM
        + b"9999-12-31T23:59:59,000000+00:00 NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
    )
    files = [
        Member("b/vmstat.out", vm_with_stamp(2, "9999-12-31 23:59:59")),
        Member("b/dmesg.log", dmesg),
    ]
    out = analyze(write_tgz(jail.root / "b.tgz", files), jail.root / "out")
    out.assert_ok()
    assert any(f["key"] == "OOM_KILL" for f in out.doc["findings"])
    assert all(
        d["status"] == "evaluated" or "internal error" not in (d["reason"] or "")
        for d in out.doc["detectors"]
    )


def _without_root_read(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` so that file permissions apply: as root, without the capabilities
    that bypass them (util-linux ``setpriv``); otherwise as it is."""
    if os.geteuid() == 0:
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", *cmd]
    env = dict(os.environ, TMPDIR=str(cwd))
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _analyze_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from analyzer.cli import analyze_main; analyze_main()", *args]


@pytest.mark.slow
def test_an_unreadable_file_or_directory_in_a_directory_bundle_is_refused_with_the_os_reason(
    tmp_path: Path,
) -> None:
    work = tmp_path / "w"
    d = work / "bundle"
    (d / "locked").mkdir(parents=True)
    (d / "vmstat.out").write_bytes(VMSTAT)
    (d / "secret.out").write_bytes(VMSTAT)
    (d / "locked" / "inner.out").write_bytes(VMSTAT)
    os.chmod(d / "secret.out", 0)
    os.chmod(d / "locked", 0)
    try:
        r = _without_root_read(_analyze_cmd(str(d), "-q", "-o", "r.html", "--json", "r.json"), work)
        assert r.returncode == 0, r.stderr
        doc = json.loads((work / "r.json").read_text())
        rows = {c["file"]: c for c in doc["collectors"]}
        assert rows["secret.out"]["status"] == "refused"
        assert rows["secret.out"]["reason"] == "cannot read: Permission denied"
        assert rows["locked"]["status"] == "refused"
        assert rows["locked"]["reason"] == "cannot list: Permission denied"
        assert rows["vmstat.out"]["lines_parsed"] == 3
        assert "refused secret.out: cannot read" in r.stderr
    finally:
        os.chmod(d / "secret.out", 0o644)
        os.chmod(d / "locked", 0o755)


# -- manifest vs data ------------------------------------------------------------------------


def _manifest(start: str, end: str) -> bytes:
    return json.dumps(
        {
            "format": "hindsight-bundle",
            "format_version": 1,
            "capture_version": "0.1.0",
            "host": {"hostname": "gpu07"},
            "start_utc": start,
            "end_utc": end,
            "interval_s": 1,
            "collectors": [
                {"name": "vmstat", "tool": "vmstat", "status": "ok", "output": "vmstat.out"}
            ],
        }
    ).encode()


def test_a_manifest_window_that_misses_the_data_yields_to_the_data(jail: Jail) -> None:
    files = [
        Member("b/manifest.json", _manifest("2020-01-01T00:00:00Z", "2020-01-01T00:10:00Z")),
        Member("b/vmstat.out", VMSTAT),
        Member("b/dmesg.log", DMESG_OOM),
    ]
    out = analyze(write_tgz(jail.root / "b.tgz", files), jail.root / "out")
    out.assert_ok()
    b = out.doc["bundle"]
    assert (
        b["start_utc"].startswith("2026-11-29") and "the data's own span is analysed" in b["notes"]
    )
    assert (
        "the data&#39;s own span is analysed" in out.report.read_text()
        or "the data's own span is analysed" in out.report.read_text()
    )
    status = {d["detector"]: d for d in out.doc["detectors"]}
    assert status["cpu_contention"]["status"] == "evaluated"
    assert any(f["key"] == "OOM_KILL" for f in out.doc["findings"])


def test_a_manifest_window_that_holds_the_data_is_kept(jail: Jail) -> None:
    files = [
        Member("b/manifest.json", _manifest("2026-11-29T17:23:30Z", "2026-11-29T17:23:45Z")),
        Member("b/vmstat.out", VMSTAT),
    ]
    out = analyze(write_tgz(jail.root / "b.tgz", files), jail.root / "out")
    out.assert_ok()
    b = out.doc["bundle"]
    assert b["start_utc"] == "2026-11-29T17:23:30Z" and "own span" not in (b["notes"] or "")


# -- the guard rails of the check itself ---------------------------------------------------


def test_every_shipped_reader_opens_by_exact_path() -> None:
    """No polars reader is handed a path with globbing on (the default)."""
    import ast

    repo = Path(__file__).resolve().parents[2]
    bad = []
    for p in sorted((repo / "analyzer").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("scan_lines", "scan_csv", "scan_ndjson", "scan_parquet")
                and not any(
                    k.arg == "glob" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in node.keywords
                )
            ):
                bad.append(f"{p.relative_to(repo)}:{node.lineno}")
    assert not bad, bad


# -- bounded whatever the bundle holds -----------------------------------------------------


def test_thousands_of_files_and_megabyte_lines_keep_the_report_small(jail: Jail) -> None:
    """1 500 unrecognised files with long names, and kernel-log lines of ~0.9 MB: the page
    lists the first rows of the coverage and a clipped line; the tables keep everything."""
    long_line = (
        b"2026-11-29T17:25:08,000000+00:00 INFO: task x:1 blocked for more than 120 seconds. "
        + b"A" * 900_000
        + b"\n"
    )
    members = [Member("b/vmstat.out", VMSTAT), Member("b/dmesg.log", DMESG_OOM + long_line * 4)]
    members += [Member(f"b/f{i:05d}-{'x' * 150}.txt", b"hello %d\n" % i) for i in range(1500)]
    out = analyze(write_tgz(jail.root / "b.tgz", members), jail.root / "out")
    out.assert_ok()
    size = out.report.stat().st_size
    assert size < 5_000_000, size
    html = out.report.read_text()
    assert "more files not listed here" in html and "more characters in finding_log_lines" in html
    assert len(out.doc["collectors"]) == 1502
