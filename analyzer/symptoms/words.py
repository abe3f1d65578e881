"""The explanations in words: numbers with their units, and one sentence per shown row
of ``symptom_explanations`` (`analyzer.symptoms.explain` computes the numbers).

>>> fmt(180.0, "ms"), fmt(2400.0, "ms"), fmt(62.4, "%"), fmt(307200.0, "kB/s")
('180 ms', '2.4 s', '62.4 %', '300 MB/s')
"""

from __future__ import annotations

from datetime import datetime

from analyzer.symptoms.mechanisms import MECHANISMS

#: how a signals column reads in a sentence (others: their column name)
NOUNS = {
    "throttled_pct": "the share of CFS periods throttled",
    "throttled_ms_per_s": "the throttled time per second",
    "runq": "the run queue",
    "psi_cpu_some_pct": "CPU pressure (PSI some)",
    "runqlat_p99_us": "the run-queue latency p99",
    "steal_pct": "steal time",
    "disk_write_kb_s": "disk writes",
    "disk_read_kb_s": "disk reads",
    "page_cache_growth_kb_s": "page-cache growth",
    "dirty_kb": "dirty page cache",
    "disk_w_await_max_ms": "the disk write wait (w_await)",
    "disk_util_max_pct": "disk utilisation",
    "psi_io_some_pct": "I/O pressure (PSI some)",
    "psi_io_full_pct": "I/O pressure (PSI full)",
    "psi_mem_some_pct": "memory pressure (PSI some)",
    "psi_mem_full_pct": "memory pressure (PSI full)",
    "pgscan_direct_per_s": "direct reclaim",
    "swap_in_kb_s": "swap-in",
    "swap_out_kb_s": "swap-out",
    "mem_available_kb": "available memory",
    "gpu_sm_clock_min_mhz": "the lowest GPU SM clock",
    "gpu_pviol_max_pct": "the GPU power-violation share",
    "irq_soft_max_cpu_pct": "the busiest CPU's IRQ + softirq time",
    "net_drop_per_s": "packet drops",
    "gpu_util_mean_pct": "GPU utilisation",
    "cpu_busy_pct": "CPU busy time",
}


def num(v: float) -> str:
    """Three significant digits at most, no exponent: 2.4, 12.3, 180, 0.042."""
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}".removesuffix(".0")
    return f"{v:.2g}" if a >= 0.001 else "0"


def fmt(v: float | None, unit: str) -> str:
    """``v`` in ``unit`` as a person writes it (ms → s, kB/s → MB/s, µs → ms…)."""
    if v is None:
        return "n/a"
    if unit == "ms":
        return f"{num(v / 1000)} s" if abs(v) >= 1000 else f"{num(v)} ms"
    if unit == "us":
        return fmt(v / 1000, "ms") if abs(v) >= 1000 else f"{num(v)} µs"
    if unit in ("kB/s", "kB"):
        per = unit.removeprefix("kB")
        for scale, name in ((1 << 20, "GB"), (1 << 10, "MB")):
            if abs(v) >= scale:
                return f"{num(v / scale)} {name}{per}"
        return f"{num(v)} {unit}"
    if unit == "%":
        return f"{num(v)} %"
    if unit == "1/s":
        return f"{num(v)}/s"
    return f"{num(v)} {unit}".rstrip()


def subject(name: str) -> str:
    """'p99 of vllm:e2e…' → 'P99 of vllm:e2e…'."""
    return name[:1].upper() + name[1:]


def short(name: str, stat: str) -> str:
    """The symptom in a word or two: 'P99', 'Mean', 'Step time', 'Requests/s'."""
    if stat in ("p99", "p50", "mean"):
        return stat.upper() if stat != "mean" else "Mean"
    return subject(name.split(" of ", 1)[0] if " of " in name else name)


def span(a: datetime, b: datetime) -> str:
    return f"{a:%H:%M:%S}–{b:%H:%M:%S} UTC ({(b - a).total_seconds():.0f} s)"


def noun(r: dict, who: bool = True) -> str:
    """The candidate in words; ``who``: with its entity (the cgroup) when known."""
    base = NOUNS.get(r["candidate"], f"`{r['candidate']}`")
    return f"{base} (cgroup {r['entity']})" if who and r.get("entity") else base


def condition(r: dict, direction: str) -> str:
    """'… ≥ 30 %' / '… ≤ 1.2 GB' / '… ≥ 5 % away from its baseline'."""
    if direction == "either":
        dist = abs(r["threshold"] - r["baseline"])
        return f"{noun(r, False)} ≥ {fmt(dist, r['unit'])} away from its baseline"
    sign = "≥" if direction == "up" else "≤"
    return f"{noun(r, False)} {sign} {fmt(r['threshold'], r['unit'])}"


def sentence(r: dict, sym: dict, w: dict, direction: str, lags: tuple[int, int, int]) -> str:
    """The row's explanation: what the symptom did, what the candidate did, by how much,
    its lead, how often its stretches came with the symptom, and the mechanism (causes)
    or why it is not a cause (concurrent). ``lags``: (lowest, highest, windows) of this
    candidate's lag over the symptom's windows it causes."""
    verb = "rose" if sym["worse"] != "down" else "fell"
    what = (
        f"{subject(sym['name'])} {verb} from {fmt(sym['baseline'], sym['unit'])} to "
        f"{fmt(w['level'], sym['unit'])} at {span(w['start_ts'], w['end_ts'])}"
    )
    if r["candidate_type"] == "finding":
        who = f"during {r['candidate']} (finding {r['finding_id']})"
        often = f"in {r['stretches_with_symptom']} of {r['stretches']} {r['candidate']} windows"
    else:
        who = (
            f"with {noun(r)} at {fmt(r['level'], r['unit'])} "
            f"(baseline {fmt(r['baseline'], r['unit'])})"
        )
        often = (
            f"in {r['stretches_with_symptom']} of {r['stretches']} stretches with "
            f"{condition(r, direction)}"
        )
    if r["role"] != "cause":
        return f"{what} {who}, but it is not shown as a cause: {r['why_not']}."
    m = MECHANISMS[r["mechanism_group"]]
    lead = f"{m.short} leads by {r['lag_s']} s"
    lo, hi, n = lags
    if n > 1 and lo != hi:
        lead += f" ({lo}–{hi} s over the {n} windows it explains)"
    return (
        f"{what} {who}; {lead}. {short(sym['name'], sym['stat'])} {verb} {often}. "
        f"Mechanism: {m.words}."
    )
