"""`hindsight diff BEFORE AFTER`: what changed between two captures of the same workload.

Each side is a bundle (analysed first), an ``analyze --db`` file or an export directory.
The two captures are aligned by *relative* time: second 0 is the first second of each
capture's ``signals`` grid, and only the seconds both captures cover (the shorter one's
length) are compared; how many seconds each side had outside that span is reported.

For every key signal (`SIGNALS`: GPU utilisation, CPU busy and run queue, PSI, CFS
throttling, disk latency, run-queue / block-I/O latency p99, network errors) the
distribution of its per-second values is summarised on each side: ``n`` (seconds with a
value), mean, standard deviation, variance, p50/p95/p99 (linear interpolation), max.
Seconds without a value are not counted (never zero-filled). Run-queue latency
histograms (bpftrace/bcc ``runqlat``) and block-I/O latency histograms (``biolat``) are
summed over the aligned span and their percentiles taken from the cumulative bucket
counts (bucket upper bound, µs). Findings and host configuration are compared by
`analyzer.diff_config`; the application's symptom (P50/P99, throughput, what explained it)
by `analyzer.diff_symptom`, when both stores have the symptom stage's tables.

`DiffResult.headline` is one sentence built from those numbers, e.g. ``after: cpu.max
raised, throttling gone, GPU utilisation p50 61 % → 93 %, variance −96 %``; it leads with
the symptom when both sides have one, e.g. ``after: P99 of latency_ms 498 ms → 39.8 ms
(−92 %); `cpu.cfs_quota_us quota_us (cpu/train)` 55000 removed; cause gone: throttling;
…``.

The HTML page and the Markdown text are rendered by the `DiffRenderers` the caller passes
(the CLI: ``reports.render.DIFF``): this module returns data and never imports ``reports``.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from analyzer.diff_config import UNLIMITED, compare_config, compare_findings
from analyzer.diff_hist import QUANTILES, compare_histograms
from analyzer.diff_symptom import compare_symptoms, headline_parts
from analyzer.errors import HindsightError
from analyzer.outputs import Outputs, emit
from analyzer.query import FLEET_MARKER, open_source

JSON_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Signal:
    """A compared signal: ``better`` is 'higher' or 'lower'; ``notable`` the change in
    p50 or p95 (signal units) worth a line in the summary."""

    column: str
    label: str
    unit: str
    better: str
    notable: float


SIGNALS: tuple[Signal, ...] = (
    Signal("gpu_util_mean_pct", "GPU utilisation (mean over GPUs)", "%", "higher", 5.0),
    Signal("gpu_util_min_pct", "GPU utilisation (least busy GPU)", "%", "higher", 5.0),
    Signal("cpu_busy_pct", "CPU busy", "%", "lower", 10.0),
    Signal("runq", "run queue", "tasks", "lower", 2.0),
    Signal("psi_cpu_some_pct", "CPU pressure (some)", "%", "lower", 5.0),
    Signal("psi_mem_some_pct", "memory pressure (some)", "%", "lower", 5.0),
    Signal("psi_mem_full_pct", "memory pressure (full)", "%", "lower", 5.0),
    Signal("psi_io_some_pct", "I/O pressure (some)", "%", "lower", 5.0),
    Signal("psi_io_full_pct", "I/O pressure (full)", "%", "lower", 5.0),
    Signal("throttled_pct", "CFS periods throttled", "%", "lower", 5.0),
    Signal("throttled_ms_per_s", "time throttled", "ms/s", "lower", 20.0),
    Signal("disk_w_await_max_ms", "disk write latency (worst disk)", "ms", "lower", 5.0),
    Signal("disk_util_max_pct", "disk utilisation (busiest disk)", "%", "lower", 10.0),
    Signal("iowait_pct", "I/O wait", "%", "lower", 5.0),
    Signal("runqlat_p99_us", "run-queue latency p99", "µs", "lower", 100.0),
    Signal("biolat_p99_us", "block I/O latency p99", "µs", "lower", 1000.0),
    Signal("net_err_per_s", "network errors", "1/s", "lower", 1.0),
    Signal("net_drop_per_s", "network drops", "1/s", "lower", 1.0),
    Signal("gpu_power_w", "GPU power", "W", "higher", 50.0),
    Signal("gpu_sm_clock_min_mhz", "GPU SM clock (slowest GPU)", "MHz", "higher", 100.0),
)


@dataclass
class Side:
    """One capture: identity, span and per-second signals (``rel_s`` = seconds since start)."""

    label: str
    meta: dict[str, Any]
    signals: pl.DataFrame
    t0: datetime | None
    seconds: int


@dataclass
class DiffResult:
    """The comparison: both sides' identity, the signals' distributions, histograms,
    findings and configuration compared, and the one-sentence headline."""

    before: dict[str, Any]
    after: dict[str, Any]
    aligned_s: int
    stats: list[dict[str, Any]]
    histograms: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    config: dict[str, Any]
    headline: str = ""
    notes: list[str] = field(default_factory=list)
    series: dict[str, Any] = field(default_factory=dict)  # for charts: column -> side -> frame
    # the application's symptom before/after (analyzer.diff_symptom); its chart series are
    # in ``series`` under ``symptom:<index into symptoms["matched"]>``
    symptoms: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DiffRenderers:
    """How the diff's documents are rendered from a `DiffResult`, supplied by the caller
    (the analyzer never imports ``reports``): ``html`` the page, ``markdown`` the text."""

    html: Callable[[DiffResult], str] | None = None
    markdown: Callable[[DiffResult], str] | None = None


def run_diff(
    before: Path,
    after: Path,
    *,
    html: Path | None = None,
    md: Path | None = None,
    json_path: Path | None = None,
    progress: Any = None,
    debug: bool = False,
    allow_file_access: bool = False,
    renderers: DiffRenderers | None = None,
) -> DiffResult:
    """Compare ``before`` with ``after`` and write the requested outputs.

    ``allow_file_access``: a ``.duckdb`` side may read files through its views
    (`analyzer.query.open_source`); off by default. ``renderers`` must render each
    document asked for (``html``, ``md``)."""
    renderers = renderers or DiffRenderers()
    if html is not None and renderers.html is None:
        raise ValueError("html needs DiffRenderers.html (reports.render.DIFF)")
    if md is not None and renderers.markdown is None:
        raise ValueError("md needs DiffRenderers.markdown (reports.render.DIFF)")
    say = progress or (lambda _m: None)
    for side in (before, after):
        if (Path(side) / FLEET_MARKER).is_file():
            raise HindsightError(
                f"{side}: a fleet dataset holds many hosts; diff compares two captures"
            )
    stdout: list[str] = []
    with Outputs([Path(before), Path(after)]) as out:  # claimed now, renamed in together
        temp = {
            "html": out.add(html, "diff page"),
            "md": out.add(md, "Markdown"),
            "json": out.add(json_path, "JSON"),
        }
        with contextlib.ExitStack() as stack:
            say(f"analysing {before}")
            opened = {"progress": progress, "debug": debug, "allow_file_access": allow_file_access}
            cb = stack.enter_context(open_source(Path(before), **opened))
            say(f"analysing {after}")
            ca = stack.enter_context(open_source(Path(after), **opened))
            result = compare(cb, ca, str(before), str(after))
        if html is not None and renderers.html is not None:
            emit(temp["html"], renderers.html(result), stdout)
        if md is not None and renderers.markdown is not None:
            emit(temp["md"], renderers.markdown(result), stdout)
        if json_path is not None:
            doc = json.dumps(to_dict(result), default=_json_default, indent=2, sort_keys=True)
            emit(temp["json"], doc + "\n", stdout)
        out.commit()
    for text in stdout:
        sys.stdout.write(text)
    return result


def compare(
    before: duckdb.DuckDBPyConnection,
    after: duckdb.DuckDBPyConnection,
    before_label: str = "before",
    after_label: str = "after",
) -> DiffResult:
    """The whole comparison of two analysed stores."""
    sb, sa = _side(before, before_label), _side(after, after_label)
    aligned = min(sb.seconds, sa.seconds)
    notes = []
    for s in (sb, sa):
        if s.seconds == 0:
            notes.append(f"{s.label}: no per-second signals (no time-series collector parsed)")
        elif s.seconds > aligned:
            notes.append(
                f"{s.label}: the last {s.seconds - aligned} s of {s.seconds} s are outside the "
                f"aligned span and not compared"
            )
    fb = sb.signals.filter(pl.col("rel_s") < aligned) if sb.seconds else sb.signals
    fa = sa.signals.filter(pl.col("rel_s") < aligned) if sa.seconds else sa.signals
    stats = [_compare_signal(sig, fb, fa) for sig in SIGNALS]
    hists = compare_histograms(before, after, sb.t0, sa.t0, aligned)
    quiet = {
        side: {
            s["signal"]
            for s in stats
            if s[side]["n"] and s[side]["max"] == 0 and s[side]["p50"] == 0
        }
        for side in ("before", "after")
    }
    findings = compare_findings(before, after, quiet)
    config = compare_config(before, after)
    for side in config["missing"]:
        notes.append(f"{side}: host configuration (host_config) was not captured: changes unknown")
    result = DiffResult(
        before=_meta_dict(sb), after=_meta_dict(sa), aligned_s=aligned, stats=stats,
        histograms=[h for h in hists if h is not None], findings=findings, config=config, notes=notes,
    )  # fmt: skip
    result.series = {
        s.column: {"before": _series(fb, s.column), "after": _series(fa, s.column)} for s in SIGNALS
    }
    sym = compare_symptoms(
        before, after, sb.t0, sa.t0, aligned, config["changes"], summarise=distribution
    )
    for i, frames in sym.pop("series").items():
        result.series[f"symptom:{i}"] = frames
    result.symptoms = sym
    present = sym["present"]
    if present["before"] != present["after"]:
        has, lacks = ("before", "after") if present["before"] else ("after", "before")
        notes.append(
            f"{lacks}: no application symptom (no latency, step-time or throughput series); "
            f"the {has} capture's symptom is not compared"
        )
    result.headline = headline(result)
    return result


def _side(con: duckdb.DuckDBPyConnection, label: str) -> Side:
    tables = {r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()}
    meta: dict[str, Any] = {}
    if "bundle" in tables:
        cur = con.sql("SELECT * FROM bundle LIMIT 1")
        rows = cur.fetchall()
        if rows:
            meta = dict(zip(cur.columns, rows[0], strict=True))
    cols = [s.column for s in SIGNALS]
    if "signals" not in tables:
        empty = pl.DataFrame(schema={"rel_s": pl.Int64, **dict.fromkeys(cols, pl.Float64)})
        return Side(label, meta, empty, None, 0)
    have = {r[0] for r in con.sql("DESCRIBE signals").fetchall()}
    select = ", ".join(
        f"CAST({c} AS DOUBLE) AS {c}" if c in have else f"NULL::DOUBLE AS {c}" for c in cols
    )
    frame = con.sql(
        f"SELECT epoch(ts) - epoch(min(ts) OVER ()) AS rel_s, {select} FROM signals "
        "WHERE ts IS NOT NULL ORDER BY ts"
    ).pl()
    t0 = con.sql("SELECT min(ts) FROM signals").fetchall()[0][0]
    frame = frame.with_columns(pl.col("rel_s").cast(pl.Int64))
    seconds = int(frame["rel_s"].max() + 1) if frame.height else 0  # type: ignore[operator]
    return Side(label, meta, frame, t0, seconds)


def _meta_dict(s: Side) -> dict[str, Any]:
    keep = ("name", "host", "kernel", "cpus", "start_utc", "end_utc", "source_path")
    return {"label": s.label, "seconds": s.seconds, "t0": s.t0, **{k: s.meta.get(k) for k in keep}}


def distribution(values: pl.Series) -> dict[str, Any]:
    """n, mean, std, var, p50/p95/p99, max of the non-null, finite values (None when n = 0).

    >>> d = distribution(pl.Series([41.0, 61.0, 81.0, None]))
    >>> d["n"], d["p50"], d["max"], round(d["var"], 1)
    (3, 61.0, 81.0, 266.7)
    """
    v = values.drop_nulls().filter(values.drop_nulls().is_finite()) if values.len() else values
    n = v.len()
    if n == 0:
        return {
            "n": 0,
            "mean": None,
            "std": None,
            "var": None,
            "p50": None,
            "p95": None,
            "p99": None,
            "max": None,
        }
    out: dict[str, Any] = {
        "n": n,
        "mean": v.mean(),
        "std": v.std(ddof=0),
        "var": v.var(ddof=0),
        "max": v.max(),
    }
    for name, q in QUANTILES:
        out[name] = v.quantile(q, interpolation="linear")
    return out


def _compare_signal(sig: Signal, fb: pl.DataFrame, fa: pl.DataFrame) -> dict[str, Any]:
    b, a = distribution(fb[sig.column]), distribution(fa[sig.column])
    row: dict[str, Any] = {
        "signal": sig.column, "label": sig.label, "unit": sig.unit, "better": sig.better,
        "before": b, "after": a, "delta": {}, "verdict": None, "variance_change_pct": None,
    }  # fmt: skip
    if b["n"] == 0 or a["n"] == 0:
        row["verdict"] = (
            "missing " + ("before" if b["n"] == 0 else "after") if b["n"] or a["n"] else "missing"
        )
        return row
    for k in ("mean", "p50", "p95", "p99", "max"):
        row["delta"][k] = a[k] - b[k]
    if b["var"] and b["var"] > 0:
        row["variance_change_pct"] = (a["var"] / b["var"] - 1.0) * 100.0
    moved = max(abs(row["delta"]["p50"]), abs(row["delta"]["p95"]))
    if moved >= sig.notable:
        key = (
            row["delta"]["p50"] if abs(row["delta"]["p50"]) >= sig.notable else row["delta"]["p95"]
        )
        row["verdict"] = "better" if (key > 0) == (sig.better == "higher") else "worse"
    else:
        row["verdict"] = "unchanged"
    return row


def _series(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    return frame.select(pl.col("rel_s").alias("x"), pl.col(column)).drop_nulls(column)


def _pct(v: float | None) -> str:
    return "?" if v is None else f"{v:.0f} %"


def headline(r: DiffResult) -> str:
    """One sentence: the symptom's change with the configuration change and the causes that
    went with it (when both sides have a symptom), config changes that matter, findings
    gone/new, GPU utilisation change."""
    lead = headline_parts(r.symptoms, r.config.get("changes", [])) if r.symptoms else []
    parts: list[str] = []
    for c in r.config.get("changes", []):
        if (
            c["key"].startswith("cpu.max quota")
            or ".quota_us" in c["key"]
            or c["key"].startswith("cpu.cfs_quota_us")
        ):
            if c["change"] != "changed" and str(c["before"] or c["after"]).lower() in UNLIMITED:
                continue  # an unlimited quota that appeared or went: no limit either way
            if any(f"`{c['key']}`" in text for text in lead[1:]):
                break  # the symptom's lead already names it
            name = "cpu.max" if c["key"].startswith("cpu.max") else "cpu quota"
            verb = c["direction"] or c["change"]
            parts.append(f"`{name}` {verb}")
            break
    others = [
        c
        for c in r.config.get("changes", [])
        if not c["key"].startswith(("cpu.max", "cpu.cfs_quota"))
        and not any(f"`{c['key']}`" in text for text in lead[1:])  # named in the lead
    ]
    if others:
        parts.append(f"{len(others)} other setting{'s' if len(others) > 1 else ''} changed")
    for f in r.findings:
        if f["status"] in ("gone", "new"):
            parts.append(f"{f['noun']} {f['status']}")
    gpu = next(s for s in r.stats if s["signal"] == "gpu_util_mean_pct")
    if gpu["before"]["n"] and gpu["after"]["n"]:
        text = f"GPU utilisation p50 {_pct(gpu['before']['p50'])} → {_pct(gpu['after']['p50'])}"
        if gpu["variance_change_pct"] is not None:
            text += f", variance {gpu['variance_change_pct']:+.0f} %".replace("-", "−")
        if gpu["verdict"] == "unchanged":
            text += " (unchanged)"
        parts.append(text)
    if not parts and not lead:
        return "after: no notable change in configuration, findings or GPU utilisation."
    return "after: " + "; ".join([*lead, ", ".join(parts)] if parts else lead)


def to_dict(r: DiffResult) -> dict[str, Any]:
    """The JSON document: everything but the chart series (``symptoms`` without them too)."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "headline": r.headline,
        "before": r.before,
        "after": r.after,
        "aligned_s": r.aligned_s,
        "signals": r.stats,
        "histograms": r.histograms,
        "findings": r.findings,
        "config": r.config,
        "symptoms": r.symptoms,
        "notes": r.notes,
    }


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)
