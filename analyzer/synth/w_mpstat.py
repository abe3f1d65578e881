"""``mpstat -P ALL I N`` and ``mpstat -I SUM,SCPU -P ALL J M`` text (sysstat 12.6).

Per interval: a header stamped with the previous sample's time, the ``all`` row and one
row per CPU; ``-I SUM,SCPU`` prints an ``intr/s`` table (all + CPUs) and a per-CPU softirq
table. The capture runs ``-I`` every ``J = spec.irq_interval_s`` seconds (a multiple of
the interval): each of its reports gives, per CPU, the mean rate over every second since
the report before it (what mpstat's counter deltas measure), so an interrupt storm shows
in it even when it lasts less than ``J``. ``Average:`` tables close a run that completed
its count. Generated in chunks of samples (`cpus.chunk_ticks`), streamed to the sink.

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

    def __init__(self, w: World, collector: str, sink: Sink, step: int = 1) -> None:
        self.w, self.sink, self.out = w, sink, outcome(w, collector)
        self.ks = kept(w, collector, step=step)
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


class _IrqReports:
    """Sums the per-second interrupt rates of each CPU into the reports of ``mpstat -I``:
    the report printed at sample K covers the samples after the previous report it printed
    up to K (a sampling gap widens it), and gives their mean rate."""

    RATES = ("intr", *cpus.SOFTIRQS)

    def __init__(self, w: World, ks: pl.DataFrame) -> None:
        reports = ks.select(pl.col("k").cast(pl.Int64).alias("K")).sort("K")
        every = pl.DataFrame({"k": pl.int_range(1, w.n + 1, dtype=pl.Int64, eager=True)})
        self.cover = every.join_asof(
            reports.with_columns(k=pl.col("K")), on="k", strategy="forward"
        ).drop_nulls("K")
        self.carry: pl.DataFrame | None = None
        self.iv = float(w.interval)

    def feed(self, ch: pl.DataFrame, k1: int) -> pl.DataFrame:
        """Add the rows of samples ``< k1``; return the reports they complete: ``k`` (=K),
        ``cpu``, the mean rates and ``span_s`` (seconds covered), CPUs of a report together."""
        part = ch.select(pl.col("k").cast(pl.Int64), "cpu", *self.RATES).join(self.cover, on="k")
        part = part.group_by("K", "cpu").agg(pl.col(list(self.RATES)).sum(), n=pl.len())
        if self.carry is not None:
            part = (
                pl.concat([self.carry, part])
                .group_by("K", "cpu")
                .agg(pl.col(list(self.RATES)).sum(), pl.col("n").sum())
            )
        self.carry = part.filter(pl.col("K") >= k1)
        return (
            part.filter(pl.col("K") < k1)
            .sort("K", "cpu")
            .select(
                pl.col("K").alias("k"),
                "cpu",
                *[(pl.col(r) / pl.col("n")).alias(r) for r in self.RATES],
                span_s=pl.col("n") * self.iv,
            )
        )


def _irq_chunk(t: _Table, ch: pl.DataFrame, sel: pl.DataFrame) -> None:
    """One chunk of ``-I SUM,SCPU`` reports from `_IrqReports.feed` rows."""
    c = t.w.spec.cpus
    span = pl.col("span_s")
    alls = ch.group_by("k", maintain_order=True).agg(
        (pl.col("intr").sum() * 1.02).alias("intr"), span.first()
    )  # /proc/stat's total counts a little more than the per-CPU sums; whole counts
    alls = alls.select(
        "k",
        pl.lit(-1, pl.Int32).alias("cpu"),
        ((pl.col("intr") * span).round(0) / span).alias("intr"),
    )
    ch = ch.drop("span_s")
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
    tc = _Table(w, "mpstat", cpu_sink)
    ti = _Table(w, "mpstat_irq", irq_sink, step=w.spec.irq_interval_s // w.interval)
    reports = _IrqReports(w, ti.ks)
    step = cpus.chunk_ticks(w)
    for k0 in range(1, w.n + 1, step):
        k1 = min(k0 + step, w.n + 1)
        ch = cpus.cpu_chunk(w, k0, k1)
        part, sel = tc.select(ch, k0, k1)
        if sel.height:
            _cpu_chunk(tc, part, sel)
        done = reports.feed(ch, k1)
        sel = ti.ks.filter((pl.col("k") >= k0) & (pl.col("k") < k1))
        if sel.height:
            ti.count += sel.height
            _irq_chunk(ti, done, sel)
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
