"""Storms: many events of one kind told as one finding (helper of the kernel-log detectors
``oom_kill``, ``gpu_xid``, ``hung_task``; their "Storms" in docs/detectors.md).

Above a detector's threshold its events are not one finding each: one finding says how
many there were, the `TOP` most frequent values of what tells them apart (victim command,
cgroup, GPU, code) with their counts, the span, and at most `SAMPLE_LINES` log lines (the
first and the last events' lines in time order). Everything here is SQL over the events
query the detector hands in (its values bound as parameters), so neither the work nor the
finding's size grows with the number of events; every event stays in its table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyzer.detectors._base import Context
from analyzer.findings import Evidence, LogLine

TOP = 5  # values named with their counts
SAMPLE_LINES = 20  # log lines attached: the first and the last half of the events


@dataclass(frozen=True)
class Top:
    """The most frequent values: ``items`` (value, count) in descending count, ``distinct``
    values in all, ``total`` count."""

    items: list[tuple[str, int]]
    distinct: int
    total: int


def top_values(ctx: Context, sql: str, params: dict[str, Any] | None = None) -> Top:
    """The `TOP` most frequent ``name`` of ``sql``'s rows, each row counting ``n``
    (columns ``name``, ``n``; a NULL name is '?')."""
    df = ctx.query(
        "SELECT name, n, count(*) OVER () AS distinct_names, sum(n) OVER () AS total FROM ("
        " SELECT coalesce(CAST(name AS VARCHAR), '?') AS name, sum(n) AS n FROM (" + sql + ")"
        " GROUP BY 1) ORDER BY n DESC, name LIMIT $top",
        {**(params or {}), "top": TOP},
    )
    if not df.height:
        return Top([], 0, 0)
    items = [(str(a), int(b)) for a, b in df.select("name", "n").iter_rows()]
    return Top(items, int(df["distinct_names"][0]), int(df["total"][0]))


def names(t: Top, k: int = 3) -> str:
    """'python3, dataloader and 4 others' (the ``k`` most frequent values)."""
    shown = [name for name, _ in t.items[:k]]
    rest = t.distinct - len(shown)
    return ", ".join(shown) + (f" and {rest:,} other{'s' if rest > 1 else ''}" if rest > 0 else "")


def counts(t: Top) -> str:
    """'python3 5,334, dataloader 5,333 (2 others: 12)'."""
    text = ", ".join(f"{name} {n:,}" for name, n in t.items)
    rest = t.distinct - len(t.items)
    if rest > 0:
        text += (
            f" ({rest:,} other{'s' if rest > 1 else ''}: {t.total - sum(n for _, n in t.items):,})"
        )
    return text


def evidence(signal: str, t: Top) -> list[Evidence]:
    """One evidence row per named value: its count."""
    return [Evidence(signal, float(n), None, "count", name) for name, n in t.items]


def sample_lines(ctx: Context, sql: str, params: dict[str, Any] | None = None) -> list[LogLine]:
    """The log lines of the first and last `SAMPLE_LINES` / 2 rows of ``sql`` (columns
    source_file, line_no, ts, message) in time order."""
    df = ctx.query(
        "SELECT source_file, line_no, ts, message FROM (SELECT *,"
        " row_number() OVER (ORDER BY ts, source_file, line_no) AS i, count(*) OVER () AS m"
        " FROM (" + sql + ")) WHERE i <= $half OR i > m - $half ORDER BY i",
        {**(params or {}), "half": SAMPLE_LINES // 2},
    )
    return [
        LogLine(r["source_file"], r["line_no"], r["ts"], r["message"] or "")
        for r in df.iter_rows(named=True)
    ]


def caveat(n: int, what: str, where: str) -> str:
    """Says that this finding stands for ``n`` events and where each of them is."""
    return (
        f"A storm of {n:,} {what}, told as one finding (the most frequent values, at most "
        f"{SAMPLE_LINES} sample log lines); every one is in {where}."
    )
