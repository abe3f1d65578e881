"""Docs match the code: tables.md is generated and fresh, every stored column is
documented, every registry entry has fixtures, every command has help with an example."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from analyzer import tablesdoc
from analyzer.cli import app
from analyzer.parsers import PARSERS
from analyzer.pipeline import Options, run
from analyzer.store import STORE_TABLES, declared_tables

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"


def test_tables_doc_is_generated_and_fresh() -> None:
    assert (ROOT / "docs" / "tables.md").read_text(encoding="utf-8") == tablesdoc.render(), (
        "docs/tables.md is stale: run python -m analyzer.tablesdoc"
    )


def test_every_stored_table_and_column_is_declared_and_documented(tmp_path: Path) -> None:
    db = tmp_path / "sample.duckdb"
    run(SAMPLE, Options(db=db))
    doc = (ROOT / "docs" / "tables.md").read_text(encoding="utf-8")
    declared = declared_tables()
    con = duckdb.connect(str(db), read_only=True)
    names = [r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()]
    assert {"bundle", "collectors", "vmstat", "psi", "gpu_dmon", "iostat_device"} <= set(names)
    for name in names:
        assert name in declared, f"table {name} exists in the database but is not declared"
        assert f"## `{name}`" in doc
        cols = [r[0] for r in con.sql(f'DESCRIBE "{name}"').fetchall()]
        expected = [c.name for c in declared[name].columns]
        if name not in STORE_TABLES:  # the store adds source_file to every source table
            assert cols[-1] == "source_file", name
            cols = cols[:-1]
        assert cols == expected, name
        for c in expected:
            assert f"| `{c}` |" in doc


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_every_registered_parser_has_fixtures_and_a_docstring(tool: str) -> None:
    module = PARSERS[tool]
    assert module.__doc__ and len(module.__doc__) > 200, f"{tool}: module docstring missing"
    assert module.TABLES, f"{tool}: no declared tables"
    snapshots = {"host_config", "ps", "df", "interrupts", "buddyinfo"}
    folders = {"nvidia_dmon": "nvidia-smi", "nvidia_smi_q": "nvidia-smi"}
    folder = "snapshots" if tool in snapshots else folders.get(tool, tool)
    fixtures = ROOT / "tests" / "fixtures" / folder
    assert fixtures.is_dir() and (fixtures / "PROVENANCE.md").is_file(), f"{tool}: no fixtures"
    assert len(list(fixtures.iterdir())) > 1, f"{tool}: no fixture besides PROVENANCE.md"


def _commands() -> list[str]:
    return sorted(c.name or c.callback.__name__ for c in app.registered_commands)


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_help_with_an_example(command: str) -> None:
    if command == "capture":  # passes every argument to the script; its help is the script's
        script = ROOT / "capture" / "hindsight-capture.sh"
        out = subprocess.run(["sh", str(script), "-h"], capture_output=True, text=True, timeout=30)
        assert "Example" in out.stdout
        return
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output
    docs = (ROOT / "README.md").read_text() + "".join(
        p.read_text() for p in (ROOT / "docs").glob("*.md")
    )
    # Documented as a command (`hindsight CMD` or `CMD ...` in code), not as any substring.
    assert re.search(rf"hindsight {re.escape(command)}\b|`{re.escape(command)}[ `]", docs), command


def test_capture_script_command_prints_the_shipped_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "capture-script"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert out.stdout == (ROOT / "capture" / "hindsight-capture.sh").read_bytes()


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_capture_command_passes_arguments_to_the_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "capture", "-h"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "Usage: hindsight-capture.sh" in out.stdout


def test_dash_h_and_version_work_and_the_help_example_exists() -> None:
    """Issue #23: -h is --help, --version prints the version, and the example in
    `analyze --help` names a bundle that exists in the repository."""
    from analyzer import __version__

    for cmd in (["hindsight", "-h"], ["analyze", "-h"], ["hindsight", "analyze", "-h"]):
        entry = "analyzer.cli:analyze_main" if cmd[0] == "analyze" else "analyzer.cli:main"
        mod, fn = entry.split(":")
        code = f"import sys; sys.argv = {cmd!r}; from {mod} import {fn}; {fn}()"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0 and "Usage" in out.stdout, (cmd, out.stderr)
    for cmd in (["hindsight", "--version"], ["analyze", "-V"]):
        fn = "analyze_main" if cmd[0] == "analyze" else "main"
        code = f"import sys; sys.argv = {cmd!r}; from analyzer.cli import {fn}; {fn}()"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0 and out.stdout.strip() == f"hindsight {__version__}", out
    from analyzer.cli import ANALYZE_HELP

    examples = re.findall(r"analyze (\S+\.tgz)", ANALYZE_HELP)
    assert examples and all((ROOT / e).is_file() for e in examples), examples


def test_shell_completion_can_be_shown_and_completes_commands() -> None:
    """Issue #23: `hindsight --install-completion` exists (documented in the README); the
    bash completion it installs completes the commands."""
    env = {"_HINDSIGHT_COMPLETE": "complete_bash", "COMP_WORDS": "hindsight an", "COMP_CWORD": "1"}
    code = "import sys; sys.argv = ['hindsight']; from analyzer.cli import main; main()"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert "analyze" in out.stdout.split(), out
    assert "--install-completion" in (ROOT / "README.md").read_text()
