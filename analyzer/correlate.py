"""Stage 7, *correlate*: link findings into causal chains and rank incidents by impact.

Rules (``RULES``): a finding of kind *cause* is linked to a finding of kind *effect* when
their windows overlap, or the effect starts at most ``lag_s`` seconds after the cause
ends; a GPU dip is linked only to causes its own classification agrees with
(``DIP_CAUSES``). Linked findings form one chain (connected components); so do all occurrences of one
periodic incident (same ``Finding.series``). A finding linked to nothing is a chain of its
own. The chain's cause is its earliest finding that no other finding in it causes.

Ranking: chains by severity, then GPU-seconds lost, processes killed, duration. GPU time
is not double counted: several kinds in a chain measure the same idle GPUs, so a chain's
GPU-seconds lost is the largest per-kind sum, not the sum over kinds.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import datetime, timedelta

from analyzer.findings import SEVERITY_RANK, Finding
from analyzer.intervals import overlap_s

# (cause kind, effect kind, max lag in seconds after the cause ends)
RULES: list[tuple[str, str, float]] = [
    ("checkpoint_stall", "gpu_starvation", 5),  # write burst -> io pressure -> GPU idle
    ("io_saturation", "gpu_starvation", 5),
    ("checkpoint_stall", "hung_task", 0),
    ("io_saturation", "hung_task", 0),
    ("cpu_throttle", "gpu_starvation", 5),  # quota -> throttling -> loader lag -> GPU idle
    ("cpu_throttle", "cpu_contention", 0),
    ("cpu_contention", "gpu_starvation", 5),
    ("irq_hotspot", "gpu_starvation", 5),
    ("irq_hotspot", "net_errors", 5),
    ("net_errors", "gpu_starvation", 5),
    ("memory_pressure", "swap_activity", 10),  # memory pressure -> reclaim -> OOM kill
    ("memory_pressure", "oom_kill", 60),
    ("swap_activity", "oom_kill", 60),
    ("memory_pressure", "gpu_starvation", 5),
    ("swap_activity", "gpu_starvation", 5),
    ("oom_kill", "gpu_starvation", 30),
    ("gpu_throttle", "gpu_starvation", 5),
    ("gpu_xid", "gpu_starvation", 60),
    ("cpu_contention", "sampling_gap", 5),  # an overloaded host cannot run its collectors
    ("memory_pressure", "sampling_gap", 5),
    ("swap_activity", "sampling_gap", 5),
    ("io_saturation", "sampling_gap", 5),
    ("checkpoint_stall", "sampling_gap", 5),
    ("hung_task", "sampling_gap", 5),
]
PAD_S = 1.0  # windows touching within a second count as overlapping
# A GPU dip (gpu_starvation) is an effect of a cause finding only when the dip's own
# classification (impact "cause", analyzer/detectors/_dips.py) agrees: a dip the CPUs
# caused is not linked to a write burst that merely touches it.
DIP_CAUSES: dict[str, set[str]] = {
    "checkpoint_stall": {"io"},
    "io_saturation": {"io"},
    "cpu_throttle": {"cpu_throttle", "cpu_contention", "cpu_loader"},
    "cpu_contention": {"cpu_contention", "cpu_loader", "cpu_throttle"},
    "irq_hotspot": {"cpu_contention", "unexplained"},
    "net_errors": {"unexplained"},
    "memory_pressure": {"memory", "unexplained"},
    "swap_activity": {"memory", "unexplained"},
    "oom_kill": {"memory", "unexplained"},
    "gpu_throttle": {"power_thermal"},
    "gpu_xid": {"xid", "unexplained"},
}


@dataclass
class Chain:
    chain_id: int
    rank: int
    title: str
    severity: str
    start: datetime
    end: datetime
    summary: str
    cause: int  # index into the findings list
    members: list[int]  # indices, by start time
    period_s: float | None
    occurrences: int | None
    gpu_seconds_lost: float | None


def links(findings: list[Finding]) -> list[tuple[int, int]]:
    """(cause index, effect index) pairs by RULES (effects looked up by start time)."""
    by_kind: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_kind.setdefault(f.kind, []).append(i)
    for ids in by_kind.values():
        ids.sort(key=lambda i: findings[i].start)
    out: set[tuple[int, int]] = set()
    for ck, ek, lag in RULES:
        effects = by_kind.get(ek, [])
        if not effects or ck not in by_kind:
            continue
        starts = [findings[i].start for i in effects]
        longest = max(findings[i].end - findings[i].start for i in effects)
        for i in by_kind[ck]:
            c = findings[i]
            hi = bisect_right(starts, c.end + timedelta(seconds=max(lag, PAD_S)))
            lo = bisect_left(starts, c.start - longest - timedelta(seconds=PAD_S))
            out.update((i, j) for j in effects[lo:hi] if _related(c, findings[j], lag))
    return sorted(out)


def _related(c: Finding, e: Finding, lag: float) -> bool:
    if e.kind == "gpu_starvation" and c.kind in DIP_CAUSES:
        cause = e.impact.get("cause")
        if cause is not None and cause not in DIP_CAUSES[c.kind]:
            return False
    pad = timedelta(seconds=PAD_S)
    if overlap_s((c.start - pad, c.end + pad), (e.start, e.end)) > 0:
        return True
    return timedelta(0) <= e.start - c.end <= timedelta(seconds=lag)


def correlate(findings: list[Finding]) -> list[Chain]:
    """Chains over ``findings``, ranked (rank 1 = most important)."""
    n = len(findings)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    edges = links(findings)
    for a, b in edges:
        union(a, b)
    first: dict[str, int] = {}
    for i, f in enumerate(findings):
        if f.series:
            union(i, first.setdefault(f.series, i))
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    caused = {b for a, b in edges if findings[a].kind != findings[b].kind}
    chains = [
        _chain(findings, sorted(m, key=lambda i: (findings[i].start, i)), caused, edges)
        for m in groups.values()
    ]
    chains.sort(
        key=lambda c: (
            -SEVERITY_RANK[c.severity],
            -(c.gpu_seconds_lost or 0.0),
            -_killed(findings, c),
            -(c.end - c.start).total_seconds(),
            c.start,
        )
    )
    for k, c in enumerate(chains, 1):
        c.chain_id = c.rank = k
    return chains


def _killed(findings: list[Finding], c: Chain) -> int:
    return sum(int(findings[i].impact.get("processes_killed") or 0) for i in c.members)


def _chain(
    findings: list[Finding], members: list[int], caused: set[int], edges: list[tuple[int, int]]
) -> Chain:
    roots = [i for i in members if i not in caused] or members
    cause = roots[0]
    cf = findings[cause]
    mset = set(members)
    effects: list[str] = []
    for a, b in edges:
        if (
            a in mset
            and b in mset
            and findings[b].kind not in effects
            and findings[b].kind != cf.kind
        ):
            effects.append(findings[b].kind)
    per_kind: dict[str, float] = {}
    for i in members:
        if findings[i].gpu_seconds_lost is not None:
            per_kind[findings[i].kind] = per_kind.get(findings[i].kind, 0.0) + (
                findings[i].gpu_seconds_lost or 0.0
            )
    lost = max(per_kind.values()) if per_kind else None
    severity = max((findings[i].severity for i in members), key=lambda s: SEVERITY_RANK[s])
    start, end = min(findings[i].start for i in members), max(findings[i].end for i in members)
    same = [i for i in members if findings[i].kind == cf.kind]
    period = cf.period_s
    occurrences = cf.occurrences or (len(same) if cf.series else None)
    title = (
        cf.title
        if not effects
        else f"{cf.title} → {' → '.join(k.replace('_', ' ') for k in effects)}"
    )
    if period:
        title = f"{cf.key.replace('_', ' ').capitalize()} every {period:.0f} s ({occurrences}×)" + (
            f" → {' → '.join(k.replace('_', ' ') for k in effects)}" if effects else ""
        )
    text = cf.summary
    if len(members) > 1:
        text = f"{len(members)} findings from {start:%H:%M:%S} to {end:%H:%M:%S} UTC, starting with: {cf.summary}"
        if effects:
            text += f" Effects: {', '.join(k.replace('_', ' ') for k in effects)}."
    if period:
        text += f" Repeats every {period:.0f} s ({occurrences} occurrences)."
    if lost:
        text += f" {lost:.0f} GPU-seconds lost in total."
    return Chain(
        0,
        0,
        title,
        severity,
        start,
        end,
        text,
        cause,
        members,
        period,
        occurrences,
        round(lost, 1) if lost is not None else None,
    )
