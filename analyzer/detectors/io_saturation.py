"""I/O saturation: a disk queueing for a sustained time, or a one-off write burst queueing it.

Per device, a sample is saturated when its queue (aqu-sz) is ≥ max(8, 5 × the device's
median), or when %util ≥ 90 together with await ≥ max(20 ms, 5 × the device's median);
≥ 5 s of such samples (merge gap 5 s) are a saturation window. %util alone means little
on NVMe/RAID/virtio (many requests in parallel), so it never decides on its own. Medians
are taken outside the windows (two passes).

A write-burst episode that `checkpoint_stall` does not report (not periodic, no GPU dip)
and that queued the disk is a one-off write burst, reported here on the device that wrote
it — joined with the saturation windows it overlaps. Windows overlapping a reported
CHECKPOINT_STALL are left to that detector.

Every statistic quoted is named (median, mean or max) and computed over exactly the
device's samples of the window: a sample stamped ``t`` covers the grid seconds
``(t - step, t]`` (`analyzer.signals`), so it belongs to the window when those seconds do.
"""

from __future__ import annotations

import polars as pl

from analyzer import intervals
from analyzer.detectors import checkpoint_stall, gpu_starvation
from analyzer.detectors._base import Context, gpu_loss_severity, r, span, worst
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window, overlap_s

NAME = "io_saturation"
INPUTS = (
    "iostat_device (iostat -x) or sar_disk (sar -d): util, await, aqu-sz per device",
    "optional: pidstat -d (the busiest writer), the write-burst signals of checkpoint_stall",
)
THRESHOLDS = {
    "util_pct": 90.0,
    "await_abs_ms": 20.0,
    "await_rel": 5.0,
    "aqu_sz": 8.0,  # a queue of >= 8 requests ...
    "aqu_rel": 5.0,  # ... and 5x the device's median saturates on its own
    "min_s": 5,
    "merge_gap_s": 5,
    "major_min_s": 60,
}
T = THRESHOLDS
# One row per device and sample second; the same names for both sources (sar -d has one
# await for reads and writes, quoted as w_await).
_Q = {
    "iostat_device": """SELECT device AS dev, second_of(ts) AS ts, avg(util_pct) AS util,
        avg(coalesce(w_await_ms, await_ms)) AS wa, avg(coalesce(r_await_ms, await_ms)) AS ra,
        avg(greatest(coalesce(r_await_ms, 0), coalesce(w_await_ms, 0), coalesce(await_ms, 0))) AS aw,
        avg(aqu_sz) AS q, avg(coalesce(rkb_s, kb_read_s)) AS rkb, avg(coalesce(wkb_s, kb_wrtn_s)) AS wkb,
        avg(w_s) AS ws
        FROM iostat_device WHERE since_boot IS NOT TRUE AND is_partition IS NOT TRUE AND is_group IS NOT TRUE AND ts IS NOT NULL
        AND util_pct IS NOT NULL GROUP BY 1, 2""",
    "sar_disk": """SELECT dev, second_of(ts) AS ts, avg(util_pct) AS util, avg(await_ms) AS wa,
        avg(await_ms) AS ra, avg(await_ms) AS aw, avg(aqu_sz) AS q, avg(rkb_s) AS rkb, avg(wkb_s) AS wkb,
        NULL::DOUBLE AS ws FROM sar_disk WHERE ts IS NOT NULL GROUP BY 1, 2""",
}
_TOOL = {"iostat_device": "iostat", "sar_disk": "sar -d"}


def _devices(ctx: Context, table: str, bursts: list[Window]) -> pl.DataFrame | None:
    """Samples of the devices that can saturate (some sample with %util ≥ 90 or aqu-sz
    ≥ 8) or that wrote in one of ``bursts``; the other devices' rows — 16 disks over a day
    are over a million — stay in DuckDB. None when the table has no %util sample at all.
    ``t`` is the first grid second each sample covers."""
    df = ctx.query(
        f"""WITH a AS MATERIALIZED ({_Q[table]}),
            w AS (SELECT unnest($lo::TIMESTAMPTZ[]) AS lo, unnest($hi::TIMESTAMPTZ[]) AS hi),
            hot AS (SELECT dev FROM a GROUP BY dev HAVING max(util) >= {T["util_pct"]} OR max(q) >= {T["aqu_sz"]}
                    UNION SELECT dev FROM a JOIN w ON a.ts >= w.lo AND a.ts < w.hi GROUP BY dev HAVING sum(wkb) > 0)
            SELECT a.*, (SELECT count(*) FROM a) AS n FROM a JOIN hot USING (dev)
            UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT count(*) FROM a)
            WHERE NOT EXISTS (SELECT 1 FROM hot) ORDER BY 1, 2""",
        {"lo": [w[0] for w in bursts], "hi": [w[1] for w in bursts]},
    )
    if df.height == 0 or not df["n"][0]:
        return None
    df = df.filter(pl.col("dev").is_not_null()).with_columns(
        pl.col("ts").dt.convert_time_zone("UTC")
    )
    step = pl.col("ts").diff().dt.total_seconds().median().over("dev").fill_null(1).clip(1)
    return df.with_columns(step=step).with_columns(
        t=pl.col("ts") - pl.duration(seconds=pl.col("step").round(0).cast(pl.Int64) - 1)
    )


def _in(w: Window) -> pl.Expr:
    return (pl.col("t") >= w[0]) & (pl.col("t") < w[1])


def _saturated(sub: pl.DataFrame) -> tuple[list[Window], dict[str, float]]:
    """A device's saturation windows and thresholds (two passes: medians outside the
    first pass's windows)."""
    wins: list[Window] = []
    step = float(sub["step"][0])
    for _ in range(2):
        out = sub.filter(~pl.any_horizontal([_in(w) for w in wins])) if wins else sub
        lv = {
            "await": max(T["await_abs_ms"], T["await_rel"] * float(out["aw"].median() or 0.0)),
            "aqu": max(T["aqu_sz"], T["aqu_rel"] * float(out["q"].median() or 0.0)),
        }
        hot = sub.select(
            pl.when(pl.col("util").is_null() & pl.col("q").is_null())
            .then(None)
            .otherwise(
                (
                    (pl.col("q") >= lv["aqu"]).fill_null(False)
                    | ((pl.col("util") >= T["util_pct"]) & (pl.col("aw") >= lv["await"])).fill_null(
                        False
                    )
                ).cast(pl.Float64)
            )
        ).to_series()
        frame = intervals.runs(
            sub["t"],
            hot,
            enter=1.0,
            step_s=step,
            min_duration_s=T["min_s"],
            merge_gap_s=T["merge_gap_s"],
        )
        wins = intervals.as_windows(frame)
    return wins, lv


def _writer_device(df: pl.DataFrame, w: Window) -> str | None:
    """The device that wrote the most in ``w``."""
    got = (
        df.filter(_in(w))
        .group_by("dev")
        .agg(pl.col("wkb").sum().alias("kb"))
        .filter(pl.col("kb") > 0)
        .sort(["kb", "dev"], descending=[True, False])
    )
    return got["dev"][0] if got.height else None


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    table = next((t for t in _Q if ctx.rows(t)), None)
    if table is None:
        return NotEvaluated(NAME, "needs per-device disk statistics: iostat -x (or sar -d)")
    skip = checkpoint_stall.stall_windows(ctx)
    bursts = [w for w in checkpoint_stall.one_off_bursts(ctx) if checkpoint_stall.queued(ctx, w)]
    df = _devices(ctx, table, bursts)
    if df is None:
        return NotEvaluated(NAME, f"{table} has no %util samples (iostat without -x?)")
    owner = {w: _writer_device(df, w) for w in bursts}
    out = []
    for (dev,), sub in df.group_by("dev", maintain_order=True):
        sat, lv = _saturated(sub)
        sat = [
            w
            for w, hit in zip(sat, checkpoint_stall.overlapping(sat, skip), strict=True)
            if not hit
        ]
        mine = [w for w in bursts if owner[w] == dev]
        joined = _joined(sat, mine)
        other = sub.filter(~pl.any_horizontal([_in(j) for j in joined])) if joined else sub
        for w in joined:
            parts = (
                [s for s in sat if overlap_s(s, w) > 0],
                [b for b in mine if overlap_s(b, w) > 0],
            )
            s = _stats(sub.filter(_in(w)), other)
            out.append(_finding(ctx, _TOOL[table], dev, s, w, parts, lv))
    return out


def _joined(sat: list[Window], bursts: list[Window]) -> list[Window]:
    """Saturation windows and write bursts of one device, overlapping ones joined."""
    if not sat and not bursts:
        return []
    frame = pl.DataFrame(
        {"start": [a for a, _ in sat + bursts], "end": [b for _, b in sat + bursts]},
        schema={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")},
    )
    return intervals.as_windows(intervals.merge(frame))


def _stats(inside: pl.DataFrame, other: pl.DataFrame) -> dict[str, float | int | None]:
    """Named statistics over exactly the device's samples of a window (``inside``), and
    the median of its samples outside every window (``other``: the baseline)."""

    def st(frame: pl.DataFrame, col: str, how: str) -> float | None:
        v = frame[col].drop_nulls()
        return float(getattr(v, how)()) if v.len() else None  # type: ignore[arg-type]

    out: dict[str, float | int | None] = {"n": inside.height}
    for col in ("util", "wa", "ra", "aw", "q", "wkb", "rkb", "ws"):
        for how in ("median", "mean", "max"):
            out[f"{col}_{how}"] = st(inside, col, how)
        out[f"{col}_base"] = st(other, col, "median")
    return out


def _device_evidence(dev: str, s: dict, tool: str) -> list[Evidence]:
    """The device's evidence, each row naming its statistic and sample count."""
    n = s["n"]
    over = f"over the window's {n} {tool} samples"
    base = "baseline: median of the device's samples outside its windows"

    def row(col: str, label: str, unit: str, how: str, nd: int = 2) -> Evidence:
        rest = ", ".join(
            f"{h} {s[f'{col}_{h}']:.{nd}f}"
            for h in ("median", "mean", "max")
            if h != how and s[f"{col}_{h}"] is not None
        )
        note = f"{how} {over} ({rest}); {base}"
        return Evidence(
            f"{dev} {label}", r(s[f"{col}_{how}"], nd), r(s[f"{col}_base"], nd), unit, note
        )

    ev = [
        row("wa", "w_await_ms", "ms", "median"),
        row("ra", "r_await_ms", "ms", "median"),
        row("q", "aqu_sz", "requests", "median"),
        row("util", "util_pct", "%", "mean", 1),
        row("wkb", "write_kb_s", "kB/s", "mean", 0),
        row("rkb", "read_kb_s", "kB/s", "mean", 0),
    ]
    if s["ws_mean"] is not None:
        ev.append(row("ws", "w_per_s", "1/s", "mean", 0))
    return ev


def _finding(
    ctx: Context,
    tool: str,
    dev: str,
    s: dict,
    w: Window,
    parts: tuple[list[Window], list[Window]],
    lv: dict[str, float],
) -> Finding:
    sat, bursts = parts
    dur = (w[1] - w[0]).total_seconds()
    sat_s = sum((b - a).total_seconds() for a, b in sat)
    gbase, _ = ctx.gpu_dips()
    near = [d for d in gpu_starvation.dips_of(ctx, "io") if overlap_s(w, d) > 0]
    lost = sum(ctx.gpu_seconds_lost(d, gbase) or 0.0 for d in near) if near else None
    wev, writer, who = checkpoint_stall.writer_evidence(ctx, w)
    text = (
        _summary(ctx, dev, w, s, sat, bursts, tool)
        + " "
        + (f"Busiest {writer}." if writer else _no_writer(ctx, w))
    )
    if bursts and not sat:
        text += " " + checkpoint_stall.gpu_text(ctx, w, near, lost)
    impact: dict = {"saturated_s": sat_s, "window_s": dur, "write_bursts": len(bursts)}
    if who:
        impact["who"] = who
    if lost is not None:
        impact["gpu_seconds_lost"] = r(lost, 1)
    return Finding(
        key="IO_SATURATION",
        kind=NAME,
        title=f"Disk {dev} saturated ({sat_s:.0f} s)"
        if sat
        else f"Write burst queued disk {dev} ({dur:.0f} s)",
        severity=worst(
            _own_severity(ctx, sat_s, s, lv),
            gpu_loss_severity(lost, ctx.gpu_capacity_s()) if near else None,
        ),
        start=w[0],
        end=w[1],
        summary=text.strip(),
        impact=impact,
        evidence=_device_evidence(dev, s, tool) + wev + _readers(ctx, w),
        remediation=_remediation(dev, bool(bursts)),
    )


def _own_severity(ctx: Context, sat_s: float, s: dict, lv: dict[str, float]) -> str:
    """``major`` for ≥ 60 s saturated at twice the await level; a write burst alone is
    ``info`` when the GPUs of a GPU-bound job kept working, else ``minor``."""
    if sat_s > 0:
        slow = (s["aw_max"] or 0) >= 2 * lv["await"]
        return "major" if sat_s >= T["major_min_s"] and slow else "minor"
    return "info" if checkpoint_stall.gpu_evaluated(ctx) else "minor"


def _no_writer(ctx: Context, w: Window) -> str:
    """Why no writer is named: pidstat missing, or none of the processes it followed wrote."""
    if "pidstat_rows" not in ctx.cache:
        ctx.cache["pidstat_rows"] = ctx.rows("pidstat")
    if not ctx.cache["pidstat_rows"]:
        return "No pidstat in the bundle: the writer is not known."
    n = ctx.query(
        "SELECT count(DISTINCT pid) AS n FROM pidstat WHERE tid IS NULL AND ts >= $lo AND ts < $hi",
        {"lo": w[0], "hi": w[1]},
    )["n"][0]
    return (
        f"pidstat followed {n} process{'es' if n != 1 else ''} here and none wrote 1 MB or more:"
        " the writer is another process (a child of one of them, or outside the capture's"
        " --pid list)."
    )


def _summary(
    ctx: Context, dev: str, w: Window, s: dict, sat: list[Window], bursts: list[Window], tool: str
) -> str:
    """What the device did in ``w``, every number named by its statistic and computed over
    the window's samples of that device."""
    over = f"over the window's {s['n']} {tool} samples of {dev}"
    wa = (
        f"w_await median {s['wa_median'] or 0:.1f} ms (max {s['wa_max'] or 0:.1f} ms; "
        f"median {s['wa_base'] or 0:.1f} ms outside)"
    )
    if sat:
        return (
            f"Disk {dev} was saturated at {span(w)}: aqu-sz median {s['q_median'] or 0:.1f} "
            f"(max {s['q_max'] or 0:.1f}) and {wa} {over}; %util mean {s['util_mean'] or 0:.0f} %,"
            f" writes mean {(s['wkb_mean'] or 0) / 1024:.0f} MB/s, reads mean "
            f"{(s['rkb_mean'] or 0) / 1024:.0f} MB/s." + _burst_note(ctx, bursts)
        )
    facts = checkpoint_stall.burst_facts(ctx, w)
    pc = checkpoint_stall.page_cache_text(facts)
    wrote = (
        f"{checkpoint_stall.gb_text((s['wkb_mean'] or 0) * s['n'] / 1024)} written to {dev} at up to "
        f"{(s['wkb_max'] or 0) / 1024:.0f} MB/s"
    )
    return (
        f"One-off write burst at {span(w)} (not periodic: a single checkpoint or large file "
        f"write): {pc + ', then ' if pc else ''}{wrote}. Requests queued on {dev} while it "
        f"wrote: aqu-sz max {s['q_max'] or 0:.1f} (median {s['q_median'] or 0:.1f}) and {wa} {over}."
    )


def _burst_note(ctx: Context, bursts: list[Window]) -> str:
    """' It includes a one-off write burst at …: …' for each burst inside a saturation."""
    out = ""
    for b in bursts:
        facts = checkpoint_stall.burst_facts(ctx, b)
        pc = checkpoint_stall.page_cache_text(facts)
        disk = (
            f"{checkpoint_stall.gb_text(facts['disk_mb'])} written at up to "
            f"{facts['disk_peak_mb_s']:.0f} MB/s"
        )
        out += f" It includes a one-off write burst at {span(b)}: {pc + ', then ' if pc else ''}{disk}."
    return out


def _readers(ctx: Context, w: Window, limit: int = 3) -> list[Evidence]:
    """pidstat -d: the processes that read the most in ``w`` (mean kB_rd/s)."""
    if "pidstat_rows" not in ctx.cache:
        ctx.cache["pidstat_rows"] = ctx.rows("pidstat")
    if not ctx.cache["pidstat_rows"]:
        return []
    df = ctx.query(
        "SELECT pid, arg_max(command, kb_rd_s) AS cmd, avg(kb_rd_s) AS rd FROM pidstat "
        "WHERE tid IS NULL AND since_boot IS NOT TRUE AND ts >= $lo AND ts < $hi "
        "GROUP BY pid HAVING avg(kb_rd_s) > 0 ORDER BY rd DESC, pid LIMIT $n",
        {"lo": w[0], "hi": w[1], "n": limit},
    )
    return [
        Evidence(
            "process_read_kb_s",
            r(row["rd"]),
            None,
            "kB/s",
            f"pid {row['pid']} {row['cmd']}: mean kB_rd/s over the window's pidstat samples",
        )
        for row in df.iter_rows(named=True)
    ]


def _remediation(dev: str, burst: bool) -> list[str]:
    out = [
        "Find who does the I/O: `pidstat -d 1`, `iotop -oP`, per cgroup io.stat.",
        f"Check the device: `cat /sys/block/{dev}/queue/scheduler` (none for NVMe, mq-deadline for SATA/SAS), queue depth `/sys/block/{dev}/queue/nr_requests`, health `nvme smart-log` / `smartctl -a`.",
        "Keep training input off the contended device: stage the dataset on local NVMe or in page cache, raise DataLoader prefetch_factor; limit noisy neighbours with io.max / io.weight.",
    ]
    if burst:
        out.insert(
            0,
            "If the burst is a checkpoint: save asynchronously (torch.distributed.checkpoint.async_save) and smooth write-back (`vm.dirty_background_bytes=268435456`, `vm.dirty_bytes=1073741824`).",
        )
    return out
