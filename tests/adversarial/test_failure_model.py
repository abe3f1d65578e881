"""One failure model end to end. The library raises typed errors (`HindsightError` and
its subclasses); `analyzer/cli.py` turns them into one line on stderr and exit code 2.
Anything else is an internal error: exit 1 and a short message, the traceback only with
``--debug``. A parser that crashes costs only its own file.

Internal errors are provoked by fault injection (monkeypatching one function to raise),
since the product has no known crash left to trigger them with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Jail
from hostile import ERROR_PREFIX, VMSTAT, analyze

import analyzer.pipeline
from analyzer.parsers import PARSERS


def bundle_dir(jail: Jail) -> Path:
    d = jail.root / "bundle"
    d.mkdir()
    (d / "vmstat.out").write_bytes(VMSTAT)
    (d / "kern.log").write_bytes(b"[    1.000000] usb 1-1: new high-speed USB device\n")
    return d


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda j: j.root / "nope.tgz", "no such file or directory"),
        (lambda j: (j.root / "empty-dir").mkdir() or j.root / "empty-dir", "empty directory"),
        (lambda j: Path("/dev/null"), "not a regular file or directory"),
    ],
    ids=["missing", "empty-directory", "device"],
)
def test_unusable_input_is_one_line_and_exit_2(jail: Jail, setup, message: str) -> None:  # type: ignore[no-untyped-def]
    analyze(setup(jail), jail.root / "out").assert_clean_error(message)


def test_unwritable_outputs_fail_early_with_exit_2(jail: Jail) -> None:
    d = bundle_dir(jail)
    (jail.root / "a-file").write_text("x")
    out = jail.root / "out"
    for args, message in (
        (["-o", str(jail.root)], "it is a directory"),
        (["--db", str(jail.root / "a-file" / "x.duckdb")], "is not a directory"),
        (["--json", str(jail.root)], "it is a directory"),
    ):
        r = analyze(d, out, *args)
        assert r.code == 2 and message in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_terminal_gets_no_control_characters_from_the_bundle(jail: Jail) -> None:
    """Member names may carry ANSI escapes or newlines: stderr shows them escaped."""
    from hostile import Member, valid, write_tgz

    evil = "b/\x1b]52;c;cHduZWQ=\x07\x1b[2J\nfake: line\u202e"
    bundle = write_tgz(jail.root / "b.tgz", [*valid(), Member(evil, type=b"6")])
    r = analyze(bundle, jail.root / "out")
    r.assert_ok()
    assert len(r.stderr.splitlines()) == 1
    assert "\x1b" not in r.stderr and "\u202e" not in r.stderr
    assert "\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\nfake: line\\u202e" in r.stderr


def test_a_crashing_parser_costs_only_its_file(jail: Jail, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(path: Path, ctx: object) -> None:
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(PARSERS["dmesg"], "parse", boom)
    r = analyze(bundle_dir(jail), jail.root / "out")
    r.assert_ok()
    assert r.by_file()["vmstat.out"]["status"] == "parsed"
    row = r.by_file()["kern.log"]
    assert row["status"] == "failed"
    assert row["reason"] == "internal error in the dmesg parser: ZeroDivisionError: injected"
    r = analyze(jail.root / "bundle", jail.root / "out", "--debug")
    assert r.code == 1  # --debug: the parser's exception is not swallowed


def test_internal_error_is_short_and_exit_1(jail: Jail, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(source: Path, options: object, renderers: object = None) -> None:
        raise KeyError("x" * 5000)

    monkeypatch.setattr(analyzer.pipeline, "run", boom)
    r = analyze(bundle_dir(jail), jail.root / "out")
    assert r.code == 1
    assert r.stderr.startswith(ERROR_PREFIX + "internal error: KeyError: ")
    assert r.stderr.rstrip().endswith("(rerun with --debug for the traceback)")
    assert len(r.stderr.splitlines()) == 1 and len(r.stderr) < 600
    assert "Traceback" not in r.stderr + r.stdout


INJECT = """
import sys, analyzer.pipeline
def boom(source, options, renderers=None):
    raise RuntimeError("injected fault")
analyzer.pipeline.run = boom
sys.argv = ["analyze", *sys.argv[1:]]
from analyzer.cli import analyze_main
analyze_main()
"""


@pytest.mark.parametrize("debug", [False, True])
def test_traceback_reaches_the_user_only_with_debug(tmp_path: Path, debug: bool) -> None:
    """A real process, a real stderr: what a user's terminal would show."""
    d = tmp_path / "b"
    d.mkdir()
    (d / "vmstat.out").write_bytes(VMSTAT)
    args = [sys.executable, "-c", INJECT, str(d), "-o", str(tmp_path / "r.html")]
    r = subprocess.run(
        args + (["--debug"] if debug else []), capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 1
    if debug:
        assert "Traceback (most recent call last)" in r.stderr and "injected fault" in r.stderr
    else:
        assert r.stderr == (
            "hindsight: error: internal error: RuntimeError: injected fault "
            "(rerun with --debug for the traceback)\n"
        )
