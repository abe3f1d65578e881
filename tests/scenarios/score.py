"""Scenario suite: synthetic bundles with known incidents, analysed, scored per detector.

Usage (prints the per-detector table that docs/detectors.md records)::

    .venv/bin/python tests/scenarios/score.py                # the full suite
    .venv/bin/python tests/scenarios/score.py --tier ci      # the subset pytest runs
    .venv/bin/python tests/scenarios/score.py --json out.json -v   # + every case's findings
    .venv/bin/python tests/scenarios/score.py --commands            # the hindsight synth commands

Each case is a `hindsight synth` spec (`analyzer.synth`): one or more incidents, their
negative controls (the same disturbance kept just below the detectors' thresholds),
several seeds, host shapes and noise levels, overlapping incidents, and quiet captures.
The bundle directory is written by the synth writers and analysed by the real pipeline
(parse → DuckDB → signals → detectors → correlate).

Matching (per detector key): a truth window is an incident's window, each event of a
multi-event incident (every checkpoint burst), or the second of a point event (the OOM
kill, the Xid line). A finding matches a truth of the same key
when their windows have IoU ≥ 0.5; matching is one-to-one, best IoU first. Unmatched
findings are false positives, except findings of a key the overlapping incident lists in
``may_also`` (a GPU dip during a write burst is a real effect, neither right nor wrong).
Precision = TP / (TP + FP), recall = TP / (TP + FN). A *quiet* case (no incident, or
negative controls only) must give no finding above ``info``, and no negative control may
overlap a finding of the key it must not trigger.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

IOU_MIN = 0.5
CAUSES = {"cpu_data_loader": "cpu_loader"}  # truth "cause" -> GPU_STARVATION impact cause
POINT_EVENTS = {"OOM_KILL": "kill_utc", "GPU_XID": "start_utc"}  # key -> truth field of its time
TARGET = 0.9
# host shapes: (cpus, gpus, disks, nics)
SHAPES = {"small": (4, 1, 1, 1), "std": (8, 2, 2, 1), "big": (32, 8, 4, 2)}
KINDS = (
    "checkpoint_stall",
    "cpu_throttle",
    "oom_kill",
    "memory_pressure",
    "cpu_contention",
    "io_saturation",
    "gpu_starvation",
    "gpu_throttle",
    "gpu_xid",
    "hung_task",
    "irq_hotspot",
    "net_errors",
    "swap_activity",
    "sampling_gap",
)
# overlapping incidents: (name, [(kind, start_s, dur_s), ...]) on a 600 s capture
OVERLAPS = {
    "throttle+checkpoint": [("checkpoint_stall", 60, 240), ("cpu_throttle", 170, 90)],
    "pressure+swap": [("memory_pressure", 120, 120), ("swap_activity", 150, 60)],
    "irq+net": [("irq_hotspot", 200, 60), ("net_errors", 210, 60)],
    # adjacent, not overlapping: synth keeps a capped GPU ~97 % busy whatever the load
    "gpu_cap+loader": [("gpu_throttle", 150, 90), ("gpu_starvation", 240, 60)],
    "hung+io": [("hung_task", 100, 130), ("io_saturation", 150, 60)],
    "contention+gap": [("cpu_contention", 300, 90), ("sampling_gap", 340, 30)],
    "xid+oom": [("gpu_xid", 120, 60), ("oom_kill", 300, 90)],
}


# negative controls just below each threshold the synth parameters can reach (the
# disturbance's own jitter included): (kind, start_s, dur_s, params); the synth's built-in
# controls (a 30 % GPU dip, a 60 s hung task...) cover the rest. Not cpu_throttle: one 1 s
# sample of a 100 ms-period cgroup counts 10 periods, so its share moves in 10 % steps and
# "just below 10 %" is 0 % (the synth's 4 % control).
NEAR = {
    "near-a": [
        ("checkpoint_stall", 40, 200, {"size_gb": 0.28}),  # 37 MB/s peak ≤ 42 < 50 MB/s
        ("memory_pressure", 300, 90, {"psi_some": 0.07, "direct_per_s": 700}),  # < 10 %, < 1000/s
        ("net_errors", 450, 60, {"drops_per_s": 6, "errors_per_s": 0}),  # ≤ 8.25/s < 10/s
    ],
    "near-b": [
        ("gpu_throttle", 220, 90, {"clock_frac": 0.93}),  # clock ≥ 86 % > 85 % of normal
        ("swap_activity", 400, 60, {"si_kb_s": 350, "so_kb_s": 350}),  # ≤ 962 kB/s < 1 MiB/s
    ],
}


@dataclass
class Case:
    """One synthetic capture: name, host shape, seed, noise, incidents and near-threshold
    negative controls (generated as incidents of reduced size, scored as controls)."""

    name: str
    shape: str
    seed: int
    incidents: list[tuple[str, float, float, bool]]  # kind, start_s, dur_s, control
    seconds: int = 600
    noise: float = 1.0
    quiet: bool = False
    near: list[tuple[str, float, float, dict[str, Any]]] = field(default_factory=list)


def suite(tier: str = "full") -> list[Case]:
    """The cases of a tier: ``ci`` (what pytest runs) or ``full`` (the documented figures).

    ``full``: every incident kind (with its negative control) on all three host shapes,
    two seeds each at noise 1, plus one at noise 2; every overlap pair on two shapes;
    quiet captures on every shape; the near-threshold controls on every shape, two seeds.
    ``ci``: every kind once (shapes and seeds rotate), every overlap pair once, two quiet
    captures, the near-threshold controls once.
    """
    from analyzer.synth import scenario

    cases: list[Case] = []
    shapes = list(SHAPES)

    def single(kind: str, shape: str, seed: int, noise: float = 1.0) -> Case:
        incs = [(i.kind, i.start_s, i.dur_s, i.control) for i in scenario(kind, 600)]
        return Case(f"{kind}/{shape}/s{seed}/n{noise:g}", shape, seed, incs, noise=noise)

    if tier == "ci":
        for i, kind in enumerate(KINDS):
            cases.append(single(kind, shapes[i % 3], 100 + i))
        for i, (name, incs) in enumerate(OVERLAPS.items()):
            shape = shapes[(i + 1) % 3]
            cases.append(
                Case(f"{name}/{shape}/s{200 + i}", shape, 200 + i, [(*x, False) for x in incs])
            )
        cases += [
            Case("quiet/std/s7", "std", 7, [], quiet=True),
            Case("quiet/big/s8/n2", "big", 8, [], noise=2.0, quiet=True),
            Case("near-a/small/s9", "small", 9, [], near=NEAR["near-a"]),
            Case("near-b/big/s10", "big", 10, [], near=NEAR["near-b"]),
        ]
        return cases
    if tier != "full":
        raise ValueError(f"unknown tier {tier!r} (ci or full)")
    for i, kind in enumerate(KINDS):
        for j, shape in enumerate(shapes):
            for seed in (1 + 10 * i + j, 501 + 10 * i + j):
                cases.append(single(kind, shape, seed))
        cases.append(single(kind, shapes[i % 3], 901 + i, noise=2.0))
    for i, (name, incs) in enumerate(OVERLAPS.items()):
        for shape in (shapes[i % 3], shapes[(i + 1) % 3]):
            seed = 300 + 10 * i + shapes.index(shape)
            cases.append(Case(f"{name}/{shape}/s{seed}", shape, seed, [(*x, False) for x in incs]))
    for j, shape in enumerate(shapes):
        cases.append(Case(f"quiet/{shape}/s{40 + j}", shape, 40 + j, [], quiet=True))
        cases.append(Case(f"quiet/{shape}/s{50 + j}/n2", shape, 50 + j, [], noise=2.0, quiet=True))
        for name, near in NEAR.items():
            for seed in (60 + 10 * j, 61 + 10 * j):
                cases.append(Case(f"{name}/{shape}/s{seed}", shape, seed, [], near=near))
    return cases


def _spec(case: Case) -> Any:
    from analyzer.synth import Incident, Spec

    cpus, gpus, disks, nics = SHAPES[case.shape]
    incs = [Incident(k, float(s), float(d), {}, c) for k, s, d, c in case.incidents]
    incs += [Incident(k, float(s), float(d), dict(p), False) for k, s, d, p in case.near]
    return Spec(
        cpus=cpus,
        gpus=gpus,
        disks=disks,
        nics=nics,
        seconds=case.seconds,
        seed=case.seed,
        noise=case.noise,
        incidents=incs,
        hostname=f"scn{case.seed}",
    )


def synth_args(case: Case, out: str) -> list[str]:
    """The ``hindsight synth`` command line that writes the same bundle as ``case``."""
    cpus, gpus, disks, nics = SHAPES[case.shape]
    args = ["hindsight", "synth", out, "--cpus", str(cpus), "--gpus", str(gpus)]
    args += ["--disks", str(disks), "--nics", str(nics), "--seconds", str(case.seconds)]
    args += [
        "--seed",
        str(case.seed),
        "--noise",
        f"{case.noise:g}",
        "--hostname",
        f"scn{case.seed}",
    ]
    for k, st, d, control in case.incidents:
        args += ["--control" if control else "--incident", f"{k}@{st:g}+{d:g}"]
    for k, st, d, p in case.near:
        opts = ",".join(f"{key}={v}" for key, v in p.items())
        args += ["--incident", f"{k}@{st:g}+{d:g}" + (f":{opts}" if opts else "")]
    return args


def run_case(case: Case, workdir: str | None = None) -> dict[str, Any]:
    """Generate ``case`` with the synth writers, analyse it, return truth and findings."""
    from analyzer import pipeline
    from analyzer.synth import _ground_truth, build_world, write_dir

    t0 = time.perf_counter()
    spec = _spec(case)
    tmp = Path(tempfile.mkdtemp(prefix="scn-", dir=workdir))
    try:
        world, entries = build_world(spec)
        root = tmp / spec.bundle_name
        write_dir(world, root)
        truth = _near_as_controls(_ground_truth(world, entries), case)
        t1 = time.perf_counter()
        res = pipeline.run(root, pipeline.Options())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    findings = [
        {
            "key": f["key"],
            "severity": f["severity"],
            "start": _epoch(f["start"]),
            "end": _epoch(f["end"]),
            "cause": (f.get("impact") or {}).get("cause"),
            "title": f["title"],
        }
        for f in res.findings
    ]
    return {
        "case": case.name,
        "quiet": case.quiet,
        "truth": truth["incidents"],
        "controls": truth["negative_controls"],
        "findings": findings,
        "generate_s": round(t1 - t0, 2),
        "analyse_s": round(time.perf_counter() - t1, 2),
    }


def _near_as_controls(truth: dict[str, Any], case: Case) -> dict[str, Any]:
    """Move the near-threshold incidents from ``incidents`` to ``negative_controls``."""
    near = {(k, float(s)) for k, s, _, _ in case.near}
    keep, moved = [], []
    for e in truth["incidents"]:
        if (e["kind"], float(e["start_s"])) in near:
            moved.append(e | {"expected_key": None, "must_not_key": e["expected_key"]})
        else:
            keep.append(e)
    return truth | {"incidents": keep, "negative_controls": truth["negative_controls"] + moved}


def _epoch(v: Any) -> float:
    if isinstance(v, datetime):
        return v.timestamp()
    return datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()


def _iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def truth_windows(entry: dict[str, Any]) -> list[tuple[float, float]]:
    """The windows a detector must report for one ground-truth incident: each event of a
    multi-event incident, the second of a point event (an OOM kill at ``kill_utc``, an Xid
    logged in the incident's first second), else the incident window."""
    events = entry.get("events") or []
    if events:
        return [(_epoch(e["start_utc"]), _epoch(e["end_utc"])) for e in events]
    if entry["expected_key"] in POINT_EVENTS:
        t = _epoch(entry.get(POINT_EVENTS[entry["expected_key"]]) or entry["start_utc"])
        return [(t, t + 1.0)]
    return [(_epoch(entry["start_utc"]), _epoch(entry["end_utc"]))]


def score_case(result: dict[str, Any]) -> dict[str, Any]:
    """Per key TP/FP/FN for one case, plus the unmatched findings and truths."""
    per: dict[str, dict[str, int]] = {}
    misses: list[str] = []
    extras: list[str] = []

    ious: dict[str, list[float]] = {}

    def bump(key: str, what: str) -> None:
        per.setdefault(key, {"tp": 0, "fp": 0, "fn": 0})[what] += 1

    truths = [
        (e["expected_key"], w, e) for e in result["truth"] for w in truth_windows(e)
    ]  # (key, window, entry)
    found = result["findings"]
    pairs = sorted(
        (
            (_iou((f["start"], f["end"]), w), i, j)
            for i, f in enumerate(found)
            for j, (key, w, _) in enumerate(truths)
            if f["key"] == key
        ),
        reverse=True,
    )
    used_f: set[int] = set()
    used_t: set[int] = set()
    causes = {"right": 0, "wrong": 0}
    for iou, i, j in pairs:
        if iou < IOU_MIN or i in used_f or j in used_t:
            continue
        used_f.add(i)
        used_t.add(j)
        bump(truths[j][0], "tp")
        ious.setdefault(truths[j][0], []).append(iou)
        want = CAUSES.get(truths[j][2].get("cause"))
        if want:
            ok = found[i]["cause"] == want
            causes["right" if ok else "wrong"] += 1
            if not ok:
                misses.append(f"{truths[j][0]} cause {found[i]['cause']} (want {want})")
    for j, (key, w, _) in enumerate(truths):
        if j not in used_t:
            bump(key, "fn")
            misses.append(f"{key} {_hms(w[0])}–{_hms(w[1])}")
    for i, f in enumerate(found):
        if i in used_f:
            continue
        span = (f["start"], f["end"])
        tolerated = any(
            f["key"] in e.get("may_also", []) and _iou(span, (w[0] - 5, w[1] + 5)) > 0
            for e in result["truth"] + result["controls"]
            for w in [(_epoch(e["start_utc"]), _epoch(e["end_utc"]))]
        )
        if tolerated:
            continue
        bump(f["key"], "fp")
        extras.append(f"{f['key']} {f['severity']} {_hms(f['start'])}–{_hms(f['end'])}")
    loud = [
        f"{f['key']} {f['severity']} {_hms(f['start'])}–{_hms(f['end'])}"
        for f in found
        if result["quiet"] and f["severity"] != "info"
    ]
    for c in result.get("controls", []):  # the disturbance kept below threshold: no finding
        w = (_epoch(c["start_utc"]), _epoch(c["end_utc"]))
        loud += [
            f"control {c['kind']}: {f['key']} {f['severity']} {_hms(f['start'])}–{_hms(f['end'])}"
            for f in found
            if f["key"] == c.get("must_not_key")
            and f["severity"] != "info"
            and _iou((f["start"], f["end"]), w) > 0
        ]
    return {
        "per_key": per,
        "misses": misses,
        "extras": extras,
        "quiet_violations": loud,
        "causes": causes,
        "ious": ious,
    }


def _hms(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S") if t else "?"


def score(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals per key over all cases: tp, fp, fn, precision, recall; quiet violations."""
    total: dict[str, dict[str, float]] = {}
    problems: list[str] = []
    quiet: list[str] = []
    causes = {"right": 0, "wrong": 0}
    ious: dict[str, list[float]] = {}
    controls = quiet_cases = 0
    for res in results:
        s = score_case(res)
        for k in causes:
            causes[k] += s["causes"][k]
        for k, v in s["ious"].items():
            ious.setdefault(k, []).extend(v)
        controls += len(res["controls"])
        quiet_cases += bool(res["quiet"])
        for key, c in s["per_key"].items():
            t = total.setdefault(key, {"tp": 0, "fp": 0, "fn": 0})
            for k in ("tp", "fp", "fn"):
                t[k] += c[k]
        problems += [f"{res['case']}: missed {m}" for m in s["misses"]]
        problems += [f"{res['case']}: extra {x}" for x in s["extras"]]
        quiet += [f"{res['case']}: {x}" for x in s["quiet_violations"]]
    for key, t in total.items():
        t["precision"] = t["tp"] / (t["tp"] + t["fp"]) if t["tp"] + t["fp"] else 1.0
        t["recall"] = t["tp"] / (t["tp"] + t["fn"]) if t["tp"] + t["fn"] else 1.0
        t["mean_iou"] = sum(ious[key]) / len(ious[key]) if ious.get(key) else 0.0
    return {
        "per_key": dict(sorted(total.items())),
        "problems": problems,
        "quiet": quiet,
        "causes": causes,
        "counts": {"cases": len(results), "controls": controls, "quiet_cases": quiet_cases},
    }


def run_suite(cases: list[Case], jobs: int | None = None) -> list[dict[str, Any]]:
    """Run every case (in ``jobs`` processes; spawn, so polars' threads are safe)."""
    jobs = jobs or min(len(cases), os.cpu_count() or 1)
    if jobs <= 1:
        return [run_case(c) for c in cases]
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        return list(pool.map(run_case, cases))


def table(scored: dict[str, Any]) -> str:
    """The Markdown table of docs/detectors.md."""
    lines = [
        "| detector key | truths | TP | FP | FN | precision | recall | mean IoU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, t in scored["per_key"].items():
        n = int(t["tp"] + t["fn"])
        lines.append(
            f"| `{key}` | {n} | {int(t['tp'])} | {int(t['fp'])} | {int(t['fn'])} | {t['precision']:.2f} | {t['recall']:.2f} | {t['mean_iou']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", default="full", choices=("ci", "full"))
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: CPUs)")
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ap.add_argument("--json", type=Path, help="write every case's truth and findings here")
    ap.add_argument("-v", "--verbose", action="store_true", help="list misses and extras")
    ap.add_argument(
        "--commands",
        action="store_true",
        help="print each case's hindsight synth command, run none",
    )
    args = ap.parse_args(argv)
    cases = [c for c in suite(args.tier) if args.only in c.name]
    if args.commands:
        for c in cases:
            print(shlex.join(synth_args(c, f"{c.name.replace('/', '_')}.tgz")))
        return 0
    t0 = time.perf_counter()
    results = run_suite(cases, args.jobs)
    scored = score(results)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "score": scored}, indent=1))
    print(f"{len(cases)} cases ({args.tier}) in {time.perf_counter() - t0:.0f} s")
    print(table(scored))
    c, n = scored["causes"], scored["counts"]
    print(
        f"GPU_STARVATION cause right for {c['right']} of {c['right'] + c['wrong']} matched loader dips"
    )
    print(
        f"{n['controls']} negative controls and {n['quiet_cases']} quiet captures: "
        f"{len(scored['quiet'])} findings above info"
    )
    if args.verbose:
        for p in scored["problems"]:
            print("  ", p)
    for q in scored["quiet"]:
        print("  quiet capture or negative control with a finding above info:", q)
    bad = [
        k for k, t in scored["per_key"].items() if t["precision"] < TARGET or t["recall"] < TARGET
    ]
    if bad or scored["quiet"] or scored["causes"]["wrong"]:
        print(f"below target ({TARGET}): {', '.join(bad) or '-'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
