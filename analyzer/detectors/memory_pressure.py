"""Memory pressure: host-wide reclaim and stalls, and memory cgroups held at their limits.

Two sources of windows:

- **host**: memory PSI some / full, global direct reclaim, or kswapd reclaiming while
  MemAvailable is low (score value / threshold ≥ 1, hysteresis to 0.5);
- **cgroup** (`analyzer.detectors._memcg`): per memory cgroup, limit hits (v1 ``failcnt``,
  v2 ``memory.events`` max + high) per second, usage at the limit while evicted pages
  refault, or the cgroup's own memory PSI.

A host window in which the *global* reclaimers (kswapd, direct) were busy is host-wide
pressure: one finding without a cgroup, naming the cgroups at their limits inside it. A
host window without global reclaim (PSI only) that overlaps cgroup windows is their
stall: it is folded into those cgroup findings. Evidence: reclaim from every
``pgscan_*``/``pgsteal_*`` key of /proc/vmstat (`_memcg.reclaim_by_key`), refaults,
MemAvailable, swap; per cgroup its limit, the limit hits, refaults (re-read from disk),
page cache, PSI and the OOM kills that followed in it.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from analyzer import intervals
from analyzer.detectors import _memcg, gpu_starvation
from analyzer.detectors._base import Context, gpu_loss_severity, r, span, unit_of, worst
from analyzer.detectors._who import by_command, memory_users, with_identity
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window, overlap_s

NAME = "memory_pressure"
INPUTS = (
    "psi_mem_some_pct / psi_mem_full_pct (/proc/pressure/memory), pgscan_direct_per_s / pgscan_kswapd_per_s (/proc/vmstat, sar -B)",
    "or cgroup_memory (v1 failcnt, v2 memory.events high/max, usage vs limit) with cgroup_memory_stat and per-cgroup PSI",
    "optional: meminfo, swap, proc_vmstat (reclaim by key), cgroup_limits, dmesg OOM kills",
)
THRESHOLDS = {
    "psi_some_pct": 10.0,
    "psi_full_pct": 5.0,
    "direct_scan_abs_per_s": 1000.0,  # direct reclaim ≥ 1000 pages/s ...
    "direct_scan_rel": 10.0,  # ... and 10x its median
    "kswapd_scan_abs_per_s": 10000.0,  # kswapd ≥ 10000 pages/s (40 MB/s) ...
    "kswapd_scan_rel": 10.0,  # ... and 10x its median ...
    "avail_low_pct": 15.0,  # ... while MemAvailable ≤ 15 % of MemTotal (which also holds a window)
    "leave_frac": 0.5,
    "min_s": 5,
    "merge_gap_s": 10,
    "major_full_pct": 10.0,  # mean memory PSI full for `major`
    "oom_follow_s": 60,  # an OOM kill within 60 s after the window makes it `major`
    "cg_hits_per_s": 10.0,  # a cgroup hitting its limit ≥ 10 times/s (failcnt, events max+high)
    "cg_at_limit_pct": 97.0,  # usage ≥ 97 % of the limit ...
    "cg_refault_per_s": 256.0,  # ... while ≥ 256 evicted pages/s (1 MiB/s) refault
    "cg_swap_mb": 16.0,  # its own memory pushed to swap (≥ 16 MiB) makes it at least `minor`
}
T = THRESHOLDS
REMEDIATION = [
    "Find what grows: `ps -eo pid,rss,comm --sort=-rss | head`, `pidstat -r 1`; per cgroup `cat memory.stat` (anon vs file).",
    "Reduce the footprint (smaller batch / prefetch, fewer DataLoader workers — each copies the dataset object) or raise the limit (memory.max / k8s limits.memory); set memory.high a little below memory.max so the job is slowed before it is killed.",
    "Avoid direct reclaim stalls: keep more memory free (`sysctl -w vm.min_free_kbytes=<~1% of RAM in kB>`, `vm.watermark_scale_factor=200`); drop page cache churn from dataset reads (posix_fadvise DONTNEED / O_DIRECT).",
    "If compaction stalls appear (THP): `echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag`.",
]
CG_REMEDIATION = [
    "Give the cgroup a limit above its working set (memory.max / v1 memory.limit_in_bytes / k8s limits.memory): page cache counts against it, so a job re-reading a file larger than the limit re-reads it from disk every pass.",
    "Or shrink the working set: read the dataset once (shuffle indices, not files), cache decoded samples in anonymous memory sized below the limit, posix_fadvise(DONTNEED) files read once.",
    "Check what the cgroup holds: `cat memory.stat` (v1: cache vs rss, v2: file vs anon), `memory.failcnt` (v1) or `memory.events` (v2).",
]


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    host_in = ("psi_mem_some_pct", "psi_mem_full_pct", "pgscan_direct_per_s", "pgscan_kswapd_per_s")
    have_cg = ctx.rows("cgroup_memory") > 0
    if not ctx.any_of(*host_in) and not have_cg:
        return NotEvaluated(
            NAME,
            "needs memory PSI (/proc/pressure/memory), reclaim counters (/proc/vmstat or sar -B) or memory cgroup samples (series/cgroup.out)",
        )
    host = _host_windows(ctx) if ctx.any_of(*host_in) else []
    cgw = _cgroup_windows(ctx) if have_cg else {}
    return _combine(ctx, host, cgw)


# -- windows ------------------------------------------------------------------------------
def _host_windows(ctx: Context) -> list[Window]:
    """Host-wide: PSI, global direct reclaim, kswapd reclaim while MemAvailable is low; a
    window lasts while MemAvailable stays ≤ avail_low_pct (nearly out of memory:
    `_SUSTAIN`, between leave and enter, holds a window but never opens one)."""
    parts = _stall_parts(ctx) + _global_parts(ctx)
    if not parts:
        return []
    parts.append(pl.when(_avail_low(ctx)).then(_SUSTAIN).otherwise(0.0))
    score = ctx.signals.select(pl.max_horizontal(parts).alias("x"))["x"]
    return ctx.runs(score, 1.0, T["leave_frac"], min_s=T["min_s"], gap_s=T["merge_gap_s"])


def _stall_parts(ctx: Context) -> list[pl.Expr]:
    """Memory PSI some / full over their thresholds."""
    return [
        pl.col(col) / T[key]
        for col, key in (("psi_mem_some_pct", "psi_some_pct"), ("psi_mem_full_pct", "psi_full_pct"))
        if ctx.has(col)
    ]


#: the score of a second with MemAvailable ≤ avail_low_pct and nothing else
_SUSTAIN = 0.75


def _global_parts(ctx: Context) -> list[pl.Expr]:
    """Global reclaim over its thresholds: direct reclaim, kswapd while MemAvailable is low
    (a host streaming files through a full page cache keeps kswapd busy with plenty
    available); cgroup limit reclaim counts in neither."""
    parts = []
    for col, k in (("pgscan_direct_per_s", "direct"), ("pgscan_kswapd_per_s", "kswapd")):
        if ctx.has(col):
            b = ctx.baseline(col) or 0.0
            level = pl.col(col) / max(T[f"{k}_scan_abs_per_s"], T[f"{k}_scan_rel"] * b)
            if k == "kswapd":
                level = pl.when(_avail_low(ctx)).then(level).otherwise(0.0)
            parts.append(level)
    return parts


def _mem_total_kb(ctx: Context) -> float | None:
    """MemTotal from meminfo (cached); None without it."""
    if "mem_total_kb" not in ctx.cache:
        v = None
        if ctx.rows("meminfo"):
            q = "SELECT max(value_kb) AS v FROM meminfo WHERE key = 'MemTotal' AND node IS NULL"
            v = ctx.query(q)["v"][0]
        ctx.cache["mem_total_kb"] = float(v) if v is not None else None
    return ctx.cache["mem_total_kb"]


def _avail_low(ctx: Context) -> pl.Expr:
    """MemAvailable ≤ avail_low_pct of MemTotal (false when either is unknown)."""
    total = _mem_total_kb(ctx)
    if total is None or not ctx.has("mem_available_kb"):
        return pl.lit(False)
    return (pl.col("mem_available_kb") <= T["avail_low_pct"] / 100 * total).fill_null(False)


def _cgroup_windows(ctx: Context) -> dict[str, list[Window]]:
    """Per cgroup: runs of limit hits, usage at the limit with refaults, or its PSI."""
    df = _memcg.frame(ctx)
    if df.height == 0:
        return {}
    at_limit = (pl.col("usage_pct") >= T["cg_at_limit_pct"]) & (
        pl.col("refault_per_s") >= T["cg_refault_per_s"]
    )
    score = pl.max_horizontal(
        pl.col("hits_per_s") / T["cg_hits_per_s"],
        pl.when(at_limit).then(1.0).otherwise(0.0),
        pl.col("psi_some") / T["psi_some_pct"],
        pl.col("psi_full") / T["psi_full_pct"],
    )
    scored = df.select("cgroup", "ts", score.alias("x"))
    out = {}
    for (cg,), sub in scored.group_by("cgroup", maintain_order=True):
        frame = intervals.runs(
            sub["ts"], sub["x"], enter=1.0, leave=T["leave_frac"],
            min_duration_s=T["min_s"], merge_gap_s=T["merge_gap_s"],
        )  # fmt: skip
        if frame.height:
            out[str(cg)] = intervals.as_windows(frame)
    return out


def _global_reclaim(ctx: Context, w: Window) -> bool:
    """Global reclaim (`_global_parts`, not cgroup limit reclaim) crossed its threshold in ``w``."""
    parts = _global_parts(ctx)
    if not parts:
        return False
    rows = ctx.rows_in(w).select(pl.max_horizontal(parts).alias("x"))["x"]
    return bool((rows.max() or 0.0) >= 1.0)  # type: ignore[operator]


def _union(a: Window, b: Window) -> Window:
    return (min(a[0], b[0]), max(a[1], b[1]))


def _combine(ctx: Context, host: list[Window], cgw: dict[str, list[Window]]) -> list[Finding]:
    """Host windows with global reclaim absorb the cgroup windows they overlap; the others
    (PSI only) are folded into the overlapping cgroup windows (module docstring)."""
    cg_items = [(cg, w) for cg, ws in cgw.items() for w in ws]
    used: set[int] = set()
    folded: set[int] = set()
    out = []
    for h in host:
        near = [i for i, (_, w) in enumerate(cg_items) if overlap_s(h, w) > 0]
        if near and not _global_reclaim(ctx, h):
            cg_items = [
                (cg, _union(w, h) if i in near else w) for i, (cg, w) in enumerate(cg_items)
            ]
            folded.update(near)
            continue
        for i in near:
            h = _union(h, cg_items[i][1])
        used.update(near)
        out.append(_host_finding(ctx, h, [cg_items[i] for i in near], host))
    out += [
        _cgroup_finding(ctx, cg, w, cg_items, i in folded)
        for i, (cg, w) in enumerate(cg_items)
        if i not in used
    ]
    return sorted(out, key=lambda f: (f.start, f.title))


# -- host findings ------------------------------------------------------------------------
HOST_EVIDENCE = (
    ("psi_mem_some_pct", "mean"),
    ("psi_mem_full_pct", "mean"),
    ("psi_mem_full_pct", "max"),
    ("pgscan_direct_per_s", "max"),
    ("pgscan_kswapd_per_s", "max"),
    ("pgscan_per_s", "max"),
    ("pgsteal_per_s", "max"),
    ("refault_per_s", "max"),
    ("pgmajfault_per_s", "max"),
    ("swap_in_kb_s", "max"),
    ("swap_out_kb_s", "max"),
    ("mem_available_kb", "min"),
)


def _host_finding(
    ctx: Context, w: Window, cgs: list[tuple[str, Window]], wins: list[Window]
) -> Finding:
    """Host-wide pressure in ``w``, naming the cgroups ``cgs`` at their limits inside it."""
    note = f"over {span(w)}; baseline = median outside the pressure windows"
    ev = [
        Evidence(col, r(ctx.stat(col, w, how)), r(ctx.baseline(col, exclude=wins)), unit_of(col), f"{how} {note}")
        for col, how in HOST_EVIDENCE
        if ctx.has(col)
    ]  # fmt: skip
    rec = _memcg.reclaim_by_key(ctx, w)
    ev += _reclaim_evidence(rec)
    ev += _cgroup_events(ctx, w)
    ev += [_at_limit_evidence(ctx, cg, cw) for cg, cw in cgs]
    full = ctx.stat("psi_mem_full_pct", w, "mean")
    some = ctx.stat("psi_mem_some_pct", w, "mean")
    oom = _ooms_after(ctx, w)
    lost, near = _gpu_loss(ctx, w)
    sev = "major" if (full or 0) >= T["major_full_pct"] or oom else "minor"
    sev = worst(sev, gpu_loss_severity(lost, ctx.gpu_capacity_s()) if near else None)
    text = f"Memory pressure at {span(w)}: tasks stalled on memory {some or 0:.0f}% of the time (some), {full or 0:.0f}% (full)"
    text += _reclaim_text(ctx, w, rec) + _avail_text(ctx, w)
    if cgs:
        text += "; memory cgroups at their limits meanwhile: " + ", ".join(
            sorted({cg for cg, _ in cgs})
        )
    if oom:
        text += f"; followed by {oom} OOM kill(s)"
    impact = {
        "stall_some_pct": r(some),
        "stall_full_pct": r(full),
        "memory_stall_s": r((full or 0) / 100 * (w[1] - w[0]).total_seconds(), 1),
    }
    if cgs:
        impact["cgroups_at_limit"] = sorted({cg for cg, _ in cgs})
    if who := _growers(ctx, w):
        impact["who"] = who
    if lost is not None:
        impact["gpu_seconds_lost"] = r(lost, 1)
    return Finding(
        key="MEMORY_PRESSURE",
        kind=NAME,
        title=f"Memory pressure and reclaim ({(w[1] - w[0]).total_seconds():.0f} s)",
        severity=sev,
        start=w[0],
        end=w[1],
        summary=text + ".",
        impact=impact,
        evidence=ev,
        remediation=REMEDIATION,
    )


def _gpu_loss(ctx: Context, w: Window) -> tuple[float | None, list[Window]]:
    """GPU-seconds lost in the memory-classified GPU dips overlapping ``w``."""
    gbase, _ = ctx.gpu_dips()
    near = [d for d in gpu_starvation.dips_of(ctx, "memory") if overlap_s(w, d) > 0]
    lost = sum(ctx.gpu_seconds_lost(d, gbase) or 0.0 for d in near) if near else None
    return lost, near


def _reclaim_evidence(rec: dict | None) -> list[Evidence]:
    """Scan and steal totals over the window from every /proc/vmstat key (mean pages/s)."""
    if rec is None or not rec["seconds"]:
        return []
    sec = rec["seconds"]
    ev = [
        Evidence(
            f"pg{kind}_all_keys",
            r(rec[kind] / sec),
            None,
            "pages/s",
            f"mean over the window (increase / {sec:.0f} s): {_memcg.describe(rec, kind)}",
        )
        for kind in ("scan", "steal")
    ]
    if rec["limit_steal"]:
        ev.append(
            Evidence(
                "pgsteal_cgroup_limit",
                r(rec["limit_steal"] / sec),
                None,
                "pages/s",
                "memory-cgroup limit reclaim: anon + file − kswapd − direct − khugepaged − proactive, mean over the window",
            )
        )
    return ev


def _reclaim_text(ctx: Context, w: Window, rec: dict | None) -> str:
    """', reclaim freed N MiB (kswapd a, direct b pages/s on average; up to p pages/s)'."""
    if rec is None or not rec["seconds"] or not rec["scan"]:
        return ""
    sec, keys = rec["seconds"], rec["keys"]

    def who(prefix: str) -> float:  # per-zone keys on old kernels: pgscan_kswapd_normal, ...
        return sum(v for k, v in keys.items() if k.startswith(prefix)) / sec

    freed = rec["steal"] * _memcg.PAGE_BYTES / _memcg.MIB
    text = (
        f", reclaim freed {freed:,.0f} MiB (scanned {rec['scan'] / sec:,.0f} pages/s on average: "
        f"kswapd {who('pgscan_kswapd'):,.0f}, direct {who('pgscan_direct'):,.0f}"
    )
    if rec["limit_steal"]:
        text += f"; memory cgroups' limit reclaim freed {rec['limit_steal'] / sec:,.0f} pages/s"
    peak = ctx.stat("pgscan_per_s", w, "max")
    return text + (f"; up to {peak:,.0f} pages/s)" if peak else ")")


def _avail_text(ctx: Context, w: Window) -> str:
    """', MemAvailable fell to N MiB (x % of MemTotal; ≤ 15 % for s s)'."""
    avail = ctx.stat("mem_available_kb", w, "min")
    if avail is None:
        return ""
    total = _mem_total_kb(ctx)
    if not total:
        return f", MemAvailable fell to {avail / 1024:,.0f} MiB"
    low = int(ctx.rows_in(w).select(_avail_low(ctx).sum()).item())
    text = f", MemAvailable fell to {avail / 1024:,.0f} MiB ({100 * avail / total:.0f}% of MemTotal"
    return text + (f"; ≤ {T['avail_low_pct']:.0f}% for {low} s)" if low else ")")


def _ooms_after(ctx: Context, w: Window, cgroup: str | None = None) -> int:
    """Distinct kernel-log OOM kills in ``w`` or within oom_follow_s after it; with
    ``cgroup``, only kills of tasks in it or below it."""
    if not ctx.rows("dmesg"):
        return 0
    hi = w[1] + timedelta(seconds=T["oom_follow_s"])
    q = "SELECT count(DISTINCT (pid, comm)) AS n FROM dmesg WHERE kind = 'oom_kill' AND ts >= $lo AND ts < $hi"
    params: dict = {"lo": w[0], "hi": hi}
    if cgroup is not None:
        q += (
            " AND ($cg = '/' OR coalesce(nullif(rtrim(memcg, '/'), ''), '/') = $cg"
            " OR starts_with(memcg, $cg || '/'))"
        )
        params["cg"] = cgroup
    return int(ctx.query(q, params)["n"][0] or 0)


def _cgroup_events(ctx: Context, w: Window) -> list[Evidence]:
    """Increments of memory.events counters and v1 failcnt per cgroup inside the window."""
    if not ctx.rows("cgroup_memory"):
        return []
    cols = ("events_high", "events_max", "events_oom", "events_oom_kill", "failcnt")
    agg = ", ".join(f"max({c}) - min({c}) AS {c}" for c in cols)
    df = ctx.query(
        f"SELECT cgroup, {agg} FROM cgroup_memory WHERE ts >= $lo AND ts <= $hi GROUP BY cgroup",
        {"lo": w[0], "hi": w[1]},
    )
    ev = []
    for row in df.iter_rows(named=True):
        for c in cols:
            if row[c]:
                ev.append(
                    Evidence(
                        f"cgroup {c}",
                        float(row[c]),
                        0.0,
                        "count",
                        f"memory.events increments in {row['cgroup'] or '/'}",
                    )
                )
    return ev


# -- cgroup findings ----------------------------------------------------------------------
def _rows(ctx: Context, cg: str, w: Window) -> pl.DataFrame:
    return _memcg.rows(ctx, cg, w[0], w[1])


def _facts(ctx: Context, cg: str, w: Window) -> dict:
    """What the cgroup's samples say over ``w``: increases (sums of the increments of the
    samples in it), per-second means (increase / the window's seconds), maxima."""
    sub = _rows(ctx, cg, w)
    dur = (w[1] - w[0]).total_seconds() or 1.0
    mib, page = float(_memcg.MIB), float(_memcg.PAGE_BYTES)

    def stat(col: str, how: str, scale: float = 1.0) -> float | None:
        v = sub[col].drop_nulls()
        return float(getattr(v, how)()) / scale if v.len() else None

    def total(col: str) -> float | None:
        return float(sub[col].sum()) if sub[col].null_count() < sub.height else None

    hits, rf_file, rf_anon = (
        total(c) or 0.0 for c in ("hits_inc", "refault_file_inc", "refault_anon_inc")
    )
    swap = sub["swap_bytes"].drop_nulls()
    return {
        "limit_mb": stat("limit_bytes", "max", mib),
        "hits": hits,
        "hits_per_s": hits / dur,
        "refault_per_s": (rf_file + rf_anon) / dur,
        "refault_file_per_s": rf_file / dur,
        "reread_mb": rf_file * page / mib,
        "swapin_refault_mb": rf_anon * page / mib,
        "usage_max_mb": stat("usage_bytes", "max", mib),
        "usage_max_pct": stat("usage_pct", "max"),
        "cache_max_mb": stat("cache_bytes", "max", mib),
        "steal_mb": (total("steal_inc") or 0) * page / mib if total("steal_inc") is not None else None,
        "swap_growth_mb": float(swap.max() - swap[0]) / mib if swap.len() else None,  # type: ignore[operator]
        "psi_some": stat("psi_some", "mean"),
        "psi_full": stat("psi_full", "mean"),
        "oom_inc": total("oom_inc") or 0.0,
        "high_events": (stat("high_per_s", "max") or 0) > 0,
    }  # fmt: skip


def _reclaimed(f: dict, rec: dict | None, alone: bool) -> tuple[float | None, float | None]:
    """(page cache, anonymous memory) in MiB that the cgroup's limit reclaim took: v2 its
    own pgsteal, the anonymous part being its swap growth; v1 /proc/vmstat limit reclaim
    (`_memcg.reclaim_by_key`) when it was the only cgroup at its limit."""
    if f["steal_mb"] is not None:
        anon = max(f["swap_growth_mb"] or 0.0, 0.0)
        return max(f["steal_mb"] - anon, 0.0), anon
    if rec and alone and rec["limit_steal_file"] is not None:
        page = _memcg.PAGE_BYTES / _memcg.MIB
        return rec["limit_steal_file"] * page, (rec["limit_steal_anon"] or 0.0) * page
    return None, None


def _at_limit_evidence(ctx: Context, cg: str, w: Window) -> Evidence:
    """One line naming a cgroup at its limit inside a host-wide window."""
    f = _facts(ctx, cg, w)
    lim = f"{f['limit_mb']:.0f} MiB limit" if f["limit_mb"] else "limit unknown"
    return Evidence(
        "cgroup_limit_hits",
        f["hits"],
        0.0,
        "count",
        f"{cg} ({lim}): limit hits (v1 failcnt / v2 memory.events max + high) over {span(w)}",
    )


def _cgroup_finding(
    ctx: Context, cg: str, w: Window, items: list[tuple[str, Window]], folded: bool
) -> Finding:
    """``folded``: a host PSI window without global reclaim was folded into ``w``: the
    host's memory stall is this cgroup's (and counts for its severity)."""
    f = _facts(ctx, cg, w)
    dur = (w[1] - w[0]).total_seconds()
    f["host_some"] = ctx.stat("psi_mem_some_pct", w, "mean") if folded else None
    f["host_full"] = ctx.stat("psi_mem_full_pct", w, "mean") if folded else None
    f["ooms"] = max(_ooms_after(ctx, w, cg), int(f["oom_inc"] + _oom_inc_after(ctx, cg, w)))
    others = sorted({c for c, v in items if c != cg and overlap_s(w, v) > 0})
    rec = _memcg.reclaim_by_key(ctx, w)
    f["cache_out_mb"], f["anon_out_mb"] = _reclaimed(f, rec, alone=not others)
    lost, near = _gpu_loss(ctx, w)
    sev = worst(_cg_severity(f), gpu_loss_severity(lost, ctx.gpu_capacity_s()) if near else None)
    impact = {
        "cgroup": cg,
        "limit_mb": r(f["limit_mb"], 0),
        "limit_hits": int(f["hits"]),
        "limit_hits_per_s": r(f["hits_per_s"]),
        "refault_per_s": r(f["refault_per_s"], 0),
        "reread_from_disk_mb": r(f["reread_mb"], 0),
        "cache_squeezed_out_mb": r(f["cache_out_mb"], 0),
        "anon_reclaimed_mb": r(f["anon_out_mb"], 0),
        "swap_growth_mb": r(f["swap_growth_mb"], 0),
        "usage_max_pct_of_limit": r(f["usage_max_pct"]),
        "oom_kills": f["ooms"],
    }
    if f["psi_some"] is not None:
        impact["stall_some_pct"] = r(f["psi_some"])
        impact["memory_stall_s"] = r((f["psi_full"] or 0) / 100 * dur, 1)
    if who := _growers(ctx, w, cg):
        impact["who"] = who
    if lost is not None:
        impact["gpu_seconds_lost"] = r(lost, 1)
    lim = f"{f['limit_mb']:.0f} MiB" if f["limit_mb"] else "unknown"
    caveat = f"Other memory cgroups were at their limits at the same time ({', '.join(others)}): /proc/vmstat limit reclaim is theirs too, so it is not attributed."
    return Finding(
        key="MEMORY_PRESSURE",
        kind=NAME,
        title=f"Memory cgroup {cg} at its limit ({lim}, {dur:.0f} s)",
        severity=sev,
        start=w[0],
        end=w[1],
        summary=_cg_text(cg, w, f),
        impact={k: v for k, v in impact.items() if v is not None},
        evidence=_cg_evidence(ctx, cg, w, f) + _reclaim_evidence(rec),
        remediation=CG_REMEDIATION + REMEDIATION[1:2],
        caveats=[caveat] if others else [],
    )


def _oom_inc_after(ctx: Context, cg: str, w: Window) -> float:
    """memory.events oom_kill increments of ``cg`` in the oom_follow_s after ``w``."""
    hi = w[1] + timedelta(seconds=T["oom_follow_s"])
    return float(_rows(ctx, cg, (w[1], hi))["oom_inc"].fill_null(0).sum())


def _cg_severity(f: dict) -> str:
    """major: an OOM kill in it follows, or its PSI full (or the host's, folded into it)
    ≥ major_full_pct on average; minor: evicted pages refault (thrashing), its own memory
    went to swap, that PSI crossed, or memory.high throttled it; info: a cgroup at its
    limit dropping cache nobody reads again (cheap)."""
    some = max(f["psi_some"] or 0.0, f.get("host_some") or 0.0)
    full = max(f["psi_full"] or 0.0, f.get("host_full") or 0.0)
    if f["ooms"] or full >= T["major_full_pct"]:
        return "major"
    if (
        f["refault_per_s"] >= T["cg_refault_per_s"]
        or max(f["swap_growth_mb"] or 0.0, f["anon_out_mb"] or 0.0) >= T["cg_swap_mb"]
        or some >= T["psi_some_pct"]
        or full >= T["psi_full_pct"]
        or f["high_events"]
    ):
        return "minor"
    return "info"


def _cg_text(cg: str, w: Window, f: dict) -> str:
    """One sentence: the limit, the hits, what was re-read / swapped, PSI, OOM kills."""
    lim = f"its {f['limit_mb']:.0f} MiB limit" if f["limit_mb"] else "its limit"
    text = f"Memory cgroup {cg} was held at {lim} at {span(w)}: {f['hits']:,.0f} limit hits ({f['hits_per_s']:,.0f}/s"
    if f["usage_max_pct"] is not None:
        text += f"; usage up to {f['usage_max_pct']:.0f}% of the limit"
    text += ")"
    if f["refault_file_per_s"] >= 1:
        text += (
            f", {f['refault_file_per_s']:,.0f} evicted page-cache pages/s refaulted (needed "
            f"again: ~{f['reread_mb']:,.0f} MiB re-read from disk)"
        )
    if (f["cache_max_mb"] or 0) >= 1:
        text += f", its page cache capped at {f['cache_max_mb']:,.0f} MiB"
    if (f["cache_out_mb"] or 0) >= 1:
        text += f", {f['cache_out_mb']:,.0f} MiB of cache squeezed out by limit reclaim"
    if (f["anon_out_mb"] or 0) >= 1 or (f["swap_growth_mb"] or 0) >= 1:
        text += f", {max(f['anon_out_mb'] or 0, f['swap_growth_mb'] or 0):,.0f} MiB of its anonymous memory pushed to swap"
    if f["swapin_refault_mb"] >= 1:
        text += f", {f['swapin_refault_mb']:,.0f} MiB faulted back in from swap"
    if f["psi_some"] is not None:
        text += f"; its tasks stalled on memory {f['psi_some']:.0f}% (some), {f['psi_full'] or 0:.0f}% (full)"
    elif f.get("host_some") is not None:
        text += (
            f"; tasks stalled on memory {f['host_some']:.0f}% (some), {f['host_full'] or 0:.0f}% (full) host-wide, "
            "with no global reclaim (the stall is this cgroup's limit reclaim)"
        )
    if f["ooms"]:
        text += f"; followed by {f['ooms']} OOM kill(s) in it"
    return text + "."


def _cg_evidence(ctx: Context, cg: str, w: Window, f: dict) -> list[Evidence]:
    """The cgroup's numbers (increases, means, maxima over the window) and the host's disk
    reads and memory PSI next to them (means, baseline = outside the window)."""
    over = f"over {span(w)}"
    ev = [
        Evidence("cgroup", None, None, "", cg),
        Evidence("memory_limit", r(f["limit_mb"], 0), None, "MiB", "memory.max / v1 limit_in_bytes (hierarchical)"),
        Evidence("usage_max", r(f["usage_max_mb"], 1), r(f["limit_mb"], 0), "MiB", f"max usage {over}, vs the limit"),
        Evidence("limit_hits", f["hits"], 0.0, "count", f"increase of v1 failcnt / v2 memory.events max + high {over}"),
        Evidence("limit_hits_per_s", r(f["hits_per_s"]), 0.0, "1/s", f"mean {over} (increase / seconds)"),
        Evidence("cgroup_refault_per_s", r(f["refault_per_s"], 0), None, "pages/s", f"memory.stat workingset_refault_file + _anon, mean {over}"),
        Evidence("reread_from_disk", r(f["reread_mb"], 0), None, "MiB", f"workingset_refault_file increase × 4 KiB {over}"),
        Evidence("swapin_refaults", r(f["swapin_refault_mb"], 0), None, "MiB", f"workingset_refault_anon increase × 4 KiB {over}"),
        Evidence("cache_max", r(f["cache_max_mb"], 1), None, "MiB", f"memory.stat cache / file, max {over}"),
        Evidence("cache_squeezed_out", r(f["cache_out_mb"], 0), None, "MiB", f"page cache taken by limit reclaim {over} (v2: its pgsteal; v1: /proc/vmstat pgsteal_file limit share) × 4 KiB"),
        Evidence("anon_reclaimed", r(f["anon_out_mb"], 0), None, "MiB", f"anonymous memory taken by limit reclaim {over} (swapped out)"),
        Evidence("swap_growth", r(f["swap_growth_mb"], 0), None, "MiB", f"its swap (memory.stat swap / memory.swap.current): max − first sample {over}"),
    ]  # fmt: skip
    if f["psi_some"] is not None:
        ev.append(Evidence("cgroup_psi_mem_some_pct", r(f["psi_some"]), None, "%", f"its memory.pressure some, mean {over}"))  # fmt: skip
    for col in ("disk_read_kb_s", "psi_mem_some_pct", "psi_mem_full_pct"):
        if ctx.has(col):
            ev.append(Evidence(col, r(ctx.stat(col, w, "mean")), r(ctx.baseline(col, exclude=[w])), unit_of(col), f"host-wide, mean {over}"))  # fmt: skip
    return [e for e in ev if e.value is not None or e.signal == "cgroup"]


def _growers(ctx: Context, w: Window, cgroup: str | None = None) -> list[dict]:
    """``impact["who"]``: the commands whose RSS grew most in ``w`` (MB, ≥ 1 MB), by
    command and cgroup (`_who`); for a memory cgroup's finding only its own processes,
    which needs the capture's proc_cgroup sampler (without it: nobody is named)."""
    procs = with_identity(ctx, memory_users(ctx, w), w)
    if cgroup is not None:
        want = "/" + cgroup.strip("/")
        procs = [p for p in procs if _in_cgroup(p, want)]
    return [
        g | {"share": r(g["share"], 0), "unit": "MB RSS grown"}
        for g in by_command(procs, key="grown_mb")
    ]


def _in_cgroup(p: dict, want: str) -> bool:
    got = p.get("memory_cgroup") or p.get("cgroup")
    return got is not None and (got == want or got.startswith(want + "/"))
