"""The application's symptom before and after (for `hindsight diff`): its P50/P99 or
throughput on each side, what explained it on each side, and which configuration changes
belong to the explanations that disappeared.

Input: the symptom stage's tables of each analysed store (`analyzer.symptoms.schema`,
docs/symptoms.md): ``symptoms``, ``symptom_series``, ``symptom_windows``,
``symptom_explanations``. A side without ``symptoms`` (an older store, a capture without
application series) has no symptom; then nothing is compared, and the caller notes it
when exactly one side has one.

**Matching.** The symptoms of both sides are paired by ``(family, labels, stat)`` — the
metric family or series / column name, its labels, the statistic (``p99``, ``p50``,
``mean``, ``rate``, ``value``) — never by ``source`` (the endpoint scraped or the file
given to ``--app-series`` differ between captures). Symptoms left over are paired again
by ``(family, stat, labels without the instance labels of`` `INSTANCE_LABELS` ``)`` (a
restarted pod, another host: ``instance``, ``pod``, ``host``…); the pair's ``match``
then names the labels ignored. Several symptoms with one key on a side are paired in
``symptom_id`` order. The rest are listed as ``only_before`` / ``only_after``.

**Numbers.** For each pair, over the aligned span of `analyzer.diff` (second 0 = the
first second of that side's ``signals``; only ``rel_s < aligned_s``): the distribution of
the symptom's per-second values (``symptom_series.value``; for a per-request series the
per-second p99 or p50, docs/symptoms.md) by the same ``distribution`` as the signals (n,
mean, σ, variance, p50/p95/p99 linear, max), ``change_pct`` = (after / before − 1) × 100
of ``mean``, ``p50``, ``p95``, ``p99``. The **lead number** is the p99 over seconds when
the symptom gets worse upwards (latency, step time: the slow seconds are the tail) and
the mean when it gets worse downwards (throughput: the work done per second);
``better`` is whether it moved in the good direction (None without numbers), ``verdict``
``better`` / ``worse`` when it moved by at least `NOTABLE_PCT`, else ``unchanged``.
``windows``: symptom windows starting in the aligned span, per side.

**Explanations.** Per pair and side, the ``(mechanism_group, candidate)`` rows with
``role = cause`` in windows that start in the aligned span, with how many windows each
explains; ``status`` ``gone`` (a cause before, not after), ``new`` (after only),
``kept``; ``not explained after/before`` when the side without the cause had symptom
windows but no ``symptom_explanations`` (no host signals: nothing could be checked). A
side with no symptom window has nothing to explain: a cause before is then ``gone``.

**Related configuration.** For each mechanism group of a gone or new cause, the host
configuration changes (`analyzer.diff_config.compare_config`) that tune that mechanism
(`CONFIG_OF`: CPU quota ← ``cpu.max``/``cfs_quota_us``; CPU contention ← scheduling
policy and affinity of the target processes, CPU isolation, ``cpuset``/CPU weight,
``kernel.sched*``; memory ← ``vm.swappiness``, ``vm.overcommit*``, THP, memory cgroup
limits; I/O ← ``vm.dirty*``, ``io.max``/``blkio``; IRQ ← IRQ affinity; network ←
``net.*``; GPU ← GPU facts), best first.

`headline_parts` turns the result into the lead of `analyzer.diff.headline`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import duckdb
import polars as pl

from analyzer.symptoms.mechanisms import MECHANISMS
from analyzer.symptoms.words import fmt as fmt_value

#: labels that name where a series was scraped, not what it measures
INSTANCE_LABELS = frozenset(
    {"instance", "pod", "pod_name", "host", "hostname", "node", "nodename", "container",
     "container_id", "replica", "ip"}
)  # fmt: skip
NOTABLE_PCT = 10.0  # a lead number that moved less is `unchanged`
KIND_ORDER = ("latency", "step_time", "throughput", "value")
CHANGE_KEYS = ("mean", "p50", "p95", "p99")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

#: mechanism group -> (host_config source, key pattern) that tune it, best first
CONFIG_OF: dict[str, tuple[tuple[str, str], ...]] = {
    "cpu_quota": (
        ("cgroup_limits", r"cpu\.max quota|cfs_quota"),
        ("cgroup_limits", r"cpu\.max|cfs_period"),
    ),
    "cpu_contention": (
        ("sched", r"\.(affinity_list|affinity|policy)$"),
        ("sched", r""),
        ("cpu", r""),
        ("cmdline", r"isolcpus|nohz|rcu_nocbs|irqaffinity"),
        ("cgroup_limits", r"cpuset|cpu\.weight|cpu\.shares"),
        ("sysctl", r"^kernel\.sched"),
        ("cpufreq", r""),
    ),
    "memory": (
        ("sysctl", r"^vm\.(swappiness|overcommit)"),
        ("thp", r""),
        ("cgroup_limits", r"memory\.(max|high|limit|memsw|swap)|memsw"),
        ("sysctl", r"^vm\.(min_free|watermark|zone_reclaim|vfs_cache)"),
        ("cgroup_limits", r"^memory\."),
    ),
    "io": (
        ("sysctl", r"^vm\.dirty"),
        ("cgroup_limits", r"io\.max|blkio|io\.weight"),
    ),
    "irq": (("irq_affinity", r""), ("cmdline", r"irqaffinity")),
    "network": (("sysctl", r"^net\."), ("irq_affinity", r"")),
    "gpu_throttle": (("nvidia_query", r"power|clock|temp"), ("nvidia_query", r"")),
    "gpu_error": (("nvidia_query", r""), ("nvidia_list", r""), ("uname", r"")),
}
STATUS_ORDER = {"gone": 0, "new": 1, "kept": 2}
#: mechanism groups whose knobs the headline names when no cause came or went
TUNING_ORDER = ("cpu_quota", "cpu_contention", "memory", "io", "irq")

Summarise = Callable[[pl.Series], dict[str, Any]]


def _has(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    n = con.sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", params=[table]
    ).fetchall()[0][0]
    return bool(n)


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    return {r[0] for r in con.sql(f'DESCRIBE "{table}"').fetchall()}


CATALOGUE = (
    "symptom_id", "name", "kind", "stat", "unit", "worse", "is_primary", "source_table",
    "source", "family", "labels", "status",
)  # fmt: skip


def catalogue(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]] | None:
    """The side's symptoms (rows of ``symptoms`` with a family and a stat), None when the
    store has no ``symptoms`` table."""
    if not _has(con, "symptoms"):
        return None
    have = _columns(con, "symptoms")
    if not {"symptom_id", "family", "stat"} <= have:
        return []
    select = ", ".join(c if c in have else f"NULL AS {c}" for c in CATALOGUE)
    rows = con.sql(
        f"SELECT {select} FROM symptoms WHERE family IS NOT NULL AND stat IS NOT NULL "
        "ORDER BY symptom_id"
    ).pl()
    return rows.to_dicts()


def parse_labels(labels: str | None) -> dict[str, str]:
    """``a="1",b="x"`` (app_metric_sample form) as a dict.

    >>> parse_labels('instance="10.0.0.1:8000",model_name="m"')
    {'instance': '10.0.0.1:8000', 'model_name': 'm'}
    """
    return dict(_LABEL.findall(labels or ""))


def _without_instance(labels: str | None) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted((k, v) for k, v in parse_labels(labels).items() if k not in INSTANCE_LABELS)
    )


def match(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any], str]], list[dict], list[dict]]:
    """(pairs, only before, only after); a pair is (before row, after row, match) with
    match ``exact`` or ``labels ignored: instance, pod`` (see the module docstring).

    >>> b = [{"symptom_id": 1, "family": "lat", "labels": 'instance="a",m="x"', "stat": "p99"}]
    >>> a = [{"symptom_id": 7, "family": "lat", "labels": 'instance="b",m="x"', "stat": "p99"},
    ...      {"symptom_id": 8, "family": "lat", "labels": None, "stat": "p50"}]
    >>> pairs, ob, oa = match(b, a)
    >>> [(x["symptom_id"], y["symptom_id"], m) for x, y, m in pairs], ob, [r["symptom_id"] for r in oa]
    ([(1, 7, 'labels ignored: instance')], [], [8])
    """
    pairs: list[tuple[dict[str, Any], dict[str, Any], str]] = []
    left_b, left_a = list(before), list(after)
    for how in ("exact", "instance"):

        def key(r: dict[str, Any], how: str = how) -> tuple[Any, ...]:
            labels = r.get("labels") or None
            lab = labels if how == "exact" else _without_instance(labels)
            return (r["family"], r["stat"], lab)

        rest_b = []
        for rb in left_b:
            ra = next((x for x in left_a if key(x) == key(rb)), None)
            if ra is None:
                rest_b.append(rb)
                continue
            left_a.remove(ra)
            text = "exact"
            if how != "exact":
                lb, la = parse_labels(rb.get("labels")), parse_labels(ra.get("labels"))
                ignored = sorted(k for k in set(lb) | set(la) if lb.get(k) != la.get(k))
                text = "labels ignored: " + ", ".join(ignored)
            pairs.append((rb, ra, text))
        left_b = rest_b
    return pairs, left_b, left_a


def _values(con: duckdb.DuckDBPyConnection, t0: datetime | None, aligned: int) -> pl.DataFrame:
    """``symptom_id, rel_s, value`` of the aligned span (``rel_s`` since the side's t0)."""
    empty = pl.DataFrame(schema={"symptom_id": pl.Int32, "rel_s": pl.Int64, "value": pl.Float64})
    if t0 is None or aligned <= 0 or not _has(con, "symptom_series"):
        return empty
    frame = con.sql(
        """SELECT CAST(symptom_id AS INTEGER) AS symptom_id,
                  CAST(floor(epoch(ts) - epoch($t0::TIMESTAMPTZ)) AS BIGINT) AS rel_s,
                  CAST(value AS DOUBLE) AS value
           FROM symptom_series WHERE ts IS NOT NULL AND ts >= $t0::TIMESTAMPTZ
             AND ts < $t0::TIMESTAMPTZ + to_seconds($n) ORDER BY symptom_id, ts""",
        params={"t0": t0, "n": int(aligned)},
    ).pl()
    return frame if frame.height else empty


def _windows(con: duckdb.DuckDBPyConnection, t0: datetime | None, aligned: int) -> dict[int, int]:
    if t0 is None or not _has(con, "symptom_windows"):
        return {}
    rows = con.sql(
        """SELECT symptom_id, count(*) FROM symptom_windows
           WHERE start_ts >= $t0::TIMESTAMPTZ AND start_ts < $t0::TIMESTAMPTZ + to_seconds($n)
           GROUP BY 1""",
        params={"t0": t0, "n": int(aligned)},
    ).fetchall()
    return {int(s): int(n) for s, n in rows}


def _causes(
    con: duckdb.DuckDBPyConnection, t0: datetime | None, aligned: int
) -> dict[int, dict[tuple[str, str], dict[str, Any]]] | None:
    """symptom_id -> (mechanism_group, candidate) -> windows explained, candidate type and
    the best-ranked sentence; None when the store has no ``symptom_explanations``."""
    if not (_has(con, "symptom_explanations") and _has(con, "symptom_windows")) or t0 is None:
        return None
    rows = con.sql(
        """SELECT e.symptom_id, coalesce(e.mechanism_group, ''), e.candidate,
                  any_value(e.candidate_type), count(DISTINCT e.window_id),
                  arg_min(e.sentence, e.rank)
           FROM symptom_explanations e JOIN symptom_windows w ON w.window_id = e.window_id
           WHERE e.role = 'cause' AND w.start_ts >= $t0::TIMESTAMPTZ
             AND w.start_ts < $t0::TIMESTAMPTZ + to_seconds($n)
           GROUP BY 1, 2, 3""",
        params={"t0": t0, "n": int(aligned)},
    ).fetchall()
    out: dict[int, dict[tuple[str, str], dict[str, Any]]] = {}
    for sid, group, cand, ctype, n, sentence in rows:
        out.setdefault(int(sid), {})[(group, cand)] = {
            "candidate_type": ctype, "windows": int(n), "sentence": sentence,
        }  # fmt: skip
    return out


def _pct(after: float | None, before: float | None) -> float | None:
    if after is None or before is None or before == 0:
        return None
    return (after / before - 1.0) * 100.0


def lead_stat(worse: str | None) -> str:
    """The number a symptom is judged by: p99 over seconds (worse up), mean (worse down)."""
    return "mean" if worse == "down" else "p99"


def _explanations(sid_b: int, sid_a: int, sides: dict[str, Any]) -> list[dict[str, Any]]:
    cb, ca = sides["before"]["causes"], sides["after"]["causes"]
    eb = (cb or {}).get(sid_b, {})
    ea = (ca or {}).get(sid_a, {})
    rows = []
    for key in sorted(set(eb) | set(ea)):
        b, a = eb.get(key), ea.get(key)
        if b and a:
            status = "kept"
        elif b:
            unexplained = ca is None and sides["after"]["windows"].get(sid_a, 0) > 0
            status = "not explained after" if unexplained else "gone"
        else:
            unexplained = cb is None and sides["before"]["windows"].get(sid_b, 0) > 0
            status = "not explained before" if unexplained else "new"
        group, cand = key
        rows.append(
            {"mechanism_group": group or None, "candidate": cand,
             "candidate_type": (b or a or {}).get("candidate_type"), "status": status,
             "before_windows": (b or {}).get("windows", 0), "after_windows": (a or {}).get("windows", 0),
             "sentence": (b or a or {}).get("sentence")}
        )  # fmt: skip
    rows.sort(key=lambda r: (STATUS_ORDER.get(r["status"], 3), -max(r["before_windows"], r["after_windows"]), r["candidate"]))  # fmt: skip
    return rows


def related_config(group: str, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The configuration changes that tune mechanism ``group`` (`CONFIG_OF`), best first:
    by pattern, then changed before removed before added, then by key.

    >>> ch = [{"source": "sysctl", "key": "vm.swappiness", "change": "changed"},
    ...       {"source": "thp", "key": "thp.enabled", "change": "changed"},
    ...       {"source": "sysctl", "key": "net.core.somaxconn", "change": "changed"}]
    >>> [c["key"] for c in related_config("memory", ch)]
    ['vm.swappiness', 'thp.enabled']
    """
    ranked = []
    for c in changes:
        for i, (source, pattern) in enumerate(CONFIG_OF.get(group, ())):
            if c["source"] == source and re.search(pattern, c["key"]):
                order = {"changed": 0, "removed": 1, "added": 2}.get(c["change"], 3)
                ranked.append((i, order, c["key"], c))
                break
    return [r[-1] for r in sorted(ranked, key=lambda r: r[:3])]


def compare_symptoms(
    before: duckdb.DuckDBPyConnection,
    after: duckdb.DuckDBPyConnection,
    t0_before: datetime | None,
    t0_after: datetime | None,
    aligned: int,
    config_changes: list[dict[str, Any]],
    summarise: Summarise,
) -> dict[str, Any]:
    """The symptom part of the diff (see the module docstring). ``summarise`` is
    `analyzer.diff.distribution` (passed in: the import graph has no cycles).

    Returns ``{"present": {"before": bool, "after": bool}, "matched": [...],
    "only_before": [...], "only_after": [...], "lead": index into matched or None}`` and,
    for the charts, ``series``: ``matched index -> side -> frame (x = rel_s, value)``
    (not in the JSON)."""
    cat_b, cat_a = catalogue(before), catalogue(after)
    out: dict[str, Any] = {
        "present": {"before": bool(cat_b), "after": bool(cat_a)},
        "matched": [], "only_before": [], "only_after": [], "lead": None, "series": {},
    }  # fmt: skip
    if not cat_b or not cat_a:
        return out
    sides = {
        side: {
            "values": _values(con, t0, aligned),
            "windows": _windows(con, t0, aligned),
            "causes": _causes(con, t0, aligned),
        }
        for side, con, t0 in (("before", before, t0_before), ("after", after, t0_after))
    }
    pairs, only_b, only_a = match(cat_b, cat_a)
    for i, (rb, ra, how) in enumerate(pairs):
        frames = {
            side: sides[side]["values"]
            .filter(pl.col("symptom_id") == r["symptom_id"])
            .select(pl.col("rel_s").alias("x"), pl.col("value"))
            for side, r in (("before", rb), ("after", ra))
        }
        db, da = summarise(frames["before"]["value"]), summarise(frames["after"]["value"])
        worse = rb.get("worse") or ra.get("worse")
        lead = lead_stat(worse)
        change = {k: _pct(da[k], db[k]) for k in CHANGE_KEYS}
        better = None
        verdict = (
            "missing " + ("before" if not db["n"] else "after") if db["n"] or da["n"] else "missing"
        )
        if db["n"] and da["n"] and db[lead] is not None and da[lead] is not None:
            moved = da[lead] - db[lead]
            better = moved > 0 if worse == "down" else moved < 0
            pct = change[lead]
            notable = abs(pct) >= NOTABLE_PCT if pct is not None else moved != 0
            verdict = ("better" if better else "worse") if notable and moved != 0 else "unchanged"
        row = {
            "family": rb["family"], "labels": rb.get("labels"), "stat": rb["stat"],
            "match": how, "kind": rb.get("kind") or ra.get("kind"), "unit": rb.get("unit") or ra.get("unit"),
            "worse": worse, "is_primary": bool(rb.get("is_primary")) or bool(ra.get("is_primary")),
            "label": label(rb), "lead_stat": lead,
            "before": {**_ident(rb), **db, "windows": sides["before"]["windows"].get(rb["symptom_id"], 0)},
            "after": {**_ident(ra), **da, "windows": sides["after"]["windows"].get(ra["symptom_id"], 0)},
            "change_pct": change, "better": better, "verdict": verdict,
            "explanations": _explanations(rb["symptom_id"], ra["symptom_id"], sides),
        }  # fmt: skip
        groups = []
        for e in row["explanations"]:
            g = e["mechanism_group"]
            if e["status"] in ("gone", "new") and g and g not in groups:
                groups.append(g)
        row["related_config"] = [
            {"mechanism_group": g, "keys": [c["key"] for c in related_config(g, config_changes)]}
            for g in groups
        ]
        out["matched"].append(row)
        out["series"][i] = frames
    out["only_before"] = [_unmatched(r) for r in only_b]
    out["only_after"] = [_unmatched(r) for r in only_a]
    out["lead"] = _lead(out["matched"])
    return out


def _ident(r: dict[str, Any]) -> dict[str, Any]:
    return {"symptom_id": r["symptom_id"], "name": r.get("name"), "source": r.get("source"),
            "labels": r.get("labels"), "status": r.get("status")}  # fmt: skip


def _unmatched(r: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "symptom_id",
        "name",
        "family",
        "labels",
        "stat",
        "kind",
        "unit",
        "source",
        "is_primary",
    )
    return {k: r.get(k) for k in keep}


def label(r: dict[str, Any]) -> str:
    """The symptom named without its source (which differs between captures):
    ``P99 of latency_ms``, ``requests/s of vllm:e2e_request_latency_seconds{…}``."""
    fam = r["family"] + (f"{{{r['labels']}}}" if r.get("labels") else "")
    stat = r["stat"]
    if stat in ("p99", "p50"):
        return f"{stat.upper()} of {fam}"
    if stat == "mean":
        return f"mean of {fam}"
    name = str(r.get("name") or fam)
    if stat == "rate" and " of " in name:
        return f"{name.split(' of ', 1)[0]} of {fam}"
    if r.get("source_table") == "app_log_line":
        return name.split(" of ", 1)[0] if " of " in name else fam
    return fam


def _lead(matched: list[dict[str, Any]]) -> int | None:
    """The pair the headline leads with: primary, numbers on both sides; latency before
    step time before throughput before plain values; then the largest change."""
    best = None
    for i, m in enumerate(matched):
        if not m["is_primary"] or m["better"] is None:
            continue
        pct = m["change_pct"].get(m["lead_stat"])
        kind = KIND_ORDER.index(m["kind"]) if m["kind"] in KIND_ORDER else len(KIND_ORDER)
        rank = (kind, -abs(pct) if pct is not None else 0.0, i)
        if best is None or rank < best[0]:
            best = (rank, i)
    return None if best is None else best[1]


def _signed(pct: float) -> str:
    return f"{pct:+.0f} %".replace("-", "−")


def change_text(m: dict[str, Any]) -> str:
    """``P99 of latency_ms 498 ms → 39.8 ms (−92 %)`` (the pair's lead number)."""
    k, unit = m["lead_stat"], m["unit"] or ""
    b, a = m["before"][k], m["after"][k]
    text = f"{m['label']} {fmt_value(b, unit)} → {fmt_value(a, unit)}"
    if k == "mean" and m["stat"] not in ("mean",):
        text = f"{m['label']} mean {fmt_value(b, unit)} → {fmt_value(a, unit)}"
    pct = m["change_pct"].get(k)
    if pct is not None:
        text += f" ({_signed(pct)})"
    return text


def mechanism_words(group: str | None) -> str:
    """A mechanism group in two or three words (`MECHANISMS` ``short``, without 'the')."""
    if not group or group not in MECHANISMS:
        return group or "unknown"
    return MECHANISMS[group].short.removeprefix("the ")


def config_text(c: dict[str, Any]) -> str:
    """```key` a → b``, ```key` a removed``, ```key` b added``."""
    if c["change"] == "removed":
        return f"`{c['key']}` {c['before']} removed"
    if c["change"] == "added":
        return f"`{c['key']}` {c['after']} added"
    return f"`{c['key']}` {c['before']} → {c['after']}"


def headline_parts(sym: dict[str, Any], changes: list[dict[str, Any]]) -> list[str]:
    """The headline's lead: the symptom's change, the configuration change that belongs to
    the causes that disappeared (or appeared), and those causes; [] without a pair."""
    if sym.get("lead") is None:
        return []
    m = sym["matched"][sym["lead"]]
    parts = [change_text(m)]
    by_key = {c["key"]: c for c in changes}
    keys: list[str] = []
    for rel in m["related_config"]:
        keys += [k for k in rel["keys"] if k not in keys]
    if keys:
        text = config_text(by_key[keys[0]])
        if len(keys) > 1:
            text += f" (+{len(keys) - 1} related)"
        parts.append(text)
    elif m["verdict"] in ("better", "worse"):
        # no cause came or went (no window on either side: the load was steady): the
        # tuning knobs that changed are the candidates, named as such, not as the cause
        knobs = [c for g in TUNING_ORDER for c in related_config(g, changes)]
        knobs = list({c["key"]: c for c in knobs}.values())
        if knobs:
            text = "tuning changed: " + config_text(knobs[0])
            if len(knobs) > 1:
                text += f" (+{len(knobs) - 1})"
            parts.append(text)
    for status in ("gone", "new"):
        groups: list[str] = []
        for e in m["explanations"]:
            w = mechanism_words(e["mechanism_group"])
            if e["status"] == status and w not in groups:
                groups.append(w)
        if groups:
            parts.append(f"cause {status}: {', '.join(groups)}")
    return parts
