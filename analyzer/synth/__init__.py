"""`hindsight synth`: realistic capture bundles with injected incidents at known times.

A synthetic bundle is laid out exactly like one from ``capture/hindsight-capture.sh``
(manifest.json, capture.log, series/*.out|err|status, snap/*) and every file is in the
real tool's format (sysstat 12.6, procps-ng 4, nvidia-smi 550, bpftrace, kernel 6.8), so
it stands in for a real capture in tests, benchmarks and demos. Next to the tarball a
``<name>.ground-truth.json`` says what was injected, when, and which detector key should
(or, for negative controls, must not) report it; docs/synth.md has the schema.

Example::

    from analyzer.synth import Spec, generate, parse_incident
    spec = Spec(cpus=8, gpus=1, disks=2, seconds=600,
                incidents=[parse_incident("checkpoint_stall@60+240")])
    generate(spec, "demo.tgz")   # -> Path("demo.tgz"), plus demo.ground-truth.json

Generation is vectorized (polars) and streamed per file; the big per-CPU files are built
in chunks of samples, so memory stays bounded for 24 h captures of 128-CPU hosts.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from analyzer.synth import (
    archive,
    devices,
    incidents,
    model,
    w_dmesg,
    w_gpu_bpf,
    w_iostat,
    w_manifest,
    w_mem,
    w_mpstat,
    w_pidstat,
    w_samplers,
    w_sar,
    w_snapshots,
    w_vmstat,
)
from analyzer.synth.common import KERNEL, Outcome, utc
from analyzer.synth.incidents import KINDS
from analyzer.synth.scenarios import SCENARIOS, scenario
from analyzer.synth.spec import Incident, Spec, SpecError, parse_duration, parse_incident

__all__ = [
    "KINDS",
    "SCENARIOS",
    "Incident",
    "Spec",
    "SpecError",
    "build_world",
    "generate",
    "parse_duration",
    "parse_incident",
    "scenario",
    "truth_path",
]

SERIES = [
    ("vmstat", w_vmstat.write),
    ("iostat", w_iostat.write_text),
    ("iostat_json", w_iostat.write_json),
    ("sar", w_sar.write),
    ("pidstat", w_pidstat.write),
    ("psi", w_samplers.write_psi),
    ("cgroup", w_samplers.write_cgroup),
    ("meminfo", w_mem.write_meminfo),
    ("proc_vmstat", w_mem.write_proc_vmstat),
    ("bpf_runqlat", w_gpu_bpf.write_runqlat),
    ("bpf_biolat", w_gpu_bpf.write_biolat),
    ("nvidia_dmon", w_gpu_bpf.write_dmon),
]


def build_world(spec: Spec) -> tuple[model.World, list[dict]]:
    """The simulated host with every incident applied; returns it and the truth entries."""
    for inc in spec.incidents:
        if inc.kind not in KINDS:
            raise SpecError(f"unknown incident kind {inc.kind!r}; kinds: {', '.join(KINDS)}")
    w = model.baseline(spec)
    model.derive(w)  # a first pass gives incidents the baseline levels (busy cores)
    entries = [incidents.apply(w, inc) for inc in sorted(spec.incidents, key=lambda i: i.start_s)]
    model.derive(w)
    devices.derive_all(w)
    return w, entries


def truth_path(out: Path) -> Path:
    """``x.tgz`` -> ``x.ground-truth.json``."""
    name = out.name
    for ext in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return out.with_name(name + ".ground-truth.json")


def _ground_truth(w: model.World, entries: list[dict]) -> dict:
    s = w.spec
    return {
        "generator": "hindsight synth",
        "format_version": 1,
        "seed": s.seed,
        "host": {
            "hostname": s.hostname,
            "cpus": s.cpus,
            "gpus": s.gpus,
            "disks": s.disks,
            "nics": s.nics,
            "mem_kb": w.mem_total_kb,
            "kernel": KERNEL,
        },
        "bundle": s.bundle_name,
        "start_utc": utc(w.t0),
        "end_utc": utc(w.t0 + s.seconds),
        "interval_s": s.interval,
        "noise": s.noise,
        "incidents": [e for e in entries if e["expected_key"]],
        "negative_controls": [e for e in entries if not e["expected_key"]],
    }


def write_dir(w: model.World, root: Path) -> None:
    """Write every file of the bundle into ``root`` (the bundle's top directory)."""
    (root / "series").mkdir(parents=True)
    (root / "snap").mkdir()
    outcomes: dict[str, Outcome] = {}
    for name, fn in SERIES:
        if (name == "iostat_json" and not w.spec.iostat_json) or (
            name.startswith("bpf_") and not w.spec.bpf
        ):
            continue
        if name == "nvidia_dmon" and not w.spec.gpus:
            continue
        with open(root / "series" / f"{name}.out", "wb", buffering=1 << 20) as fh:
            outcomes[name] = fn(w, fh)
    with (
        open(root / "series" / "mpstat.out", "wb", buffering=1 << 20) as cpu_fh,
        open(root / "series" / "mpstat_irq.out", "wb", buffering=1 << 20) as irq_fh,
    ):
        outcomes["mpstat"], outcomes["mpstat_irq"] = w_mpstat.write(w, cpu_fh, irq_fh)
    with open(root / "series" / "dmesg.out", "wb") as fh:
        w_dmesg.write_series(w, fh)
    outcomes["dmesg"] = Outcome(rc=143, averages=False)
    full = w_dmesg.full_text(w)
    for phase in ("start", "end"):
        for name, text in w_snapshots.snapshots(w, phase, full).items():
            (root / "snap" / f"{name}.{phase}.out").write_text(text)
    w_manifest.write(w, root, outcomes)


def generate(spec: Spec, out: Path | str | None = None, *, keep_dir: bool = False) -> Path:
    """Generate the bundle for ``spec`` as ``out`` (default ``./<bundle name>.tgz``) and
    its ground truth beside it; returns the tarball's path. With ``keep_dir`` the bundle
    directory is left next to the tarball, as the real capture leaves it."""
    out = Path(out) if out is not None else Path.cwd() / f"{spec.bundle_name}.tgz"
    out.parent.mkdir(parents=True, exist_ok=True)
    w, entries = build_world(spec)
    from analyzer.cleanup import register_cleanup, remove

    work = register_cleanup(tempfile.mkdtemp(prefix=".synth-", dir=out.parent))
    try:
        root = work / spec.bundle_name
        write_dir(w, root)
        archive.pack(root, out, int(w.t0 + spec.seconds + 3))
        truth_path(out).write_text(json.dumps(_ground_truth(w, entries), indent=2) + "\n")
        if keep_dir:
            dest = out.parent / spec.bundle_name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.move(str(root), dest)
    finally:
        remove(work)  # also after a signal (analyzer.cleanup)
    return out
