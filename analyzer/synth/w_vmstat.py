"""``vmstat -t -w -n I N+1`` text (procps-ng 4.0.4): two header lines, then one row per
sample with a ``YYYY-MM-DD HH:MM:SS`` (UTC) stamp. The first row is the average since
boot (memory and r/b are current). Units: memory kB, si/so kB/s, bi/bo blocks (1 KiB)/s.

Sample::

    --procs-- -----------------------memory---------------------- ---swap-- -----io---- -system-- ----------cpu---------- -----timestamp-----
       r    b         swpd         free         buff        cache   si   so    bi    bo   in   cs  us  sy  id  wa  st  gu                 UTC
       3    0        83886     24133020       268435     28731904    0    0   412  2140 1380 3302  21   3  76   0   0   0 2026-11-29 14:00:00
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt, cpus
from analyzer.synth.common import Outcome, Sink, kept
from analyzer.synth.model import World

HEAD1 = "--procs-- -----------------------memory---------------------- ---swap-- -----io---- -system-- ----------cpu---------- -----timestamp-----"
HEAD2 = "   r    b         swpd         free         buff        cache   si   so    bi    bo   in   cs  us  sy  id  wa  st  gu                 UTC"


def frame(w: World) -> pl.DataFrame:
    """The values vmstat prints per sample (``k`` 0..N), row 0 since boot."""
    disks = w.disks.group_by("k").agg(bi=pl.col("rkb").sum(), bo=pl.col("wkb").sum())  # type: ignore[union-attr]
    c = cpus.host_cpu(w).select("k", "usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle")
    f = w.host.join(disks, on="k").join(c, on="k").sort("k")
    f = f.with_columns(
        us=(pl.col("usr") + pl.col("nice")).round(0),
        sy=(pl.col("sys") + pl.col("irq") + pl.col("soft")).round(0),
        wa=pl.col("iowait").round(0),
        st=pl.col("steal").round(0),
    ).with_columns(id=(100 - pl.col("us") - pl.col("sy") - pl.col("wa") - pl.col("st")).clip(0))
    boot = f.head(1).with_columns(
        us=pl.lit(17.0),
        sy=pl.lit(2.0),
        id=pl.lit(81.0),
        wa=pl.lit(0.0),
        st=pl.lit(0.0),
        bi=pl.col("bi") * 0.7,
        bo=pl.col("bo") * 0.6 + 900,
        intr_s=pl.col("intr_s") * 0.8,
        cs_s=pl.col("cs_s") * 0.8,
        si_kb_s=pl.lit(0.0),
        so_kb_s=pl.lit(0.0),
    )
    return pl.concat([boot, f.slice(1)], how="vertical_relaxed")


def write(w: World, sink: Sink) -> Outcome:
    f = frame(w)
    ks = kept(w, "vmstat", first=0)
    f = f.join(ks.select("k"), on="k").sort("k")
    stamp = _fmt.strftime(f["epoch"], "%Y-%m-%d %H:%M:%S")
    cols = [
        _fmt.num(f["runq"], 4, 0),
        _fmt.num(f["blocked"], 4, 0),
        _fmt.num(f["swap_used_kb"], 12, 0),
        _fmt.num(f["free_kb"], 12, 0),
        _fmt.num(f["buff_kb"], 12, 0),
        _fmt.num(f["cache_kb"] + 0.5 * f["slab_kb"], 12, 0),
        _fmt.num(f["si_kb_s"], 4, 0),
        _fmt.num(f["so_kb_s"], 4, 0),
        _fmt.num(f["bi"], 5, 0),
        _fmt.num(f["bo"], 5, 0),
        _fmt.num(f["intr_s"], 4, 0),
        _fmt.num(f["cs_s"], 4, 0),
        *[_fmt.num(f[c], 3, 0) for c in ("us", "sy", "id", "wa", "st")],
        _fmt.num(pl.Series([0.0] * f.height), 3, 0),
        stamp,
    ]
    sink.write(f"{HEAD1}\n{HEAD2}\n".encode())
    sink.write(_fmt.to_bytes(_fmt.join(cols)))
    return Outcome(rc=143 if w.gaps.get("vmstat") else 0, averages=False)
