"""`hindsight fleet`: many hosts of one job → one Parquet dataset → stragglers and outliers.

`run_fleet(inputs, FleetOptions)`:

1. expands the inputs (archives, bundle directories, a directory of bundles, globs);
2. analyses every bundle (``jobs`` worker processes) and writes one hive-partitioned
   Parquet dataset (`analyzer.fleet_dataset`); an existing dataset given as the only
   input is reused as is;
3. reads the dataset back with DuckDB views (the same views `hindsight query DATASET`
   gives) and finds hosts diverging from their peers (`analyzer.fleet_detect`);
4. gathers per-host facts: capture span, CPUs/GPUs, the clock's NTP/chrony state from the
   capture's clock anchors (``host_config`` ``clock.ntp_*``, else the ``ntp`` snapshot),
   findings; a host without sync state is flagged;
5. writes the HTML overview and, when asked, JSON.

The HTML (the overview and each host's report) is rendered by the `FleetRenderers` the
caller passes (the CLI: ``reports.render.FLEET``): this module returns data and never
imports ``reports``.

JSON (``--json``): ``{"schema_version": 1, "dataset", "hosts": [ranked host dicts],
"outliers": [...], "metrics": [...], "failed": [...]}``; times ISO 8601 UTC.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from analyzer.errors import HindsightError
from analyzer.fleet_dataset import HostReport, build_dataset, expand_inputs, read_marker
from analyzer.fleet_detect import Outlier, detect, rank_hosts
from analyzer.fleet_heat import heat_strips
from analyzer.outputs import Outputs, emit, write_text
from analyzer.query import FLEET_MARKER, attach_fleet_views
from analyzer.sql import connect_sealed

JSON_SCHEMA_VERSION = 1
MAX_OFFSET_S = 0.5  # a larger NTP offset makes the 1 s alignment with peers uncertain


@dataclass
class FleetOptions:
    """What the user asked for; ``output``/``json_path`` None = not written."""

    output: Path | None = None
    dataset: Path | None = None
    json_path: Path | None = None
    jobs: int = 0  # 0 = one per CPU, at most 4
    host_reports: bool = False
    debug: bool = False
    progress: Callable[[str], None] | None = None


@dataclass
class FleetResult:
    """The fleet compared: hosts ranked by divergence, their outliers, the heat strips."""

    dataset: Path
    hosts: list[dict[str, Any]]  # ranked; failed loads are in ``failed``
    outliers: list[Outlier]
    metrics: list[dict[str, Any]]
    failed: list[dict[str, Any]] = field(default_factory=list)
    span: tuple[datetime, datetime] | None = None
    heat: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FleetRenderers:
    """How the fleet's HTML is rendered, supplied by the caller (the analyzer never imports
    ``reports``). ``page(result, path)``: the overview's text, links relative to ``path``;
    ``host_report(con, path)``: writes one host's report from its analysed store (a
    module-level function: it is sent to the worker processes)."""

    page: Callable[[FleetResult, Path], str] | None = None
    host_report: HostReport | None = None


def default_jobs() -> int:
    """Bundles analysed in parallel by default: one per CPU, at most 4."""
    return max(1, min(os.cpu_count() or 1, 4))


def run_fleet(
    inputs: list[str | Path], options: FleetOptions, renderers: FleetRenderers | None = None
) -> FleetResult:
    """Build (or reuse) the fleet dataset for ``inputs``, analyse it, write the report and
    JSON (claimed first, renamed into place together at the end: `analyzer.outputs`).
    ``renderers`` must render each HTML output the options ask for."""
    renderers = renderers or FleetRenderers()
    if options.output is not None and renderers.page is None:
        raise ValueError("FleetOptions.output needs FleetRenderers.page (reports.render.FLEET)")
    if options.host_reports and renderers.host_report is None:
        raise ValueError("--host-reports needs FleetRenderers.host_report (reports.render.FLEET)")
    say = options.progress or (lambda _m: None)
    stdout: list[str] = []
    with Outputs([Path(i) for i in inputs]) as out:
        html = out.add(options.output, "fleet report")
        js = out.add(options.json_path, "JSON")
        result = _analyse(inputs, options, say, out, renderers.host_report)
        if options.output is not None and renderers.page is not None:
            say("rendering fleet report")
            emit(html, renderers.page(result, options.output), stdout)
        if options.json_path is not None:
            emit(js, json_text(result), stdout)
        out.commit()
    for text in stdout:
        sys.stdout.write(text)
    return result


def _analyse(
    inputs: list[str | Path],
    options: FleetOptions,
    say: Callable[[str], None],
    outputs: Outputs,
    host_report: HostReport | None,
) -> FleetResult:
    """The fleet result; a new dataset is built beside its path (``outputs`` swaps it in).
    ``host_report`` writes each host's report when ``options.host_reports`` asks for them."""
    if len(inputs) == 1 and (Path(inputs[0]) / FLEET_MARKER).is_file():
        dataset = built = Path(inputs[0])
        loads = read_marker(dataset)
    else:
        dataset = options.dataset or _default_dataset(options.output)
        out = options.output or Path("fleet.html")
        reports = out.with_name(out.stem + ".hosts") if options.host_reports else None
        own = {p.resolve() for p in (dataset, out, out.with_name(out.stem + ".hosts"))}
        own |= {options.json_path.resolve()} if options.json_path else set()
        sources = [s for s in expand_inputs(list(inputs)) if s.resolve() not in own]
        if not sources:
            raise HindsightError("no bundle given (only the fleet's own outputs matched)")
        say(f"loading {len(sources)} bundles into {dataset}")
        built = outputs.add_dir(dataset, "fleet dataset", FLEET_MARKER)
        loads = build_dataset(
            sources,
            built,
            jobs=options.jobs or default_jobs(),
            reports_dir=reports,
            render_report=host_report if reports is not None else None,
            debug=options.debug,
            progress=say,
        )
    ok = [x for x in loads if x.status == "ok"]
    failed = [
        {"host": x.host, "bundle": x.bundle, "source": x.source, "error": x.error}
        for x in loads
        if x.status != "ok"
    ]
    if not ok:
        why = "; ".join(f"{f['source']}: {f['error']}" for f in failed[:3])
        raise HindsightError(f"no bundle could be analysed ({why})")
    say("comparing hosts")
    con = connect_sealed(None)
    try:
        views = attach_fleet_views(con, built)
        if "signals" not in views or "bundle" not in views:
            raise HindsightError(f"{dataset}: the dataset has no signals or bundle table")
        found = detect(con)
        hosts = _host_facts(con, views, {x.host: x for x in ok})
        order = rank_hosts(list(hosts), found["scores"])
        ranked = []
        for rank, name in enumerate(order, 1):
            h = hosts[name]
            h["rank"] = rank
            h["scores"] = {k: round(v, 1) for k, v in found["scores"].get(name, {}).items()}
            h["score"] = round(sum(found["scores"].get(name, {}).values()), 1)
            h["compared_s"] = found["compared"].get(name, {})
            h["outliers"] = [o for o in found["outliers"] if o.host == name]
            ranked.append(h)
        span = _span(con)
        heat = heat_strips(con, order, found["outliers"], found["metrics"], span)
    finally:
        con.close()
    return FleetResult(dataset, ranked, found["outliers"], found["metrics"], failed, span, heat)


def _default_dataset(output: Path | None) -> Path:
    out = output or Path("fleet.html")
    return out.with_name(out.stem + ".dataset")


def _host_facts(
    con: duckdb.DuckDBPyConnection, views: list[str], loads: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    hosts: dict[str, dict[str, Any]] = {}
    for name, load in loads.items():
        hosts[name] = {
            "host": name, "reported_host": load.reported_host, "bundle": load.bundle,
            "source": load.source, "report": load.report, "report_error": load.report_error,
            "findings": [], "gpus": None,
            "start": None, "end": None, "cpus": None, "ntp_source": None,
            "ntp_synchronized": None, "ntp_offset_s": None, "clock_flags": [],
        }  # fmt: skip
    for host, start, end, cpus in con.sql(
        "SELECT host, min(start_utc), max(end_utc), max(cpus) FROM bundle GROUP BY host"
    ).fetchall():
        if host in hosts:
            hosts[host].update(start=start, end=end, cpus=cpus)
    for host, gpus in con.sql("SELECT host, max(gpu_count) FROM signals GROUP BY host").fetchall():
        if host in hosts:
            hosts[host]["gpus"] = gpus
    if "host_config" in views:
        _ntp(con, hosts)
    for h in hosts.values():
        h["clock_flags"] = clock_flags(h)
    if "findings" in views:
        cols = "host, finding_id, key, title, severity, start_ts, end_ts, summary, gpu_seconds_lost"
        for row in con.sql(f"SELECT {cols} FROM findings ORDER BY host, rank").fetchall():
            if row[0] in hosts:
                hosts[row[0]]["findings"].append(
                    dict(zip(cols.split(", ")[1:], row[1:], strict=True))
                )
    return hosts


_NTP_KEYS = {
    "clock.ntp_source": "ntp_source",
    "clock.ntp_synchronized": "ntp_synchronized",
    "clock.ntp_offset_s": "ntp_offset_s",
    "ntp.synchronized": "ntp_synchronized",
    "ntp.offset_s": "ntp_offset_s",
}


def _ntp(con: duckdb.DuckDBPyConnection, hosts: dict[str, dict[str, Any]]) -> None:
    keys = ", ".join(f"'{k}'" for k in _NTP_KEYS)
    rows = con.sql(
        f"""SELECT host, key, value FROM host_config WHERE key IN ({keys})
        ORDER BY host, CASE WHEN key LIKE 'clock.%' THEN 0 ELSE 1 END,
                 CASE snapshot WHEN 'start' THEN 0 WHEN 'end' THEN 1 ELSE 2 END"""
    ).fetchall()
    for host, key, value in rows:
        h = hosts.get(host)
        field_name = _NTP_KEYS[key]
        if h is None or h[field_name] is not None:
            continue
        h[field_name] = _ntp_value(field_name, value)


def _ntp_value(field_name: str, value: str | None) -> Any:
    v = (value or "").strip().lower()
    if v in ("", "null", "none", "n/a", "unknown") and field_name != "ntp_source":
        return None
    if field_name == "ntp_synchronized":
        return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(
            v
        )
    if field_name == "ntp_offset_s":
        try:
            return float(v)
        except ValueError:
            return None
    return v or None


def clock_flags(h: dict[str, Any]) -> list[str]:
    """Why a host's alignment with its peers is uncertain (empty when it is not).

    >>> clock_flags({"ntp_source": "none", "ntp_synchronized": None, "ntp_offset_s": None})
    ['no clock sync state (no NTP/chrony source found): its alignment with peers is unverified']
    >>> clock_flags({"ntp_source": "chronyc", "ntp_synchronized": True, "ntp_offset_s": 0.002})
    []
    """
    flags = []
    source, synced, offset = h.get("ntp_source"), h.get("ntp_synchronized"), h.get("ntp_offset_s")
    if synced is None:
        why = (
            "no NTP/chrony source found" if source in (None, "none") else f"{source} gave no state"
        )
        flags.append(f"no clock sync state ({why}): its alignment with peers is unverified")
    elif synced is False:
        flags.append("clock not synchronised: its alignment with peers is unverified")
    if offset is not None and abs(offset) > MAX_OFFSET_S:
        flags.append(
            f"clock offset {offset:+.3f} s exceeds {MAX_OFFSET_S} s: 1 s alignment uncertain"
        )
    return flags


def _span(con: duckdb.DuckDBPyConnection) -> tuple[datetime, datetime] | None:
    lo, hi = con.sql("SELECT min(ts), max(ts) FROM signals").fetchall()[0]
    return None if lo is None else (lo, hi)


def headline(result: FleetResult) -> str:
    """One line: the top straggler and its worst divergence, or that none diverges."""
    n = len(result.hosts)
    if not any(m["status"] == "evaluated" for m in result.metrics):
        return f"Nothing to compare: no metric is reported by 3 or more of the {n} hosts at the same time."
    if not result.hosts or not result.hosts[0]["score"]:
        secs = max((m["seconds"] for m in result.metrics if m["status"] == "evaluated"), default=0)
        return f"No host diverges from its peers ({n} hosts compared over {secs} s that 3 or more of them report)."
    top = result.hosts[0]
    worst = max(top["outliers"], key=lambda o: o.divergent_s)
    return (
        f"Straggler: {top['host']} — {worst.label} {_fmt(worst.host_mean)} {worst.unit} vs peers "
        f"{_fmt(worst.peer_median)} {worst.unit} for {worst.divergent_s} s "
        f"({worst.start:%H:%M:%S}–{worst.end:%H:%M:%S} UTC); score {top['score']:.0f}."
    )


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}"


def to_dict(result: FleetResult) -> dict[str, Any]:
    """The JSON document (see module docstring)."""
    hosts = []
    for h in result.hosts:
        d = {k: v for k, v in h.items() if k != "outliers"}
        d["outliers"] = [_outlier_dict(o) for o in h["outliers"]]
        hosts.append(d)
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "dataset": str(result.dataset),
        "headline": headline(result),
        "span": list(result.span) if result.span else None,
        "hosts": hosts,
        "outliers": [_outlier_dict(o) for o in result.outliers],
        "metrics": result.metrics,
        "failed": result.failed,
    }


def _outlier_dict(o: Outlier) -> dict[str, Any]:
    d = asdict(o)
    d["duration_s"] = o.duration_s
    d["host_mean"], d["peer_median"] = round(o.host_mean, 3), round(o.peer_median, 3)
    return d


def write_json(result: FleetResult, path: Path) -> None:
    """Write `json_text` to ``path`` atomically (``-``: stdout)."""
    if str(path) == "-":
        sys.stdout.write(json_text(result))
    else:
        write_text(path, json_text(result), "JSON")


def json_text(result: FleetResult) -> str:
    """The fleet result as the JSON document (docs/multi.md)."""
    return json.dumps(to_dict(result), default=_json_default, indent=2, sort_keys=True) + "\n"


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return str(value)
