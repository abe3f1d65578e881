"""Benchmark inputs: capture bundles of a given length and host shape, cached on disk.

`hindsight synth` (``analyzer.synth``) is the generator of record. ``--generator scaled``
uses :mod:`tests.benchmarks.scaled` instead (the real H200 capture tiled to the shape),
a second source of realistic text for cross-checks. Bundles are cached by generator,
shape and length under the cache directory, so repeated runs reuse them.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

SIZES = {"small": 600, "1h": 3600, "6h": 6 * 3600, "24h": 86400, "72h": 3 * 86400}


@dataclass(frozen=True)
class Shape:
    """Host shape: logical CPUs, GPUs, block devices."""

    name: str
    cpus: int
    gpus: int
    disks: int


SHAPES = {"small": Shape("small", 8, 1, 2), "big": Shape("big", 128, 8, 16)}


def bundle(cache: Path, size: str, shape: Shape, generator: str = "synth") -> Path:
    """The cached ``.tgz`` for ``size`` x ``shape``, generated on first use."""
    seconds = SIZES[size]
    target = cache / f"{generator}-{shape.name}-{size}.tgz"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(".part.tgz")
    if generator == "synth":
        from analyzer.synth import Spec, generate

        generate(
            Spec(cpus=shape.cpus, gpus=shape.gpus, disks=shape.disks, seconds=seconds, seed=7),
            part,
        )
    else:
        from tests.benchmarks import scaled

        made = scaled.build(cache, seconds, scaled.Shape(shape.cpus, shape.gpus, shape.disks))
        made.replace(part)
    part.replace(target)
    truth = part.with_name(part.name.removesuffix(".tgz") + ".ground-truth.json")
    if truth.exists():  # synth writes its ground truth beside the archive
        truth.replace(target.with_name(target.name.removesuffix(".tgz") + ".ground-truth.json"))
    return target


def extract(tgz: Path, dest: Path) -> Path:
    """Unpack ``tgz`` under ``dest`` (once); returns the bundle's top directory."""
    done = dest / ".complete"
    if not done.exists():
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tgz) as tar:
            tar.extractall(dest, filter="data")
        done.write_text("ok\n")
    tops = [p for p in dest.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else dest
