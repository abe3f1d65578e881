"""The `hindsight` command line. Thin: parse arguments, call the library, map errors.

Exit codes: 0 success, 1 internal error (short message; ``--debug`` shows the
traceback), 2 unusable input (one clear line on stderr), 3 a finding at or above
``--fail-on`` exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from analyzer import __version__
from analyzer.errors import HindsightError

EXIT_INTERNAL = 1
EXIT_INPUT = 2

app = typer.Typer(
    name="hindsight",
    help="Hindsight: offline postmortem analyzer for Linux GPU hosts.\n\nExample: hindsight analyze bundle.tgz",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ANALYZE_HELP = """Analyse a capture bundle and write a self-contained HTML incident report.

BUNDLE is a .tgz / .tar.gz / .tar made by hindsight-capture.sh, or a directory of tool
outputs (hand-made bundles work: vmstat, iostat, dmesg... files, any names).

Example:

    analyze samples/demo-checkpoint-stall.tgz -o report.html --db demo.duckdb
"""


def _fail(message: str, code: int) -> None:
    typer.echo(f"hindsight: error: {message}", err=True)
    raise typer.Exit(code)


def analyze(
    bundle: Annotated[Path, typer.Argument(help="bundle archive (.tgz/.tar.gz/.tar) or directory", show_default=False)],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="report path (default: ./BUNDLE-NAME.report.html)")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="also keep the DuckDB database in this file")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write findings and coverage as JSON ('-' for stdout)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="any refused archive member is fatal (exit 2)")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks of internal errors")] = False,
) -> None:
    from analyzer.bundle import bundle_name
    from analyzer.pipeline import Options, run
    from analyzer.summary import format_summary

    report = output or Path.cwd() / f"{bundle_name(bundle.resolve() if bundle.exists() else bundle)}.report.html"
    progress = None
    if not quiet and sys.stderr.isatty():
        progress = lambda msg: typer.echo(f"  … {msg}", err=True)  # noqa: E731
    options = Options(report=report, db=db, json_path=json_out, strict=strict, debug=debug, progress=progress)
    try:
        result = run(bundle, options)
    except HindsightError as e:
        _fail(str(e), EXIT_INPUT)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as e:
        if debug:
            raise
        _fail(f"internal error: {type(e).__name__}: {str(e)[:300]} (rerun with --debug for the traceback)", EXIT_INTERNAL)
    for name, reason in result_refusals(result):
        typer.echo(f"hindsight: refused {name}: {reason}", err=True)
    if not quiet:
        typer.echo(format_summary(result))


def result_refusals(result) -> list[tuple[str, str]]:
    return [(r["file"], r.get("reason") or "") for r in result.collectors if r.get("status") == "refused"]


app.command("analyze", help=ANALYZE_HELP)(analyze)


def _capture_script() -> Path:
    """The capture script: shipped in the wheel, or in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_capture" / "hindsight-capture.sh", here.parent / "capture" / "hindsight-capture.sh"):
        if candidate.is_file():
            return candidate
    raise HindsightError("the capture script is not part of this installation")


@app.command("capture-script")
def capture_script() -> None:
    """Print the capture script, to copy it to a host.

    Example: hindsight capture-script | ssh gpu01 'cat > /tmp/hc.sh && sh /tmp/hc.sh -d 120'
    """
    try:
        sys.stdout.write(_capture_script().read_text(encoding="utf-8"))
    except HindsightError as e:
        _fail(str(e), EXIT_INPUT)


@app.command(
    "capture",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def capture(ctx: typer.Context) -> None:
    """Run the capture script on this host with the same arguments (-h for its help).

    Example: sudo hindsight capture -d 120 --pid 4242
    """
    try:
        script = _capture_script()
    except HindsightError as e:
        _fail(str(e), EXIT_INPUT)
    rc = subprocess.call(["sh", str(script), *ctx.args])
    raise typer.Exit(rc)


@app.command("version")
def version() -> None:
    """Print the Hindsight version.

    Example: hindsight version
    """
    typer.echo(__version__)


def main() -> None:
    """Console script `hindsight`."""
    os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count() or 2))
    app()


analyze_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
analyze_app.command(help=ANALYZE_HELP)(analyze)


def analyze_main() -> None:
    """Console script `analyze` = `hindsight analyze`."""
    analyze_app()
