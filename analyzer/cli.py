"""The `hindsight` command line. Thin: parse arguments, call the library, map errors.

The composition root: the one analyzer module that imports ``reports``, to hand the
analysis its renderers (`reports.render`); the analysis itself returns data.

Exit codes: 0 success, 1 internal error (short message; ``--debug`` shows the
traceback), 2 unusable input (one clear line on stderr), 3 a finding at or above
``--fail-on`` exists, 130 / 143 interrupted by SIGINT / SIGTERM (`analyzer.cleanup`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from analyzer import __version__
from analyzer.bundle import Limits
from analyzer.errors import HindsightError
from analyzer.outputs import print_to

EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_FINDING = 3
SEVERITY_RANK = {"info": 0, "minor": 1, "major": 2, "critical": 3}


class Severity(StrEnum):
    """Finding severities, lowest first (docs/detectors.md)."""

    info = "info"
    minor = "minor"
    major = "major"
    critical = "critical"


_D = Limits()  # defaults, shown in --help
_MIB = 1 << 20

app = typer.Typer(
    name="hindsight",
    help="Hindsight: offline postmortem analyzer for Linux GPU hosts.\n\nExample: hindsight analyze bundle.tgz",
    no_args_is_help=True,
    add_completion=True,  # hindsight --install-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

ANALYZE_HELP = """Analyse a capture bundle and write a self-contained HTML incident report.

BUNDLE is a .tgz / .tar.gz / .tar made by hindsight-capture.sh, or a directory of tool
outputs (hand-made bundles work: vmstat, iostat, dmesg... files, any names).

Example:

    analyze samples/h200-checkpoint-stall.tgz -o report.html --db demo.duckdb
"""


def _say(text: str, err: bool = False) -> None:
    """Every line for the terminal (stdout, or stderr with ``err``); a reader that closed
    the pipe early (``| head``) silences the rest, it does not change the exit code."""
    print_to(sys.stderr if err else sys.stdout, text + "\n")


def _fail(message: str, code: int) -> None:
    _say(f"hindsight: error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def one_line(text: str, limit: int = 1000) -> str:
    """Text from a bundle made safe for a terminal: control characters (newlines, ANSI
    escapes, bidi overrides) and bytes that are not UTF-8 shown as ``\\xNN``/``\\uNNNN``
    (`analyzer.names.escape_text`), at most ``limit`` characters."""
    from analyzer.names import escape_text

    text = escape_text(str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _limits(**given: float | None) -> Limits:
    """`Limits` from the command-line bounds (MiB/KiB options converted to bytes)."""
    scale = {"max_member_bytes": _MIB, "max_total_bytes": _MIB, "ratio_floor_bytes": _MIB}
    scale["max_line_bytes"] = 1 << 10
    kw = {k: v * scale[k] if k in scale else v for k, v in given.items() if v is not None}
    return Limits(**{k: v if k == "max_ratio" else max(1, int(v)) for k, v in kw.items()})


class Role(StrEnum):
    """``analyze --role``: how the configuration audit judges the host (auto: inferred)."""

    auto = "auto"
    training = "training"
    inference = "inference"


def analyze(
    bundle: Annotated[
        Path,
        typer.Argument(help="bundle archive (.tgz/.tar.gz/.tar) or directory", show_default=False),
    ],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="report path (default: ./BUNDLE-NAME.report.html)"),
    ] = None,
    db: Annotated[
        Path | None, typer.Option("--db", help="also keep the DuckDB database in this file")
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="write findings and coverage as JSON ('-' for stdout)"),
    ] = None,
    md_out: Annotated[
        Path | None,
        typer.Option(
            "--md", help="also write a Markdown summary for a ticket body ('-' for stdout)"
        ),
    ] = None,
    role: Annotated[
        Role,
        typer.Option("--role", help="audit the host configuration as a training or inference host"),
    ] = Role.auto,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="list every input file in the summary")
    ] = False,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="any refused member or over-bound file is fatal (exit 2)"),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks of internal errors")
    ] = False,
    max_members: Annotated[
        int | None,
        typer.Option("--max-members", min=1, help=f"bound: archive members ({_D.max_members})"),
    ] = None,
    max_file_mb: Annotated[
        float | None,
        typer.Option(
            "--max-file-mb", min=1e-6, help=f"bound: MiB per file ({_D.max_member_bytes // _MIB})"
        ),
    ] = None,
    max_total_mb: Annotated[
        float | None,
        typer.Option(
            "--max-total-mb",
            min=1e-6,
            help=f"bound: MiB extracted in all ({_D.max_total_bytes // _MIB})",
        ),
    ] = None,
    max_ratio: Annotated[
        float | None,
        typer.Option(
            "--max-ratio", min=1.0, help=f"bound: uncompressed/compressed size ({_D.max_ratio:g})"
        ),
    ] = None,
    ratio_floor_mb: Annotated[
        float | None,
        typer.Option(
            "--ratio-floor-mb",
            min=0,
            help=f"MiB extracted before --max-ratio applies ({_D.ratio_floor_bytes // _MIB})",
        ),
    ] = None,
    max_line_kb: Annotated[
        float | None,
        typer.Option(
            "--max-line-kb", min=1e-3, help=f"bound: KiB per line ({_D.max_line_bytes >> 10})"
        ),
    ] = None,
    max_lines: Annotated[
        int | None,
        typer.Option("--max-lines", min=1, help=f"bound: lines per file ({_D.max_lines})"),
    ] = None,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact",
            help="analyse a redacted copy (docs/redaction.md); mapping beside the report",
        ),
    ] = False,
    redact_pattern: Annotated[
        list[str] | None,
        typer.Option("--redact-pattern", help="with --redact: also mask this regex (repeatable)"),
    ] = None,
    fail_on: Annotated[
        Severity | None,
        typer.Option(
            "--fail-on",
            help="exit 3 when a finding at or above this severity exists (for automation)",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="let --db replace a file that is not a database Hindsight wrote"
        ),
    ] = False,
    app_series: Annotated[
        list[Path] | None,
        typer.Option(
            "--app-series",
            help="the application's own series, CSV or JSONL with a time column (repeatable; docs/symptoms.md)",
        ),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option("--tz", help="time zone of --app-series times written without one (e.g. UTC)"),
    ] = None,
) -> None:
    from analyzer.bundle import bundle_name
    from analyzer.pipeline import Options, run
    from analyzer.summary import format_summary
    from reports.render import HOST

    report = (
        output
        or Path.cwd()
        / f"{bundle_name(bundle.resolve() if bundle.exists() else bundle)}.report.html"
    )
    progress = None
    if not quiet and sys.stderr.isatty():
        from analyzer.progress import Progress

        progress = Progress(clean=one_line)
    options = Options(
        report=report, db=db, json_path=json_out, strict=strict, debug=debug, progress=progress
    )
    options.markdown, options.role, options.force = md_out, role.value, force
    options.app_series, options.tz = list(app_series or []), tz
    to_stdout = [
        n for n, p in (("-o", output), ("--json", json_out), ("--md", md_out)) if str(p) == "-"
    ]
    if len(to_stdout) > 1:
        _fail(f"only one output can go to stdout ('-'), not {' and '.join(to_stdout)}", EXIT_INPUT)
    options.limits = _limits(
        max_members=max_members,
        max_member_bytes=max_file_mb,
        max_total_bytes=max_total_mb,
        max_ratio=max_ratio,
        ratio_floor_bytes=ratio_floor_mb,
        max_line_bytes=max_line_kb,
        max_lines=max_lines,
    )
    redaction = None
    if redact or redact_pattern:
        from analyzer.redact import MAP_SUFFIX, redact_for_analysis

        try:
            redaction = redact_for_analysis(bundle, redact_pattern or [], options.limits)
        except HindsightError as e:
            _fail(str(e), EXIT_INPUT)
        options.inputs = [bundle]  # the original: no output may overwrite it either
        bundle = redaction.output
        options.report = report = output or Path.cwd() / f"{redaction.name}.report.html"
    try:
        try:
            result = run(bundle, options, HOST)
        finally:
            if progress is not None:
                progress.close()
            if redaction is not None:  # the redacted copy: analysed, no longer needed
                from analyzer.cleanup import remove

                remove(redaction.output.parent)
    except HindsightError as e:
        _fail(str(e), EXIT_INPUT)
    except KeyboardInterrupt:
        _fail("interrupted (SIGINT)", 130)
    except Exception as e:
        if debug:
            raise
        _fail(
            f"internal error: {type(e).__name__}: {str(e)[:300]} (rerun with --debug for the traceback)",
            EXIT_INTERNAL,
        )
    for name, reason in result_refusals(result):
        _say(f"hindsight: refused {one_line(name, 300)}: {one_line(reason)}", err=True)
    if redaction is not None:
        try:
            redaction.write_mapping(report.with_name(report.name + MAP_SUFFIX))
        except HindsightError as e:
            _fail(str(e), EXIT_INPUT)
        if not quiet:
            _say(f"hindsight: redaction mapping (private): {redaction.mapping}", err=True)
    if not quiet:  # stdout carries only the document when --json/--md write there
        summary = "\n".join(map(one_line, format_summary(result, verbose).splitlines()))
        _say(summary, err=bool(to_stdout))
    if fail_on is not None and any(
        SEVERITY_RANK.get(str(f.get("severity")), -1) >= SEVERITY_RANK[fail_on.value]
        for f in result.findings
    ):
        raise typer.Exit(EXIT_FINDING)


def result_refusals(result) -> list[tuple[str, str]]:
    return [
        (r["file"], r.get("reason") or "")
        for r in result.collectors
        if r.get("status") == "refused"
    ]


app.command("analyze", help=ANALYZE_HELP)(analyze)


@app.command("redact")
def redact_command(
    bundle: Annotated[Path, typer.Argument(help="bundle archive or directory", show_default=False)],
    output: Annotated[Path, typer.Option("-o", "--output", help="the redacted bundle (.tgz)")],
    redact_pattern: Annotated[
        list[str] | None,
        typer.Option("--redact-pattern", help="also mask every match of this regex (repeatable)"),
    ] = None,
    mapping: Annotated[
        Path | None,
        typer.Option("--map", help="mapping file (default: OUTPUT.redaction-map.json)"),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors")] = False,
) -> None:
    """Write a copy of a bundle with host names, IP/MAC addresses, user names and home
    paths masked, the same token for the same value everywhere (docs/redaction.md).
    The token -> original mapping is written beside the output, never inside it.

    Example: hindsight redact bundle.tgz -o clean.tgz --redact-pattern 'proj-[a-z]+'
    """
    from analyzer.redact import default_mapping_path, redact_bundle

    result = _guarded(
        lambda: redact_bundle(
            bundle,
            output,
            patterns=redact_pattern or [],
            mapping=mapping or default_mapping_path(output),
        ),
        False,
    )
    if not quiet:
        _say("\n".join(map(one_line, result.summary().splitlines())), err=True)


def _capture_script() -> Path:
    """The capture script: shipped in the wheel, or in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (
        here / "_capture" / "hindsight-capture.sh",
        here.parent / "capture" / "hindsight-capture.sh",
    ):
        if candidate.is_file():
            return candidate
    raise HindsightError("the capture script is not part of this installation")


@app.command("capture-script")
def capture_script() -> None:
    """Print the capture script, to copy it to a host.

    Example: hindsight capture-script | ssh gpu01 'cat > /tmp/hc.sh && sh /tmp/hc.sh -d 120'
    """
    try:
        print_to(sys.stdout, _capture_script().read_text(encoding="utf-8"))
    except HindsightError as e:
        _fail(str(e), EXIT_INPUT)


@app.command(
    "capture",
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
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


def _guarded(call, debug: bool):
    """Run ``call()``; HindsightError -> exit 2, other errors -> exit 1 (traceback with --debug)."""
    try:
        return call()
    except HindsightError as e:
        _fail(str(e), EXIT_INPUT)
    except KeyboardInterrupt:
        _fail("interrupted (SIGINT)", 130)
    except Exception as e:
        if debug:
            raise
        if type(e).__name__ == "PermissionException":  # duckdb's, from a sealed connection
            first = str(e).splitlines()[0][:300]
            _fail(
                f"refused: the SQL or a view of the database reads or writes a file ({first}); "
                "rerun with --allow-file-access to allow it (docs/security.md)",
                EXIT_INPUT,
            )
        _fail(
            f"internal error: {type(e).__name__}: {str(e)[:300]} (rerun with --debug)",
            EXIT_INTERNAL,
        )


#: ``--allow-file-access`` of query, export and diff (docs/security.md)
AllowFiles = Annotated[
    bool,
    typer.Option(
        "--allow-file-access",
        help="let SQL read and write files (read_csv, COPY, views of a .duckdb over files); "
        "off: the connection cannot touch the file system",
    ),
]


def _progress(quiet: bool):
    if quiet or not sys.stderr.isatty():
        return None
    return lambda msg: _say(f"  … {one_line(msg)}", err=True)


@app.command("query")
def query_command(
    source: Annotated[
        Path,
        typer.Argument(
            help="bundle, analyze --db file, export or fleet dataset directory", show_default=False
        ),
    ],
    sql: Annotated[
        str | None,
        typer.Argument(help="SQL (DuckDB dialect) over the analysed tables", show_default=False),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="table | csv | json | parquet")
    ] = "table",
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="write here instead of stdout (needed for parquet)"),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks of internal errors")
    ] = False,
    allow_file_access: AllowFiles = False,
    tables: Annotated[
        bool, typer.Option("--tables", help="list the tables and their columns instead of SQL")
    ] = False,
) -> None:
    """Run SQL on the analysed tables of a bundle, a --db file or a dataset.

    SOURCE is a bundle (analysed on the fly), an `analyze --db` file, an `export`
    directory or a `fleet` dataset (docs/multi.md; tables in docs/tables.md).

    Example: hindsight query bundle.tgz "SELECT key, start_ts, summary FROM findings" --format csv
    """
    from analyzer.query import TABLES_SQL, open_source, run_sql, write_result

    if (sql is None) == (not tables):
        _fail("give SQL or --tables (not both)", EXIT_INPUT)

    def call() -> None:
        with open_source(source, debug=debug, allow_file_access=allow_file_access) as con:
            write_result(run_sql(con, TABLES_SQL if tables else str(sql)), fmt, output)

    _guarded(call, debug)


@app.command("export")
def export_command(
    source: Annotated[Path, typer.Argument(help="bundle or analyze --db file", show_default=False)],
    out_dir: Annotated[
        Path, typer.Argument(help="directory for TABLE.parquet files", show_default=False)
    ],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors")] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks of internal errors")
    ] = False,
    allow_file_access: AllowFiles = False,
) -> None:
    """Write every analysed table as Parquet (zstd), one TABLE.parquet each.

    Example: hindsight export bundle.tgz tables/ && duckdb -c "SELECT * FROM 'tables/findings.parquet'"
    """
    from analyzer.query import export

    counts = _guarded(
        lambda: export(
            source,
            out_dir,
            progress=_progress(quiet),
            debug=debug,
            allow_file_access=allow_file_access,
        ),
        debug,
    )
    if not quiet:
        _say(f"{len(counts)} tables, {sum(max(n, 0) for n in counts.values())} rows -> {out_dir}")


@app.command("diff")
def diff_command(
    before: Annotated[
        Path,
        typer.Argument(help="capture before the change (bundle or --db file)", show_default=False),
    ],
    after: Annotated[Path, typer.Argument(help="capture after the change", show_default=False)],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="HTML page (default: ./diff.html)")
    ] = None,
    md: Annotated[
        Path | None, typer.Option("--md", help="also write Markdown (ticket body; '-' for stdout)")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write JSON ('-' for stdout)")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors")] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks of internal errors")
    ] = False,
    allow_file_access: AllowFiles = False,
) -> None:
    """Compare two captures of one workload: signals, findings, host configuration.

    The captures are aligned by time since capture start; signal distributions
    (p50/p95/p99/max, variance), findings gone or new and host configuration changes
    (sysctls, THP, cgroup limits, affinity, scheduling policy) are compared (docs/multi.md).

    Example: hindsight diff before.tgz after.tgz -o diff.html --md diff.md
    """
    from analyzer.diff import run_diff
    from reports.diff_text import summary
    from reports.render import DIFF

    html = output or Path.cwd() / "diff.html"
    result = _guarded(
        lambda: run_diff(
            before,
            after,
            html=html,
            md=md,
            json_path=json_out,
            progress=_progress(quiet),
            debug=debug,
            allow_file_access=allow_file_access,
            renderers=DIFF,
        ),
        debug,
    )
    if not quiet:  # stdout carries only the document when --md/--json write there
        err = "-" in (str(md), str(json_out))
        _say("\n".join(map(one_line, summary(result).splitlines())), err=err)
        _say(f"report: {html}", err=err)


@app.command("fleet")
def fleet_command(
    bundles: Annotated[
        list[str],
        typer.Argument(
            help="bundles, directories of bundles or glob patterns (or one fleet dataset)",
            show_default=False,
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML overview")] = Path(
        "fleet.html"
    ),
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset", help="Parquet dataset directory (default: OUTPUT stem + .dataset)"
        ),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write JSON ('-' for stdout)")
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", "-j", help="bundles analysed in parallel (0: one per CPU, at most 4)"
        ),
    ] = 0,
    host_reports: Annotated[
        bool,
        typer.Option(
            "--host-reports", help="also write each host's full HTML report (OUTPUT stem + .hosts/)"
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors")] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks of internal errors")
    ] = False,
) -> None:
    """Compare the hosts of one job and find stragglers and outliers.

    Loads every bundle into one Parquet dataset partitioned by host, then finds hosts
    whose GPU utilisation, throttling, disk latency, network errors or pressure diverge
    from their peers at the same time (docs/multi.md, docs/scale.md).

    Example: hindsight fleet captures/*.tgz -o fleet.html --host-reports
    """
    from analyzer.fleet import FleetOptions, headline, run_fleet
    from reports.render import FLEET

    opts = FleetOptions(
        output=output,
        dataset=dataset,
        json_path=json_out,
        jobs=jobs,
        host_reports=host_reports,
        debug=debug,
        progress=_progress(quiet),
    )
    result = _guarded(lambda: run_fleet(list(bundles), opts, FLEET), debug)
    if not quiet:
        err = str(json_out) == "-"  # stdout carries only the JSON then
        _say(one_line(headline(result)), err=err)
        for f in result.failed:
            _say(
                f"hindsight: not analysed: {one_line(f['source'], 300)}: {one_line(f['error'] or '')}",
                err=True,
            )
        _say(f"report: {output}  dataset: {result.dataset}", err=err)


@app.command("synth")
def synth_command(
    out: Annotated[Path, typer.Argument(help="bundle to write (.tgz)", show_default=False)],
    cpus: Annotated[int, typer.Option(help="logical CPUs")] = 8,
    gpus: Annotated[int, typer.Option(help="GPUs")] = 1,
    disks: Annotated[int, typer.Option(help="NVMe disks")] = 2,
    nics: Annotated[int, typer.Option(help="network interfaces besides lo")] = 1,
    hours: Annotated[float | None, typer.Option(help="capture length in hours")] = None,
    seconds: Annotated[float | None, typer.Option(help="capture length in seconds [600]")] = None,
    interval: Annotated[int, typer.Option(help="sampling interval, seconds")] = 1,
    incident: Annotated[
        list[str] | None,
        typer.Option(help="KIND@START+DUR[:key=val,...], e.g. oom_kill@5m+90s (repeatable)"),
    ] = None,
    control: Annotated[
        list[str] | None, typer.Option(help="negative control KIND@START+DUR (repeatable)")
    ] = None,
    scenario: Annotated[str | None, typer.Option(help="a named scenario (docs/synth.md)")] = None,
    seed: Annotated[int, typer.Option(help="random seed (same seed, same bundle)")] = 1,
    hostname: Annotated[str, typer.Option(help="host name")] = "gpu01",
    start: Annotated[str | None, typer.Option(help="capture start, ISO UTC")] = None,
    noise: Annotated[float, typer.Option(help="jitter scale (0 = flat)")] = 1.0,
    no_bpf: Annotated[bool, typer.Option("--no-bpf", help="no bpftrace histograms")] = False,
    iostat_json: Annotated[
        bool, typer.Option("--iostat-json", help="also write iostat -o JSON (capture option)")
    ] = False,
    irq_interval: Annotated[
        int | None,
        typer.Option(help="mpstat -I every S seconds (capture option; default as the script)"),
    ] = None,
    keep_dir: Annotated[bool, typer.Option("--keep-dir", help="also keep the directory")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
) -> None:
    """Generate a realistic bundle with injected incidents and its ground truth.

    Writes OUT (exactly the layout and tool formats of hindsight-capture.sh) and
    OUT-without-.tgz.ground-truth.json. Kinds and scenarios: docs/synth.md.

    Example: hindsight synth demo.tgz --seconds 600 --incident checkpoint_stall@60+240
    """
    from analyzer.synth import generate, truth_path
    from analyzer.synth.scenarios import build_spec

    def run() -> Path:
        spec = build_spec(
            cpus=cpus, gpus=gpus, disks=disks, nics=nics, seconds=seconds, hours=hours,
            interval=interval, seed=seed, hostname=hostname, start=start, noise=noise,
            bpf=not no_bpf, incidents=incident or [], controls=control or [],
            scenario_name=scenario, iostat_json=iostat_json, irq_interval=irq_interval,
        )  # fmt: skip
        return generate(spec, out, keep_dir=keep_dir)

    path = _guarded(run, debug)
    _say(f"{path}\n{truth_path(path)}")


@app.command("version")
def version() -> None:
    """Print the Hindsight version.

    Example: hindsight version
    """
    _say(__version__)


#: Commands that write files or scratch space: interrupted, they clean up first.
PROTECTED = {"analyze", "redact", "query", "export", "diff", "fleet", "synth"}


def _protect() -> None:
    """SIGINT/SIGTERM stop at once, leaving nothing behind (`analyzer.cleanup`)."""
    from analyzer.cleanup import install_signal_handlers, use_private_tempdir

    use_private_tempdir()
    install_signal_handlers()


def _version_asked() -> None:
    """``--version`` / ``-V`` alone: print the version and exit 0."""
    if sys.argv[1:] in (["--version"], ["-V"]):
        _say(f"hindsight {__version__}")
        raise SystemExit(0)


def main() -> None:
    """Console script `hindsight`."""
    _version_asked()
    os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count() or 2))
    if len(sys.argv) > 1 and sys.argv[1] in PROTECTED:  # not `capture`: its script cleans up
        _protect()
    app()


analyze_app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
analyze_app.command(help=ANALYZE_HELP)(analyze)


def analyze_main() -> None:
    """Console script `analyze` = `hindsight analyze`."""
    _version_asked()
    _protect()
    analyze_app()
