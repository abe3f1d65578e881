"""Checkpoint stalls: write bursts that repeat, or that the GPUs idled in.

A write burst is found from host signals alone: seconds where disk writes, write latency
(w_await) or page-cache writes (growth of Dirty + Writeback) jump well above the capture's
own baseline. Its *episode* lasts from the first such second until the data is on disk:
while Dirty + Writeback stays high a burst stays open, so a buffered write (page cache
first, the flusher's write-back ~30 s later) is one episode, not two. Episodes that write
less than 128 MB are dropped. Episodes that repeat evenly (≥ 3, spacing CV < 0.25; among
all episodes, else among those that queued the disk) are a checkpoint series, reported as
one periodic incident; a non-periodic episode counts here when a GPU-dip segment caused
by I/O lies within 3 s of it. The other episodes are one-off write bursts, left to
`io_saturation` (which reports those that queued the disk).

Severity: the GPU time lost when there is GPU data; otherwise ``minor`` when the episode
queued the disk (aqu-sz ≥ max(8, 5 × median) or w_await ≥ max(20 ms, 5 × median): the
writer, and everyone else on the device, waited) and ``info`` when the device absorbed it.
iowait is not used to detect: busy CPUs hide it (a CPU with runnable work is never
"iowait"; real captures show ~0 % during the burst).
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from analyzer import intervals
from analyzer.detectors import _dips
from analyzer.detectors._base import GPU_DIP, Context, epoch_us, gpu_loss_severity, r, span, worst
from analyzer.detectors._who import by_command, with_identity
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window, overlap_s, periodicity

NAME = "checkpoint_stall"
INPUTS = (
    "disk_write_kb_s or disk_w_await_max_ms (iostat -x / sar -d)",
    "optional: page_cache_growth_kb_s, dirty_kb, writeback_kb (meminfo), disk_aqu_sz_max, "
    "gpu_util_mean_pct, pidstat -d (the writer), psi_io_*, biolat_p99_us",
)
THRESHOLDS = {
    "write_abs_kb_s": 51200.0,  # a burst writes at least 50 MB/s ...
    "write_rel": 5.0,  # ... and 5x the capture's median write rate
    "page_cache_abs_kb_s": 102400.0,  # or fills the page cache at least 100 MB/s ...
    "await_abs_ms": 20.0,  # or w_await at least 20 ms ...
    "await_rel": 5.0,  # ... and 5x its median
    "leave_frac": 0.5,  # hysteresis: the burst lasts while above half the entry level
    "keep_open_kb": 131072.0,  # and while Dirty + Writeback >= 128 MB ...
    "keep_open_rel": 5.0,  # ... and 5x its median (not yet on disk)
    "min_s": 1,  # one 1 s iostat sample of a fsync flush is a burst
    "min_written_kb": 131072.0,  # an episode writes >= 128 MB (disk or page cache)
    "merge_gap_s": 3,
    "queue_aqu_sz": 8.0,  # queued: aqu-sz >= 8 ...
    "queue_rel": 5.0,  # ... and 5x its median, or w_await at the await level above
    "periodic_min_count": 3,
    "periodic_max_cv": 0.25,
    "periodic_size_ratio": 2.0,  # a series' episodes write within 2x of their median
    "gpu_pad_s": 3,  # a GPU dip within 3 s of a burst belongs to it
}
T = THRESHOLDS
_LEVELS = {
    "disk_write_kb_s": ("write_abs_kb_s", "write_rel"),
    "page_cache_write_kb_s": ("page_cache_abs_kb_s", "write_rel"),
    "disk_w_await_max_ms": ("await_abs_ms", "await_rel"),
}


def overlapping(windows: list[Window], targets: list[Window], pad_s: float = 0.0) -> list[bool]:
    """Per window: does it overlap any of ``targets`` widened by ``pad_s``? One binary
    search per window over the merged targets (thousands of bursts in a day stay fast)."""
    if not windows or not targets:
        return [False] * len(windows)
    pad = timedelta(seconds=pad_s)
    dt = pl.Datetime("us", "UTC")
    frame = pl.DataFrame(
        {"start": [a - pad for a, _ in targets], "end": [b + pad for _, b in targets]},
        schema={"start": dt, "end": dt},
    )
    merged = intervals.merge(frame)
    idx = merged["start"].search_sorted(pl.Series([b for _, b in windows], dtype=dt), "left") - 1
    ok = idx >= 0
    ends = merged["end"].gather(idx.clip(lower_bound=0).cast(pl.UInt32))
    starts = pl.Series([a for a, _ in windows], dtype=dt)
    return (ok & (ends > starts)).to_list()


def _rates(ctx: Context) -> dict[str, pl.Series]:
    """The signals that open a burst: disk writes, write latency and page-cache writes
    (growth of Dirty + Writeback per second between meminfo samples: what the application
    wrote before write-back reaches the disk — a buffered checkpoint shows here first)."""
    out = {c: ctx.signals[c] for c in ("disk_write_kb_s", "disk_w_await_max_ms") if ctx.has(c)}
    if ctx.has("page_cache_growth_kb_s"):
        growth = ctx.signals["page_cache_growth_kb_s"].clip(lower_bound=0.0)
        out["page_cache_write_kb_s"] = growth.alias("page_cache_write_kb_s")
    return out


def _pending(ctx: Context) -> pl.Series | None:
    """Dirty + Writeback (kB): data written but not yet on disk."""
    if not ctx.has("dirty_kb"):
        return None
    wb = pl.col("writeback_kb").fill_null(0.0) if ctx.has("writeback_kb") else pl.lit(0.0)
    return ctx.signals.select((pl.col("dirty_kb") + wb).alias("pending"))["pending"]


def _opening(
    ctx: Context, rates: dict[str, pl.Series], windows: list[Window], base: dict
) -> pl.Series:
    """Per second, the largest ratio of a burst signal to its threshold (≥ 1 opens a
    burst); baselines (into ``base``): medians outside ``windows``."""
    outside = ~ctx.mask(windows)
    ratios = []
    for col, values in rates.items():
        kept = values.filter(outside).drop_nulls()
        base[col] = float(kept.median()) if kept.len() else None  # type: ignore[arg-type]
        absolute, rel = (T[k] for k in _LEVELS[col])
        ratios.append(values / max(absolute, rel * (base[col] or 0.0)))
    return pl.DataFrame(ratios).select(pl.max_horizontal(pl.all()).alias("x"))["x"]


def _held(ctx: Context, windows: list[Window], base: dict) -> list[Window]:
    """Runs where Dirty + Writeback ≥ max(128 MB, 5 × its median outside ``windows``):
    data written and not yet on disk (they keep a burst open; they never open one)."""
    pending = _pending(ctx)
    if pending is None:
        return []
    kept = pending.filter(~ctx.mask(windows)).drop_nulls()
    base["pending_kb"] = float(kept.median()) if kept.len() else None  # type: ignore[arg-type]
    level = max(T["keep_open_kb"], T["keep_open_rel"] * (base["pending_kb"] or 0.0))
    return ctx.runs(pending / level, 1.0, gap_s=T["merge_gap_s"])


def _episodes(opened: list[Window], held: list[Window]) -> list[Window]:
    """Opened bursts joined with the pending-data runs they touch (merge gap): one
    episode from the first opened second until the data is on disk. Pending data only
    extends an episode forward: a 5 s meminfo sample's level, spread over the 5 seconds
    before it, would otherwise start the episode up to 4 s before the first write."""
    dt = pl.Datetime("us", "UTC")
    frame = pl.DataFrame(
        {"start": [a for a, _ in opened + held], "end": [b for _, b in opened + held]},
        schema={"start": dt, "end": dt},
    )
    merged = intervals.merge(frame, T["merge_gap_s"])
    starts = pl.Series([a for a, _ in opened], dtype=dt).sort()
    idx = starts.search_sorted(merged["start"], "left")
    first = starts.gather(idx.clip(upper_bound=max(starts.len() - 1, 0)).cast(pl.UInt32))
    got = merged.with_columns(first=first, hit=(idx < starts.len()) & (first < pl.col("end")))
    got = got.filter(pl.col("hit")).select(pl.col("first").alias("start"), "end")
    return intervals.as_windows(got)


def per_window(ctx: Context, windows: list[Window], expr: pl.Expr, how: str) -> list[float | None]:
    """``how`` (sum, max) of ``expr`` over the signals rows of each of ``windows`` (sorted,
    disjoint), in one pass: each row finds its window by binary search."""
    if not windows:
        return []
    ts, _ = ctx.ts_us()
    starts = pl.Series([epoch_us(a) for a, _ in windows], dtype=pl.Int64)
    ends = pl.Series([epoch_us(b) for _, b in windows], dtype=pl.Int64)
    idx = starts.search_sorted(ts, side="right").cast(pl.Int64) - 1
    inside = (idx >= 0) & (ts < ends.gather(idx.clip(lower_bound=0)))
    got = (
        ctx.signals.select(v=expr)
        .with_columns(w=idx)
        .filter(inside)
        .group_by("w")
        .agg(getattr(pl.col("v"), how)())
    )
    found = dict(zip(got["w"].to_list(), got["v"].to_list(), strict=True))
    return [found.get(i) for i in range(len(windows))]


def _written_kb(ctx: Context, windows: list[Window]) -> list[float]:
    """What each episode wrote: the larger of the disk writes and the page-cache growth."""
    cols = [c for c in ("disk_write_kb_s", "page_cache_growth_kb_s") if c in ctx.signals.columns]
    larger = pl.max_horizontal([pl.col(c).clip(lower_bound=0.0).fill_null(0.0) for c in cols])
    return [v or 0.0 for v in per_window(ctx, windows, larger, "sum")] if cols else []


def _bursts(ctx: Context) -> tuple[list[Window], list[Window], dict[str, float | None]]:
    """(episodes, the seconds they write in, baselines); cached. Two passes: the second
    takes its baselines outside the first pass's episodes."""
    if "write_bursts" not in ctx.cache:
        base: dict[str, float | None] = {}
        episodes: list[Window] = []
        active: list[Window] = []
        rates = _rates(ctx) if ctx.any_of("disk_write_kb_s", "disk_w_await_max_ms") else {}
        for _ in range(2 if rates else 0):
            opening = _opening(ctx, rates, episodes, base)
            opened = ctx.runs(opening, 1.0, T["leave_frac"], gap_s=T["merge_gap_s"])
            opened = [w for w in opened if (w[1] - w[0]).total_seconds() >= T["min_s"]]
            found = _episodes(opened, _held(ctx, episodes, base))
            written = _written_kb(ctx, found)
            episodes = [
                w for w, kb in zip(found, written, strict=True) if kb >= T["min_written_kb"]
            ]
            active = [
                a for a, hit in zip(opened, overlapping(opened, episodes), strict=True) if hit
            ]
        ctx.cache["write_bursts"] = (episodes, active, base)
    return ctx.cache["write_bursts"]


def write_bursts(ctx: Context) -> tuple[list[Window], dict[str, float | None]]:
    """The seconds write bursts write in (page-cache fill, flush), with the baselines:
    what a GPU dip is compared with (`analyzer.detectors._dips`)."""
    _, active, base = _bursts(ctx)
    return active, base


def episodes(ctx: Context) -> list[Window]:
    """Write-burst episodes: first write until the data is on disk (what is reported)."""
    return _bursts(ctx)[0]


def outside_median(ctx: Context, col: str) -> float | None:
    """Median of ``col`` over the seconds outside the episodes (cached)."""
    key = ("checkpoint_base", col)
    if key not in ctx.cache:
        if "checkpoint_outside" not in ctx.cache:
            ctx.cache["checkpoint_outside"] = ~ctx.mask(episodes(ctx))
        s = ctx.signals[col].filter(ctx.cache["checkpoint_outside"]).drop_nulls()
        ctx.cache[key] = float(s.median()) if s.len() else None  # type: ignore[arg-type]
    return ctx.cache[key]


def queued(ctx: Context, w: Window) -> bool:
    """True when requests queued on the disk during episode ``w``: aqu-sz ≥ max(8, 5 ×
    median) or w_await ≥ max(20 ms, 5 × median), medians outside the episodes."""
    if "checkpoint_queued" not in ctx.cache:
        eps = episodes(ctx)
        flags = [False] * len(eps)
        for col, absolute, rel in (
            ("disk_aqu_sz_max", T["queue_aqu_sz"], T["queue_rel"]),
            ("disk_w_await_max_ms", T["await_abs_ms"], T["await_rel"]),
        ):
            if ctx.has(col):
                level = max(absolute, rel * (outside_median(ctx, col) or 0.0))
                peaks = per_window(ctx, eps, pl.col(col), "max")
                flags = [
                    f or (p is not None and p >= level) for f, p in zip(flags, peaks, strict=True)
                ]
        ctx.cache["checkpoint_queued"] = dict(zip(eps, flags, strict=True))
    return ctx.cache["checkpoint_queued"].get(w, False)


def io_segments(ctx: Context) -> list[_dips.Segment]:
    """GPU-dip segments caused by I/O (see `analyzer.detectors._dips`)."""
    return [s for s in _dips.segments(ctx, write_bursts(ctx)[0]) if s.cause == "io"]


def _similar(ctx: Context, cand: list[Window]) -> list[Window]:
    """The episodes of ``cand`` that wrote within a factor ``periodic_size_ratio`` of their
    median: one job's checkpoints are about the same size each time."""
    if not cand:
        return []
    kb = dict(zip(cand, _written_kb(ctx, cand), strict=True))
    med = float(pl.Series(list(kb.values())).median())  # type: ignore[arg-type]
    k = T["periodic_size_ratio"]
    return [w for w in cand if med / k <= kb[w] <= med * k]


def _series(ctx: Context) -> tuple[list[Window], tuple[float, float] | None]:
    """The periodic episodes and their (period, cv): episodes of about the same size that
    repeat evenly — among all episodes, else among those that queued the disk (other
    writers' bursts in between do not hide them)."""
    eps = episodes(ctx)
    for cand in (eps, [w for w in eps if queued(ctx, w)]):
        same = _similar(ctx, cand)
        per = periodicity(
            [a for a, _ in same],
            min_count=int(T["periodic_min_count"]),
            max_cv=T["periodic_max_cv"],
        )
        if per:
            return same, per
    return [], None


def stall_windows(ctx: Context) -> list[Window]:
    """The episodes this detector reports (periodic ones, or ones the GPUs idled in)."""
    if "checkpoint_windows" not in ctx.cache:
        periodic, per = _series(ctx)
        segs = io_segments(ctx)
        eps, series = episodes(ctx), set(periodic)
        near = overlapping(eps, [s.window for s in segs], T["gpu_pad_s"])
        keep = [w for w, n in zip(eps, near, strict=True) if n or w in series]
        ctx.cache["checkpoint_windows"] = keep
        ctx.cache["checkpoint_series"] = (periodic, per)
    return ctx.cache["checkpoint_windows"]


def one_off_bursts(ctx: Context) -> list[Window]:
    """Episodes this detector does not report (no series, no GPU dip): `io_saturation`'s."""
    stalls = set(stall_windows(ctx))
    return [w for w in episodes(ctx) if w not in stalls]


def _near(w: Window, d: Window) -> bool:
    pad = timedelta(seconds=T["gpu_pad_s"])
    return overlap_s((w[0] - pad, w[1] + pad), d) > 0


def gpu_evaluated(ctx: Context) -> bool:
    """True when GPU dips can be measured (GPU data and a GPU-bound job)."""
    base, _ = ctx.gpu_dips()
    return base is not None and base >= GPU_DIP["min_baseline_pct"]


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.any_of("disk_write_kb_s", "disk_w_await_max_ms"):
        return NotEvaluated(NAME, "needs disk write throughput or latency: iostat -x (or sar -d)")
    stalls = stall_windows(ctx)
    periodic, per = ctx.cache["checkpoint_series"]
    series = set(periodic)
    segs = [s.window for s in io_segments(ctx)]
    occ = []
    for w in stalls:
        near = [d for d in segs if _near(w, d)]
        lost = (
            sum(ctx.gpu_seconds_lost(d) or 0.0 for d in near) if near else ctx.gpu_seconds_lost(w)
        )
        occ.append((w, near, lost))
    gsev = None
    if gpu_evaluated(ctx):
        gsev = gpu_loss_severity(sum(x[2] or 0.0 for x in occ), ctx.gpu_capacity_s())
    out = []
    for i, (w, near, lost) in enumerate(occ, 1):
        sev = worst(gsev, "minor" if queued(ctx, w) else "info")
        in_series = per if w in series else None
        out.append(_finding(ctx, i, len(occ), w, near, lost, sev, in_series, len(periodic)))
    return out


def top_writers(ctx: Context, w: Window, limit: int = 12) -> pl.DataFrame:
    """pidstat -d over ``w``: per process its peak kB_wr/s (writes to disk or the page
    cache), its mean over the window's pidstat reports (a report without the process
    counting 0: pidstat prints only active tasks), what it wrote (MB) and its peak
    %system; busiest writer first."""
    if "pidstat_rows" not in ctx.cache:
        ctx.cache["pidstat_rows"] = ctx.rows("pidstat")
    if not ctx.cache["pidstat_rows"]:
        return pl.DataFrame()
    return ctx.query(
        "WITH r AS (SELECT * FROM pidstat WHERE tid IS NULL AND since_boot IS NOT TRUE "
        "AND ts >= $lo AND ts < $hi), k AS (SELECT count(DISTINCT ts) AS reports FROM r) "
        "SELECT pid, arg_max(command, kb_wr_s) AS cmd, max(kb_wr_s) AS peak, "
        "sum(kb_wr_s) / any_value(k.reports) AS mean, sum(kb_wr_s) * $iv / 1024 AS mb, "
        "max(system_pct) AS sys, sum(coalesce(kb_rd_s, 0)) / any_value(k.reports) AS rd "
        "FROM r, k GROUP BY pid HAVING sum(kb_wr_s) * $iv >= 1024 ORDER BY mb DESC, pid LIMIT $n",
        {"lo": w[0], "hi": w[1], "iv": float(ctx.interval_s or 1.0), "n": limit},
    )


def writer_evidence(ctx: Context, w: Window) -> tuple[list[Evidence], str, list[dict]]:
    """Evidence rows for the three busiest writers in ``w``, a phrase naming the first, and
    the writing commands with their MB added (``impact["who"]``)."""
    df = top_writers(ctx, w)
    ev = [
        Evidence(
            "process_write_kb_s",
            r(row["peak"]),
            None,
            "kB/s",
            f"pid {row['pid']} {row['cmd']}: peak kB_wr/s over the window's pidstat samples "
            f"(mean {row['mean']:.0f}; {row['mb']:.0f} MB written; %system up to {row['sys'] or 0:.0f} %)",
        )
        for row in df.head(3).iter_rows(named=True)
    ]
    if df.height == 0:
        return ev, "", []
    who = [
        g | {"share": r(g["share"], 0), "unit": "MB written"}
        for g in by_command(with_identity(ctx, df.to_dicts(), w), key="mb")
    ]
    top = df.row(0, named=True)
    return (
        ev,
        (
            f"writer pid {top['pid']} {top['cmd']} ({top['mb']:.0f} MB at up to "
            f"{top['peak'] / 1024:.0f} MB/s, %system up to {top['sys'] or 0:.0f} %)"
        ),
        who,
    )


def burst_facts(ctx: Context, w: Window) -> dict[str, float | None]:
    """What an episode did: MB into the page cache and to disk, peak rates (MB/s), peak
    w_await, queue and host %sys (None where the signal is missing)."""
    rows = ctx.rows_in(w)

    def agg(col: str, how: str, scale: float = 1.0) -> float | None:
        if col not in rows.columns or rows[col].null_count() == rows.height:
            return None
        v = rows[col].clip(lower_bound=0.0) if how == "sum" else rows[col]
        return float(getattr(v, how)()) * scale

    mb = 1 / 1024
    return {
        "page_cache_mb": agg("page_cache_growth_kb_s", "sum", mb),
        "page_cache_peak_mb_s": agg("page_cache_growth_kb_s", "max", mb),
        "disk_mb": agg("disk_write_kb_s", "sum", mb) or 0.0,
        "disk_peak_mb_s": agg("disk_write_kb_s", "max", mb) or 0.0,
        "w_await_max_ms": agg("disk_w_await_max_ms", "max"),
        "aqu_sz_max": agg("disk_aqu_sz_max", "max"),
        "sys_max_pct": agg("cpu_sys_pct", "max"),
    }


def page_cache_text(facts: dict) -> str | None:
    """'1.41 GB into the page cache at up to 365 MB/s' (None below the burst size)."""
    mb = facts["page_cache_mb"]
    if not mb or mb < T["min_written_kb"] / 1024:
        return None
    return f"{gb_text(mb)} into the page cache at up to {facts['page_cache_peak_mb_s']:.0f} MB/s"


def burst_text(facts: dict, base: dict) -> str:
    """'1.5 GB into the page cache at up to 371 MB/s, then 1.5 GB written to disk at up
    to 1488 MB/s with w_await up to 60 ms (capture median 0.1 ms) and aqu-sz up to 23'."""
    disk = (
        f"{gb_text(facts['disk_mb'])} written to disk at up to {facts['disk_peak_mb_s']:.0f} MB/s"
    )
    if facts["w_await_max_ms"] is not None:
        disk += f" with w_await up to {facts['w_await_max_ms']:.0f} ms"
        if base.get("disk_w_await_max_ms") is not None:
            disk += f" (capture median {base['disk_w_await_max_ms']:.1f} ms)"
    if facts["aqu_sz_max"] is not None:
        disk += f" and aqu-sz up to {facts['aqu_sz_max']:.1f}"
    pc = page_cache_text(facts)
    return f"{pc}, then {disk}" if pc else disk


def gpu_text(ctx: Context, w: Window, near: list[Window], lost: float | None) -> str:
    """What the GPUs did: the dip and its cost, no dip, or unknown (never invented)."""
    gbase, _ = ctx.gpu_dips()
    if not ctx.has("gpu_util_mean_pct"):
        return "No GPU data in the bundle: what the burst cost the job is unknown."
    if not gpu_evaluated(ctx):
        return "The GPUs were not busy enough to measure a stall (baseline < 50 %): the cost to the job is unknown."
    gmin = ctx.stat("gpu_util_mean_pct", (min([w[0], *(d[0] for d in near)]), w[1]), "min")
    if near and gmin is not None and gbase is not None:
        return (
            f"GPU utilisation fell from {gbase:.0f}% to {gmin:.0f}% ({lost or 0:.0f} GPU-s lost)."
        )
    return f"GPU utilisation stayed near its {gbase:.0f}% baseline: the job did not wait for it."


def gb_text(mb: float) -> str:
    return f"{mb / 1024:.2f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def _finding(
    ctx: Context,
    i: int,
    n: int,
    burst: Window,
    near: list[Window],
    lost: float | None,
    severity: str,
    per: tuple[float, float] | None,
    count: int,
) -> Finding:
    window = (min([burst[0], *(d[0] for d in near)]), max([burst[1], *(d[1] for d in near)]))
    _, _, base = _bursts(ctx)
    facts = burst_facts(ctx, burst)
    wev, writer, who = writer_evidence(ctx, burst)
    text = f"Write burst {i} of {n} at {span(burst)}: {burst_text(facts, base)}"
    text += f"; {writer}" if writer else ""
    text += f"; repeats every {per[0]:.0f} s ({count}×). " if per else ". "
    text += gpu_text(ctx, burst, near, lost)
    impact = {
        "write_burst_s": (burst[1] - burst[0]).total_seconds(),
        "written_mb": r(facts["disk_mb"], 0),
        "page_cache_mb": r(facts["page_cache_mb"], 0),
        "queued": queued(ctx, burst),
    }
    if who:
        impact["who"] = who
    if lost is not None:
        impact |= {
            "gpu_seconds_lost": r(lost, 1),
            "gpu_idle_s": sum((d[1] - d[0]).total_seconds() for d in near),
        }
    dur = (burst[1] - burst[0]).total_seconds()
    return Finding(
        key="CHECKPOINT_STALL",
        kind=NAME,
        title=f"Checkpoint write burst stalls the job ({dur:.0f} s)"
        if near
        else f"Periodic write burst ({dur:.0f} s)",
        severity=severity,
        start=window[0],
        end=window[1],
        summary=text,
        impact=impact,
        evidence=_evidence(ctx, burst, window, base, facts) + wev,
        remediation=REMEDIATION,
        series="CHECKPOINT_STALL" if per else None,
        period_s=r(per[0], 1) if per else None,
        occurrences=count if per else None,
    )


REMEDIATION = [
    "Take the write off the training step: save checkpoints asynchronously (e.g. torch.distributed.checkpoint.async_save, or copy the state to CPU and write from a background thread).",
    "Make write-back continuous instead of bursty: `sysctl -w vm.dirty_background_bytes=268435456 vm.dirty_bytes=1073741824` (256 MiB / 1 GiB) so writers are not blocked at the dirty limit.",
    "Write checkpoints to a different device than the dataset and stagger ranks' writes; check the device with `iostat -x 1` during a checkpoint (aqu-sz, w_await).",
    "Checkpoint less often or smaller (sharded/incremental checkpoints) if the device cannot absorb the burst.",
]


def _evidence(
    ctx: Context, burst: Window, window: Window, base: dict, facts: dict
) -> list[Evidence]:
    """Peaks inside the burst against the capture's baselines (outside the episodes)."""
    ev = [
        Evidence(
            "disk_write_kb_s",
            r(ctx.stat("disk_write_kb_s", burst, "max")),
            r(base.get("disk_write_kb_s")),
            "kB/s",
            "peak",
        ),
        Evidence(
            "disk_w_await_max_ms",
            r(facts["w_await_max_ms"], 2),
            r(base.get("disk_w_await_max_ms"), 2),
            "ms",
            "peak",
        ),
    ]
    if facts["page_cache_peak_mb_s"] is not None:
        ev.append(
            Evidence(
                "page_cache_write_kb_s",
                r(facts["page_cache_peak_mb_s"] * 1024),
                r(base.get("page_cache_write_kb_s")),
                "kB/s",
                "peak growth of Dirty + Writeback (buffered writes)",
            )
        )
    for col, unit in (
        ("disk_aqu_sz_max", "requests"),
        ("disk_util_max_pct", "%"),
        ("dirty_kb", "kB"),
        ("writeback_kb", "kB"),
        ("cpu_sys_pct", "%"),
        ("psi_io_some_pct", "%"),
        ("psi_io_full_pct", "%"),
        ("biolat_p99_us", "us"),
    ):
        if ctx.has(col):
            ev.append(
                Evidence(
                    col, r(ctx.stat(col, burst, "max")), r(outside_median(ctx, col)), unit, "peak"
                )
            )
    iow = ctx.stat("iowait_pct", burst, "mean")
    if iow is not None:
        note = "mean; near zero — busy CPUs hide iowait, so it is not used to detect"
        ev.append(
            Evidence(
                "iowait_pct",
                r(iow),
                r(outside_median(ctx, "iowait_pct")),
                "%",
                note if iow < 5 else "mean",
            )
        )
    gmin = ctx.stat("gpu_util_mean_pct", window, "min")
    if gmin is not None:
        ev.append(
            Evidence(
                "gpu_util_mean_pct",
                r(gmin),
                r(ctx.gpu_dips()[0]),
                "%",
                "minimum in the window vs baseline",
            )
        )
    return ev
