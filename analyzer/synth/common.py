"""Pieces every series writer shares: the sysstat banner, which samples a collector
printed (sampling gaps remove some), and the host's identity strings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import polars as pl

from analyzer.synth.model import World

KERNEL = "6.8.0-49-generic"
OS_NAME = "Ubuntu 24.04.1 LTS"
ARCH = "x86_64"


class Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


@dataclass
class Outcome:
    """How a collector ended: exit code and whether it printed its final averages."""

    rc: int = 0
    averages: bool = True


def sysstat_banner(w: World) -> str:
    """``Linux <release> (<host>) \\t<date> \\t_<arch>_\\t(<n> CPU)`` (ISO date)."""
    return f"Linux {KERNEL} ({w.spec.hostname}) \t{w.spec.start:%Y-%m-%d} \t_{ARCH}_\t({w.spec.cpus} CPU)"


def kept(w: World, collector: str, first: int = 1, step: int = 1) -> pl.DataFrame:
    """Samples ``k`` (>= first) the collector printed, with ``prev_epoch`` (the time of the
    sample before it, which sysstat prints in its headers) and ``epoch``. A collector
    running at ``step`` times the interval (``mpstat -I``) prints every step-th sample."""
    h = w.host.select("k", "epoch").filter(pl.col("k") >= first - 1)
    if step > 1:
        h = h.filter(pl.col("k") % step == 0)
    miss = pl.lit(False)
    for gs, ge in w.gaps.get(collector, []):
        miss = miss | ((pl.col("epoch") > w.t0 + gs) & (pl.col("epoch") < w.t0 + ge))
    h = h.filter(~miss)
    return h.with_columns(prev_epoch=pl.col("epoch").shift(1)).filter(pl.col("k") >= first)


def outcome(w: World, collector: str) -> Outcome:
    """A counted sysstat tool that lost samples in a gap is still running when the
    capture ends: it is stopped with SIGTERM (rc 143) before its ``Average:`` lines."""
    if w.gaps.get(collector):
        return Outcome(rc=143, averages=False)
    return Outcome()


def utc(epoch: float) -> str:
    """Epoch seconds -> ``YYYY-MM-DDTHH:MM:SSZ``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
