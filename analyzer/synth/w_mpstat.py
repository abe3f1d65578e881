"""``mpstat -P ALL I N`` and ``mpstat -I SUM,SCPU -P ALL I N`` text (sysstat 12.6).

Per interval: a header stamped with the previous sample's time, the ``all`` row and one
row per CPU; ``-I SUM,SCPU`` prints an ``intr/s`` table (all + CPUs) and a per-CPU softirq
table. ``Average:`` tables close a run that completed its count. Generated in chunks of
samples (`cpus.chunk_ticks`), streamed to the sink.

Sample (8 CPUs)::

    18:45:05     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
    18:45:06     all   20.31    0.00    2.51    0.03    0.02    0.30    0.00    0.00    0.00   76.83
    18:45:06       0    0.74    0.01    0.09    0.04    0.03    1.11    0.00    0.00    0.00   97.98
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt, cpus
from analyzer.synth.common import Outcome, Sink, kept, outcome, sysstat_banner
from analyzer.synth.model import World

CPU_HDR = "     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle"
SUM_HDR = "     CPU    intr/s"
SCPU_HDR = "     CPU" + "".join(f" {s + '/s':>10}" for s in cpus.SOFTIRQS)


def _label(cpu: pl.Series) -> pl.Series:
    """CPU column: ``all`` for -1, else the number, right-aligned in 8 (a table lookup)."""
    top = int(cpu.max() or 0)  # type: ignore[arg-type]
    table = pl.Series(["     all"] + [f"{i:>8}" for i in range(top + 1)])
    return table.gather(cpu.cast(pl.Int64) + 1)


def _pct_rows(lead: pl.Series, frame: pl.DataFrame) -> pl.Series:
    vals = [_fmt.num(frame[s].cast(pl.Float64) / 100, 7) for s in cpus.SHARES]
    return _fmt.join([_fmt.join([lead, _label(frame["cpu"])], ""), *vals])


def _rate_rows(lead: pl.Series, frame: pl.DataFrame, cols: list[str], width: int) -> pl.Series:
    vals = [_fmt.num(frame[c], width) for c in cols]
    return _fmt.join([_fmt.join([lead, _label(frame["cpu"])], ""), *vals])


class _Table:
    """One output file fed chunk by chunk: its kept samples, sums for the averages."""

    def __init__(self, w: World, collector: str, sink: Sink) -> None:
        self.w, self.sink, self.out = w, sink, outcome(w, collector)
        self.ks = kept(w, collector)
        self.sums: pl.DataFrame | None = None
        self.count = 0
        sink.write(f"{sysstat_banner(w)}\n\n".encode())

    def select(self, ch: pl.DataFrame, k0: int, k1: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        sel = self.ks.filter((pl.col("k") >= k0) & (pl.col("k") < k1))
        if sel.height < k1 - k0:
            ch = ch.filter(pl.col("k").is_in(sel["k"].implode()))
        self.count += sel.height
        return ch, sel

    def add(self, part: pl.DataFrame) -> None:
        part = part.group_by("cpu").agg(pl.all().cast(pl.Float64).sum())
        self.sums = (
            part
            if self.sums is None
            else pl.concat([self.sums, part]).group_by("cpu").agg(pl.all().sum())
        )

    def averages(self) -> pl.DataFrame | None:
        if not self.out.averages or self.sums is None or not self.count:
            return None
        return self.sums.sort("cpu").with_columns((pl.exclude("cpu") / self.count).fill_null(0.0))


def _cpu_chunk(t: _Table, ch: pl.DataFrame, sel: pl.DataFrame) -> None:
    c = t.w.spec.cpus
    alls = cpus.all_rows(ch).with_columns(cpu=pl.lit(-1, pl.Int32))
    time, head = _fmt.hms(sel["epoch"]), _fmt.hms(sel["prev_epoch"])
    rows = _pct_rows(time.gather(pl.int_range(0, ch.height, eager=True) // c), ch)
    heads = _fmt.join([head, CPU_HDR], "")
    t.sink.write(_fmt.to_bytes(_fmt.blocks(rows, c, [heads, _pct_rows(time, alls)])))
    t.add(pl.concat([alls.select("cpu", *cpus.SHARES), ch.select("cpu", *cpus.SHARES)]))


def _irq_chunk(t: _Table, ch: pl.DataFrame, sel: pl.DataFrame) -> None:
    c, iv = t.w.spec.cpus, float(t.w.interval)
    alls = cpus.all_rows(ch).select(
        "k", pl.lit(-1, pl.Int32).alias("cpu"), ((pl.col("intr") * iv).round(0) / iv).alias("intr")
    )
    time, head = _fmt.hms(sel["epoch"]), _fmt.hms(sel["prev_epoch"])
    lead = time.gather(pl.int_range(0, ch.height, eager=True) // c)
    sum_block = _fmt.blocks(
        _rate_rows(lead, ch, ["intr"], 9),
        c,
        [_fmt.join([head, SUM_HDR], ""), _rate_rows(time, alls, ["intr"], 9)],
    )
    scpu_block = _fmt.blocks(
        _rate_rows(lead, ch, cpus.SOFTIRQS, 10), c, [_fmt.join([head, SCPU_HDR], "")]
    )
    # per sample: the intr/s block (c + 3 lines), then the softirq block (c + 2 lines)
    per, nb = c + 3, sel.height
    r = pl.DataFrame({"r": pl.int_range(0, nb * (2 * c + 5), eager=True)})
    blk, j = pl.col("r") // (2 * c + 5), pl.col("r") % (2 * c + 5)
    idx = pl.when(j < per).then(blk * per + j).otherwise(nb * per + blk * (c + 2) + j - per)
    t.sink.write(
        _fmt.to_bytes(pl.concat([sum_block, scpu_block]).gather(r.select(idx).to_series()))
    )
    t.add(
        pl.concat(
            [alls.select("cpu", "intr"), ch.select("cpu", "intr")], how="vertical_relaxed"
        ).join(ch.group_by("cpu").agg(pl.col(cpus.SOFTIRQS).sum()), on="cpu", how="left")
    )


def write(w: World, cpu_sink: Sink, irq_sink: Sink) -> tuple[Outcome, Outcome]:
    """``mpstat -P ALL`` into ``cpu_sink`` and ``mpstat -I SUM,SCPU -P ALL`` into
    ``irq_sink``, from one pass over the per-CPU chunks."""
    tc, ti = _Table(w, "mpstat", cpu_sink), _Table(w, "mpstat_irq", irq_sink)
    step = cpus.chunk_ticks(w)
    for k0 in range(1, w.n + 1, step):
        k1 = min(k0 + step, w.n + 1)
        ch = cpus.cpu_chunk(w, k0, k1)
        for t, fn in ((tc, _cpu_chunk), (ti, _irq_chunk)):
            part, sel = t.select(ch, k0, k1)
            if sel.height:
                fn(t, part, sel)
    avg = tc.averages()
    if avg is not None:
        lines = _pct_rows(pl.Series(["Average:"] * avg.height), avg)
        cpu_sink.write(_fmt.to_bytes(pl.concat([pl.Series(["Average:" + CPU_HDR]), lines])))
    avg = ti.averages()
    if avg is not None:
        lead = pl.Series(["Average:"] * avg.height)
        per_cpu = avg.filter(pl.col("cpu") >= 0)
        s2 = _rate_rows(lead.head(per_cpu.height), per_cpu, cpus.SOFTIRQS, 10)
        lines = [
            pl.Series(["Average:" + SUM_HDR]),
            _rate_rows(lead, avg, ["intr"], 9),
            pl.Series(["", "Average:" + SCPU_HDR]),
            s2,
        ]
        irq_sink.write(_fmt.to_bytes(pl.concat(lines)))
    return tc.out, ti.out
