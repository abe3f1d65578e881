"""Stage 7, *correlate*: link findings into causal chains and rank incidents by impact.

Causes need mechanisms. Two findings that overlap in time are *concurrent*; one is the
*cause* of the other only when a rule of ``RULES`` names the pair **and** its check finds
the mechanism in the data: a GPU dip whose own classification is I/O wait inside a write
burst (``DIP_CAUSES``), the killed task's memory cgroup being the cgroup under pressure,
collectors' missed samples falling inside the contention that starved them… Each link
carries its mechanism in words (``Chain.mechanisms``, shown in the report). Overlapping
findings without a mechanism stay separate incidents, each naming the other as concurrent
(``Chain.concurrent``). All occurrences of one periodic incident (same ``Finding.series``)
are one chain. The chain's cause is its earliest finding that no other finding in it
causes.

Ranking: chains by severity, then GPU-seconds lost, processes killed, duration. GPU time
is not double counted: several kinds in a chain measure the same idle GPUs, so a chain's
GPU-seconds lost is the largest per-kind sum, not the sum over kinds.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from analyzer.findings import SEVERITY_RANK, Finding
from analyzer.intervals import overlap_s

PAD_S = 1.0  # windows touching within a second count as overlapping
# A GPU dip (gpu_starvation) is an effect of a cause finding only when the dip's own
# classification (impact "cause", analyzer/detectors/_dips.py) agrees: a dip the CPUs
# caused is not linked to a write burst that merely touches it.
DIP_CAUSES: dict[str, set[str]] = {
    "checkpoint_stall": {"io"},
    "io_saturation": {"io"},
    "cpu_throttle": {"cpu_throttle"},
    "cpu_contention": {"cpu_contention", "cpu_loader"},
    "irq_hotspot": {"cpu_contention", "unexplained"},
    "net_errors": {"unexplained"},
    "memory_pressure": {"memory", "unexplained"},
    "swap_activity": {"memory", "unexplained"},
    "oom_kill": {"memory", "unexplained"},
    "gpu_throttle": {"power_thermal"},
    "gpu_xid": {"xid", "unexplained"},
}
_DIP_WORDS = {
    "io": "I/O wait (the GPUs idled while the job waited for the disk)",
    "cpu_throttle": "CPU quota throttling of the loader",
    "cpu_contention": "CPU-starved (the loader waited for CPUs)",
    "cpu_loader": "CPU-bound loading (the loader kept the CPUs busy)",
    "memory": "memory stalls",
    "power_thermal": "GPU clocks held down",
    "xid": "a GPU error",
    "unexplained": "a dip no other signal explains, starting in this window",
}


def _dip(c: Finding, e: Finding) -> str | None:
    """The GPU dip ``e`` is classified as something ``c`` causes."""
    cause = e.impact.get("cause")
    if cause is not None and cause not in DIP_CAUSES.get(c.kind, set()):
        return None
    return f"the GPU dip is classified as {_DIP_WORDS.get(str(cause), 'this cause')}"


def _inside(c: Finding, e: Finding) -> str | None:
    """``e`` starts inside ``c`` (collectors starved by the overload they measure)."""
    named = e.impact.get("effect_of")
    if named is not None and named != c.kind:
        return None
    if not (c.start - timedelta(seconds=PAD_S) <= e.start <= c.end + timedelta(seconds=PAD_S)):
        return None
    return f"the missed samples fall inside the {c.kind.replace('_', ' ')} window: the collectors were starved too"


def _same_memcg(c: Finding, e: Finding) -> str | None:
    """Pressure in the cgroup the OOM killer acted on; host-wide pressure (memory PSI counts
    every task, the killed cgroup's too) when no cgroup is named."""
    cg, memcg = c.impact.get("cgroup"), e.impact.get("memcg")
    if cg:
        if memcg and (memcg == cg or str(memcg).startswith(str(cg).rstrip("/") + "/")):
            return f"the killed task's memory cgroup {memcg} is the one under pressure"
        return None
    if e.impact.get("constraint") == "CONSTRAINT_MEMCG":
        return (
            "tasks stalled on memory host-wide before the kill (memory PSI counts the "
            f"tasks of {memcg or 'the killed cgroup'} too)"
        )
    return "host-wide memory pressure before a host-wide OOM kill"


def _host_oom(c: Finding, e: Finding) -> str | None:
    if e.impact.get("constraint") == "CONSTRAINT_MEMCG":
        return None
    return "the host was swapping before a host-wide OOM kill"


def _net_softirq(c: Finding, e: Finding) -> str | None:
    if not any("NET_RX" in ev.signal or "NET_TX" in ev.signal for ev in c.evidence):
        return None
    return "network softirqs saturated a CPU while packets were dropped"


def _during(words: str) -> Callable[[Finding, Finding], str | None]:
    return lambda c, e: words


@dataclass(frozen=True)
class Rule:
    """``cause`` → ``effect`` when their windows overlap (or the effect starts at most
    ``lag_s`` after the cause) and ``mechanism`` finds the link in the data (its text)."""

    cause: str
    effect: str
    lag_s: float
    mechanism: Callable[[Finding, Finding], str | None]


RULES: list[Rule] = [
    Rule("checkpoint_stall", "gpu_starvation", 5, _dip),  # write burst -> io wait -> GPU idle
    Rule("io_saturation", "gpu_starvation", 5, _dip),
    Rule("checkpoint_stall", "hung_task", 0, _during("the task blocked in uninterruptible sleep while the disk was saturated")),
    Rule("io_saturation", "hung_task", 0, _during("the task blocked in uninterruptible sleep while the disk was saturated")),
    Rule("cpu_throttle", "gpu_starvation", 5, _dip),  # quota -> loader throttled -> GPU idle
    Rule("cpu_contention", "gpu_starvation", 5, _dip),
    Rule("irq_hotspot", "gpu_starvation", 5, _dip),
    Rule("irq_hotspot", "net_errors", 5, _net_softirq),
    Rule("net_errors", "gpu_starvation", 5, _dip),
    Rule("memory_pressure", "swap_activity", 10, _during("reclaim under memory pressure swapped pages out")),
    Rule("memory_pressure", "oom_kill", 60, _same_memcg),
    Rule("swap_activity", "oom_kill", 60, _host_oom),
    Rule("memory_pressure", "gpu_starvation", 5, _dip),
    Rule("swap_activity", "gpu_starvation", 5, _dip),
    Rule("oom_kill", "gpu_starvation", 30, _dip),
    Rule("gpu_throttle", "gpu_starvation", 5, _dip),
    Rule("gpu_xid", "gpu_starvation", 60, _dip),
    Rule("cpu_contention", "sampling_gap", 0, _inside),  # an overloaded host starves its collectors
    Rule("memory_pressure", "sampling_gap", 0, _inside),
    Rule("swap_activity", "sampling_gap", 0, _inside),
    Rule("io_saturation", "sampling_gap", 0, _inside),
    Rule("checkpoint_stall", "sampling_gap", 0, _inside),
    Rule("hung_task", "sampling_gap", 0, _inside),
]  # fmt: skip


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
    mechanisms: list[str] = field(default_factory=list)  # "cause → effect: why", per link
    concurrent: list[int] = field(default_factory=list)  # chain ids overlapping, unlinked


def links(findings: list[Finding]) -> list[tuple[int, int, str]]:
    """(cause index, effect index, mechanism) by `RULES` (effects looked up by start)."""
    by_kind: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_kind.setdefault(f.kind, []).append(i)
    for ids in by_kind.values():
        ids.sort(key=lambda i: findings[i].start)
    out: dict[tuple[int, int], str] = {}
    for rule in RULES:
        effects = by_kind.get(rule.effect, [])
        if not effects or rule.cause not in by_kind:
            continue
        starts = [findings[i].start for i in effects]
        longest = max(findings[i].end - findings[i].start for i in effects)
        for i in by_kind[rule.cause]:
            c = findings[i]
            if c.impact.get("throughout"):
                continue  # a state of the whole capture, not an event that causes others
            hi = bisect_right(starts, c.end + timedelta(seconds=max(rule.lag_s, PAD_S)))
            lo = bisect_left(starts, c.start - longest - timedelta(seconds=PAD_S))
            for j in effects[lo:hi]:
                why = _near(c, findings[j], rule.lag_s) and rule.mechanism(c, findings[j])
                if why and (i, j) not in out:
                    out[(i, j)] = why
    return sorted((a, b, why) for (a, b), why in out.items())


def _near(c: Finding, e: Finding, lag: float) -> bool:
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

    linked = links(findings)
    edges = [(a, b) for a, b, _ in linked]
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
        _chain(findings, sorted(m, key=lambda i: (findings[i].start, i)), caused, linked)
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
    _mark_concurrent(chains, findings)
    return chains


def _mark_concurrent(chains: list[Chain], findings: list[Finding]) -> None:
    """Chains that overlap in time without a mechanism linking them name each other."""
    for c in chains:
        for d in chains:
            if d is not c and overlap_s((c.start, c.end), (d.start, d.end)) > 0:
                c.concurrent.append(d.chain_id)
        if c.concurrent:
            names = ", ".join(
                f"{d} ({findings[chains[d - 1].cause].key.replace('_', ' ').lower()})"
                for d in c.concurrent[:5]
            )
            c.summary += (
                f" Concurrent with incident {names}: they overlap in time, but no mechanism "
                "in the data links them, so neither is shown as the other's cause."
            )


def _killed(findings: list[Finding], c: Chain) -> int:
    return sum(int(findings[i].impact.get("processes_killed") or 0) for i in c.members)


def _chain(
    findings: list[Finding],
    members: list[int],
    caused: set[int],
    linked: list[tuple[int, int, str]],
) -> Chain:
    roots = [i for i in members if i not in caused] or members
    cause = roots[0]
    cf = findings[cause]
    mset = set(members)
    effects: list[str] = []
    mechanisms: list[str] = []
    for a, b, why in linked:
        if a in mset and b in mset and findings[b].kind != cf.kind:
            if findings[b].kind not in effects:
                effects.append(findings[b].kind)
            text = f"{findings[a].kind.replace('_', ' ')} → {findings[b].kind.replace('_', ' ')}: {why}"
            if text not in mechanisms:
                mechanisms.append(text)
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
            text += f" Effects: {', '.join(k.replace('_', ' ') for k in effects)}"
            text += f" ({'; '.join(m.split(': ', 1)[1] for m in mechanisms[:3])})."
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
        mechanisms,
    )
