"""Flame graphs (icicles) of the sampled on-CPU stacks, drawn as plain HTML on the server.

Inputs: ``stack_samples`` (ts = slice end, interval_s, pid, comm, stack folded root → leaf,
samples; see `analyzer.parsers.stacks`) and ``stack_slices`` (all samples per slice, to say
what the top-N cap left out); ``collectors`` says why there are no stacks.

The vendored plotly bundle is a partial one without the ``icicle`` trace, so the graph is
HTML: one absolutely positioned ``div`` per node (left/width in % of the parent's samples,
one row per depth), root at the top (an icicle: callers above callees). The first row is
"all", the second the processes (``comm [pid]``), then the frames. Every name is escaped
(`markupsafe.escape`); the ``title`` gives the full frame name, samples and share.

Bounded: at most ``MAX_NODES`` nodes and ``MAX_DEPTH`` rows per graph; nodes under
``MIN_SHARE`` of the graph's samples are left out (their samples stay in the parent's width,
so the gap under a parent is "self time plus what was too small to draw").
"""

from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from reports.queries import Store

MAX_NODES = 400
MAX_DEPTH = 48
MIN_SHARE = 0.004
ROW_PX = 17
#: finding kinds whose card gets the stacks of its window (CPU-bound causes)
CPU_KINDS = frozenset({"cpu_contention", "cpu_throttle", "gpu_starvation", "irq_hotspot"})


@dataclass
class _Node:
    name: str
    samples: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def no_stacks_reason(store: Store) -> str:
    """Why the bundle has no stacks: the stack collector's status and reason."""
    if store.usable("collectors", "tool", "status"):
        cols = set(store.columns("collectors"))
        reason = "reason" if "reason" in cols else "NULL"
        name = "collector" if "collector" in cols else "file"
        status = "coalesce(manifest_status, status)" if "manifest_status" in cols else "status"
        rows = store.con.sql(
            f"SELECT {name}, {status}, {reason} FROM collectors WHERE tool = 'stacks' ORDER BY 1"
        ).fetchall()
        if len(rows) == 1:
            n, st, why = rows[0]
            return f"No sampled stacks: the stack collector ({n}) was {st}" + (
                f": {why}." if why else "."
            )
        if rows:  # bpf_stacks and its perf fallback perf_stacks
            each = "; ".join(f"{n} was {st}" + (f": {why}" if why else "") for n, st, why in rows)
            return f"No sampled stacks: the stack collectors: {each}."
    return (
        "No sampled stacks: the bundle has no stack collector (a capture before issue #19, "
        "or not captured with hindsight-capture.sh)."
    )


def _window_sql(x0: int | None, x1: int | None) -> tuple[str, dict[str, Any]]:
    if x0 is None:
        return "TRUE", {}
    # a slice [ts - interval_s, ts] overlaps the window [x0, x1]
    return (
        "epoch_ms(ts) > $x0 AND epoch_ms(ts) - 1000 * coalesce(interval_s, 10) < $x1",
        {"x0": int(x0), "x1": int(x1 if x1 is not None else x0)},
    )


def flame_data(store: Store, x0: int | None = None, x1: int | None = None) -> dict[str, Any] | None:
    """The stacks of the window (the whole capture without one) as a tree, or None."""
    if not store.usable("stack_samples", "ts", "comm", "pid", "stack", "samples"):
        return None
    cond, params = _window_sql(x0, x1)
    rows = store.con.sql(
        "SELECT comm, pid, stack, sum(samples) AS n FROM stack_samples "
        f"WHERE ts IS NOT NULL AND {cond} GROUP BY ALL ORDER BY n DESC, comm, pid, stack",
        params=params,
    ).fetchall()
    if not rows:
        return None
    root = _Node("all")
    for comm, pid, stack, n in rows:
        n = int(n or 0)
        root.samples += n
        proc = f"{comm} [{pid}]"
        node = root.children.setdefault(proc, _Node(proc))
        node.samples += n
        for frame in str(stack).split(";")[: MAX_DEPTH - 2]:
            node = node.children.setdefault(frame, _Node(frame))
            node.samples += n
    total = None
    if store.usable("stack_slices", "ts", "samples"):
        total = store.con.sql(
            f"SELECT sum(samples) FROM stack_slices WHERE ts IS NOT NULL AND {cond}", params=params
        ).fetchall()[0][0]
    return {"root": root, "shown": root.samples, "total": int(total) if total else None}


def _color(name: str) -> str:
    h = int(hashlib.md5(name.encode("utf-8", "replace")).hexdigest()[:6], 16)
    if name.endswith("_[k]"):
        return f"hsl({20 + h % 25}, 80%, {62 + h % 12}%)"  # kernel: orange
    if name.startswith("["):
        return f"hsl(0, 0%, {78 + h % 10}%)"  # unknown frames: grey
    return f"hsl({(h % 55) - 5}, 75%, {60 + h % 15}%)"  # user: red to yellow


def render(data: dict[str, Any] | None, *, graph_id: str) -> Markup:
    """The icicle as HTML (escaped names), at most ``MAX_NODES`` nodes."""
    if data is None or not data["shown"]:
        return Markup("")
    root: _Node = data["root"]
    total = root.samples
    keep_min = max(1, int(total * MIN_SHARE))
    # best-first over the tree: the widest nodes first, until the budget is used up
    out: list[tuple[int, float, float, _Node]] = []  # depth, left %, width %, node
    heap: list[tuple[int, int, int, float, _Node]] = [(-total, 0, 0, 0.0, root)]
    seq = 1
    max_depth = 0
    while heap and len(out) < MAX_NODES:
        _, _, depth, left, node = heapq.heappop(heap)
        width = 100.0 * node.samples / total
        out.append((depth, left, width, node))
        max_depth = max(max_depth, depth)
        x = left
        for child in sorted(node.children.values(), key=lambda c: (-c.samples, c.name)):
            if child.samples >= keep_min and depth + 1 < MAX_DEPTH:
                heapq.heappush(heap, (-child.samples, seq, depth + 1, x, child))
                seq += 1
            x += 100.0 * child.samples / total
    parts = [
        f'<div class="flame" id="{escape(graph_id)}" style="height:{(max_depth + 1) * ROW_PX}px" '
        f'role="img" aria-label="flame graph of sampled on-CPU stacks">'
    ]
    for depth, left, width, node in sorted(out, key=lambda o: (o[0], o[1])):
        share = 100.0 * node.samples / total
        tip = f"{node.name}\n{node.samples:,} samples, {share:.1f}%"
        cls = "fl fl-proc" if depth == 1 else ("fl fl-root" if depth == 0 else "fl")
        style = f"left:{left:.3f}%;width:{width:.3f}%;top:{depth * ROW_PX}px"
        if depth >= 2:
            style += f";background:{_color(node.name)}"
        parts.append(
            f'<div class="{cls}" style="{style}" title="{escape(tip)}">{escape(node.name)}</div>'
        )
    parts.append("</div>")
    return Markup("".join(parts))


def caption(data: dict[str, Any] | None) -> str:
    """One line under a graph: samples drawn, and what the sampler's cap left out."""
    if data is None:
        return ""
    shown, total = data["shown"], data["total"]
    text = f"{shown:,} samples at 49 Hz per CPU (≈ {shown / 49:,.1f} CPU-seconds)"
    if total and total > shown:
        text += f"; {100.0 * (total - shown) / total:.0f}% of the {total:,} samples were in rarer stacks the capture did not print (top 200 per 10 s)"
    return text + ". Width = share of samples; callers above callees; kernel frames orange (_[k])."


def whole_capture(store: Store) -> dict[str, Any]:
    """The Stacks section: the whole capture's graph, or why there is none; py-spy dumps."""
    data = flame_data(store)
    return {
        "html": render(data, graph_id="flame-all"),
        "caption": caption(data),
        "absent": "" if data else no_stacks_reason_any(store),
        "py": py_stacks(store),
    }


def no_stacks_reason_any(store: Store) -> str:
    if store.usable("stack_samples", "ts"):
        return "No sampled stacks with a time: the stack file printed none (see Coverage)."
    return no_stacks_reason(store)


def for_finding(store: Store, f: dict[str, Any]) -> dict[str, Any] | None:
    """The card's flame graph (CPU-related findings only): stacks inside its window."""
    if f.get("kind") not in CPU_KINDS or f.get("x0") is None:
        return None
    data = flame_data(store, f["x0"], f.get("x1"))
    if data is None:
        why = (
            "No stacks were sampled inside this window."
            if store.usable("stack_samples", "ts")
            else no_stacks_reason(store)
        )
        return {"html": Markup(""), "caption": "", "absent": why}
    return {
        "html": render(data, graph_id=f"flame-{f['finding_id']}"),
        "caption": "Stacks sampled inside this finding's window (10 s slices that overlap it). "
        + caption(data),
        "absent": "",
    }


def py_stacks(store: Store) -> list[dict[str, Any]]:
    """py-spy dumps: one row per thread (pid, snapshot, thread, state, leaf, stack)."""
    if not store.usable("py_stacks", "pid", "stack"):
        return []
    rows = store.records(
        "py_stacks",
        ["snapshot", "pid", "process", "thread", "thread_name", "state", "leaf", "stack"],
        order="pid, snapshot DESC, thread",
        limit=60,
    )
    for r in rows:
        r["frames"] = str(r["stack"] or "").split(";")[::-1][:30]
    return rows
