"""Sampling gaps: a time-series collector missed samples.

A collector that should print every ``step`` seconds (its median spacing) but goes quiet
for longer than max(3 × step, step + 2 s) either could not run (the host was too loaded to
schedule it, or blocked on memory/I/O), was stopped, or stalled (nvidia-smi on a sick GPU).
Every other finding in that window is marked with a caveat: its numbers there are
incomplete. Severity follows the impact — how long each collector was blind (a 3 s hiccup
is `info`, a collector missing >= 10 s is `minor`, three or more missing >= 30 s `major`).
A gap inside a CPU-contention window is said to be an effect of it (``impact["effect_of"]``):
the collectors run at nice 19 and are the first tasks the contention starves.

A collector that stops early counts in a capture-script bundle: its silence is measured to
the last sample of any collector, or to the capture end minus 30 s when every collector
went quiet (the end snapshots that follow the series are not a gap) — unless it exited 0
after printing all its samples (``vmstat 1 N`` ends on its own while the samplers go on).
In a hand-made bundle (no manifest) the collectors' lengths are whatever was run: only
the silences between two samples of one collector are gaps.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from analyzer import intervals
from analyzer.detectors import cpu_contention
from analyzer.detectors._base import Context, span
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window

NAME = "sampling_gap"
INPUTS = (
    "any time-series table (vmstat, iostat, mpstat, pidstat, psi, meminfo, proc_vmstat, cgroup, gpu_dmon, sar, bpftrace)",
)
THRESHOLDS = {
    "gap_steps": 3.0,
    "gap_extra_s": 2.0,
    "min_samples": 5,
    "minor_missing_s": 10,  # one collector blind this long (10 samples at 1 s) is minor
    "major_collectors": 3,  # ... this many blind for major_gap_s each: the host stalled
    "major_gap_s": 30,
    "end_grace_s": 30,  # end snapshots after the series may take this long
    "effect_share": 0.5,  # this share of a gap inside a CPU-contention window: its effect
    "effect_pad_s": 2,  # ... the window widened by this much
}
T = THRESHOLDS
TABLES = {  # table -> has a since_boot column
    "vmstat": True, "iostat_device": True, "iostat_cpu": True, "mpstat_cpu": True, "pidstat": True, "psi": False,
    "meminfo": False, "proc_vmstat": False, "cgroup_cpu": False, "cgroup_memory": False, "gpu_dmon": False,
    "sar_cpu": False, "sar_queue": False, "sar_task": False, "sar_paging": False, "sar_net_dev": False, "bpf_hist": False,
}  # fmt: skip


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    present = [t for t in TABLES if ctx.rows(t)]
    if not present:
        return NotEvaluated(NAME, "no time-series table in the bundle")
    gaps = _gaps(ctx, present)
    if gaps.height == 0:
        return []
    contended = cpu_contention.windows(ctx)
    merged = intervals.as_windows(intervals.merge(gaps.select("start", "end")))
    sampling = _sampling(ctx, present, merged)
    return [_finding(gaps, w, contended, on) for w, on in zip(merged, sampling, strict=True)]


def _union(present: list[str]) -> str:
    """(f, sec): the seconds each time-series file has a sample in (one SELECT per table)."""
    return " UNION ALL ".join(
        f"SELECT DISTINCT source_file AS f, second_of(ts) AS sec FROM {t} WHERE ts IS NOT NULL"
        + (" AND since_boot IS NOT TRUE" if TABLES[t] else "")
        for t in present
    )


def _sampling(ctx: Context, present: list[str], windows: list[Window]) -> list[set[str]]:
    """Per window, the files with a sample inside it: the collectors that kept running
    (one scan of the series for all windows)."""
    df = ctx.query(
        f"""WITH w AS (SELECT unnest($lo::TIMESTAMPTZ[]) AS lo, unnest($hi::TIMESTAMPTZ[]) AS hi,
                              unnest($i::INTEGER[]) AS i),
                 s AS (SELECT DISTINCT f, sec FROM ({_union(present)}))
            SELECT i, list(DISTINCT f) AS files FROM w JOIN s ON s.sec >= w.lo AND s.sec < w.hi
            GROUP BY i""",
        {
            "lo": [w[0] for w in windows],
            "hi": [w[1] for w in windows],
            "i": list(range(len(windows))),
        },
    )
    found = {row["i"]: set(row["files"]) for row in df.iter_rows(named=True)}
    return [found.get(i, set()) for i in range(len(windows))]


def _gaps(ctx: Context, present: list[str]) -> pl.DataFrame:
    """One row per missed stretch of one collector: f, start (one step after its last
    sample), end (its next sample, or where it should have gone on), step, missing_s,
    spacing_s (between the samples around it), rows (samples lost)."""
    end = ctx.signals["ts"].max() if ctx.signals.height else None
    grace = end - timedelta(seconds=T["end_grace_s"]) if end is not None else None
    # a collector that stopped early: measured to the last sample of any collector (the
    # end snapshots after the series are not a gap), or to the capture end minus a grace;
    # in a hand-made bundle a collector's last sample is just where its file ends
    script = _from_the_script(ctx)
    end_sql = (
        "greatest((SELECT max(sec) FROM s) + INTERVAL 1 SECOND, $grace::TIMESTAMPTZ)"
        if script
        else "NULL::TIMESTAMPTZ"
    )
    # a collector that printed its full count and exited 0 (vmstat 1 N) has no tail gap
    done = (
        "SELECT file FROM collectors WHERE exit_code = 0"
        if ctx.rows("collectors")
        else "SELECT NULL::VARCHAR AS file WHERE false"
    )
    gaps = ctx.query(
        f"""WITH s AS (SELECT DISTINCT f, sec FROM ({_union(present)})),
            d AS (SELECT f, sec, coalesce(lead(sec) OVER (PARTITION BY f ORDER BY sec),
                                          CASE WHEN f IN ({done}) THEN sec END) AS nxt FROM s),
            st AS (SELECT f, median(epoch(nxt) - epoch(sec)) AS step, count(*) AS n FROM d WHERE nxt > sec GROUP BY f)
        SELECT d.f, d.sec, coalesce(d.nxt, {end_sql}) AS nxt, st.step FROM d JOIN st USING (f)
        WHERE st.n >= {int(T["min_samples"])} AND epoch(coalesce(d.nxt, {end_sql})) - epoch(d.sec) > greatest({T["gap_steps"]} * st.step, st.step + {T["gap_extra_s"]})
        ORDER BY d.sec""",
        {"grace": grace} if script else None,
    )
    # the missed stretch: from one step after the last sample to the next sample
    return (
        gaps.with_columns(
            start=pl.col("sec") + pl.duration(seconds=pl.col("step")), end=pl.col("nxt")
        )
        .with_columns(
            missing_s=(pl.col("end") - pl.col("start")).dt.total_seconds(fractional=True),
            spacing_s=(pl.col("nxt") - pl.col("sec")).dt.total_seconds(fractional=True),
        )
        .with_columns(rows=(pl.col("missing_s") / pl.col("step")).round().cast(pl.Int64))
    )


def _from_the_script(ctx: Context) -> bool:
    """The bundle was made by the capture script (its manifest was found; no bundle row
    says otherwise): its collectors were meant to run for the whole capture, so one that
    stopped early missed samples."""
    if not ctx.rows("bundle"):
        return True
    return ctx.query("SELECT bool_or(manifest_present) AS m FROM bundle")["m"][0] is not False


def _finding(gaps: pl.DataFrame, w: Window, contended: list[Window], sampling: set[str]) -> Finding:
    files = (
        gaps.filter((pl.col("start") < w[1]) & (pl.col("end") > w[0]))
        .group_by("f")
        .agg(
            pl.col("missing_s").sum(),
            pl.col("spacing_s").max(),
            pl.col("rows").sum(),
            pl.col("step").first(),
        )
        .sort("missing_s", "f", descending=[True, False])
    )
    names = sorted(files["f"].to_list())
    others = sorted(sampling - set(names))
    n, dur = len(names), (w[1] - w[0]).total_seconds()
    longest = float(files["missing_s"].max())  # type: ignore[arg-type]
    # starvation hits every nice-19 collector alike: one blind for long while the others
    # sampled on was stopped or stuck on its own, whatever the CPUs did meanwhile
    starved = not others or longest < T["minor_missing_s"]
    cause = _cause(w, contended) if starved else None
    impact = {
        "collectors": n,
        "missing_s": dur,
        "longest_missing_s": longest,
        "rows_lost": int(files["rows"].sum()),
        "still_sampling": others,
    }
    if cause is not None:
        impact |= {"effect_of": "cpu_contention", "effect_window": span(cause)}
    return Finding(
        key="SAMPLING_GAP",
        kind=NAME,
        title=f"{n} collector(s) missed samples for {dur:.0f} s",
        severity=_severity(files),
        start=w[0],
        end=w[1],
        summary=_summary(names, w, cause, others),
        impact=impact,
        evidence=[
            Evidence(
                "sample_spacing_s",
                round(float(row["spacing_s"]), 1),
                float(row["step"]),
                "s",
                f"{row['f']}: largest spacing between two of its samples, or from its last one "
                f"to where it should have gone on (baseline: its normal step); {row['rows']} "
                f"sample(s) lost, {row['missing_s']:.0f} s blind",
            )
            for row in files.iter_rows(named=True)
        ],
        remediation=[
            "Look at the other findings in this window: CPU contention, memory pressure or I/O stalls that also starved the collectors.",
            "A single stalled collector (nvidia-smi, bpftrace) points at that tool or its device: check its .err file in the bundle.",
        ],
    )


def _severity(files: pl.DataFrame) -> str:
    """From the impact: how long the collectors were blind (seconds of samples lost)."""
    if files.filter(pl.col("missing_s") >= T["major_gap_s"]).height >= T["major_collectors"]:
        return "major"
    if (files["missing_s"].max() or 0) >= T["minor_missing_s"]:  # type: ignore[operator]
        return "minor"
    return "info"


def _cause(w: Window, contended: list[Window]) -> Window | None:
    """The CPU-contention window holding at least effect_share of the gap ``w``."""
    pad = timedelta(seconds=T["effect_pad_s"])
    need = T["effect_share"] * (w[1] - w[0]).total_seconds()
    for c in contended:
        if intervals.overlap_s(w, (c[0] - pad, c[1] + pad)) >= need:
            return c
    return None


def _summary(names: list[str], w: Window, cause: Window | None, others: list[str]) -> str:
    text = f"No samples from {', '.join(names)} at {span(w)}"
    if cause is not None:
        return (
            text + f", inside the CPU contention at {span(cause)}: the collectors (nice 19) "
            "were starved of CPU; an effect of the contention, not a separate incident."
        )
    if others:
        return (
            text
            + f" while {len(others)} other collector(s) kept sampling: "
            + ("it stopped on its own" if len(names) == 1 else "they stopped on their own")
            + " (a stopped or stuck tool, or a sampler they share)."
        )
    if len(names) >= 2:
        return text + ": every collector stopped at once, so the host itself was stalled."
    return text + "."
