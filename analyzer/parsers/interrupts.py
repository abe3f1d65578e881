"""``/proc/interrupts`` -> ``interrupts`` and ``/proc/softirqs`` -> ``softirqs`` (long
tables: one row per interrupt source per CPU).

Any kernel from 2.6 on: the header lists the online CPUs (``CPU0 CPU1 ... CPU127``; an
offline CPU is missing from the header, so the CPU number is taken from the header, not
from the column position). Numbered IRQ rows carry the chip (``IO-APIC``, ``PCI-MSIX-...``,
``IR-PCI-MSI``), the hardware IRQ and trigger (``5-edge``) and the device name(s); named
rows (``NMI``, ``LOC``, ``RES``...) carry a description. ``ERR``/``MIS`` have one total
(``cpu`` NULL). Counters are since boot. ``ts``/``snapshot`` as for every capture
snapshot (``interrupts.start.out``); NULL for hand-made files (noted).

Sample input (``snap/interrupts.start.out``; ``/proc/softirqs`` has the same layout)::

               CPU0       CPU1
     24:          1          0  IO-APIC   5-edge      ACPI:Ged
    NMI:          0          0   Non-maskable interrupts
    LOC:     196638     202772   Local timer interrupts
    ERR:          0
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _snap_common as snap

SOFTIRQS = "HI, TIMER, NET_TX, NET_RX, BLOCK, IRQ_POLL, TASKLET, SCHED, HRTIMER, RCU"
TABLES: dict[str, base.Table] = {
    "interrupts": base.table(
        "one row per interrupt source per CPU in a /proc/interrupts snapshot",
        *snap.SNAP_COLUMNS,
        ("irq", pl.String, "", "IRQ number or name (NMI, LOC, RES, ERR...)"),
        ("cpu", pl.Int32, "", "CPU number from the header; NULL for a total (ERR, MIS)"),
        ("count", pl.Int64, "", "interrupts since boot"),
        ("chip", pl.String, "", "interrupt controller (numbered IRQs only)"),
        ("hwirq", pl.String, "", "hardware IRQ and trigger, e.g. 5-edge (numbered IRQs only)"),
        ("name", pl.String, "", "device name(s) for numbered IRQs, else the description"),
    ),
    "softirqs": base.table(
        "one row per softirq type per CPU in a /proc/softirqs snapshot",
        *snap.SNAP_COLUMNS,
        ("softirq", pl.String, "", SOFTIRQS),
        ("cpu", pl.Int32, "", "CPU number from the header"),
        ("count", pl.Int64, "", "softirqs raised since boot"),
    ),
}

HEADER = r"^\s+CPU\d+(?:\s+CPU\d+)*\s*$"
_ROW = r"^\s*([^\s:]+):((?:\s+\d+){{1,{n}}})(?:\s+(.*?))?\s*$"
_SOFT = re.compile(r"^\s+(?:HI|TIMER|NET_TX|NET_RX|BLOCK|TASKLET|SCHED|HRTIMER|RCU):")


def _kind(head: str) -> str | None:
    lns = [ln for ln in head.splitlines()[:40] if ln.strip()]
    if not lns or not re.match(HEADER, lns[0]):
        return None
    if any(_SOFT.match(ln) for ln in lns[1:4]):
        return "softirqs"
    if any(re.match(r"^\s*(?:\d+|NMI|LOC):\s+\d", ln) for ln in lns[1:]):
        return "interrupts"
    return None


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is /proc/interrupts or /proc/softirqs."""
    return 0.95 if _kind(head) else 0.0


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse /proc/interrupts or /proc/softirqs into a long per-CPU table."""
    cov = base.Coverage()
    kind = _kind(_read.read_head(path))
    df = snap.lines(path, cov.notes)
    if kind is None:
        if snap.all_blank(cov, df):
            return base.ParseResult({}, cov)
        raise ParseError(f"{ctx.file_name or path.name}: not /proc/interrupts or /proc/softirqs")
    phase, ts = snap.snapshot_time(path, ctx, cov.notes)
    header = next(ln for ln in df["line"] if re.match(HEADER, ln))
    cpus = dict(enumerate(int(c) for c in re.findall(r"CPU(\d+)", header)))
    g = pl.col("line").str.extract_groups(_ROW.format(n=len(cpus)))
    df = df.with_columns(
        pl.when(pl.col("line").str.contains(HEADER))
        .then(pl.lit("header"))
        .otherwise(snap.verdicts(df, g.struct.field("1").is_not_null(), path))
        .alias("what"),
        g.struct.field("1").alias("irq"),
        g.struct.field("2").str.strip_chars().str.extract_all("[^ ]+").alias("count"),
        g.struct.field("3").alias("rest"),
    )
    snap.account(cov, df["what"], snap.REASONS)
    total = pl.col("irq").is_in(["ERR", "MIS"]) & (pl.col("count").list.len() == 1)
    rows = (
        df.filter(pl.col("what") == "parsed")
        .with_columns(
            total.alias("_total"), pl.int_ranges(0, pl.col("count").list.len()).alias("cpu")
        )
        .explode(["count", "cpu"])
        .with_columns(
            pl.col("count").cast(pl.Int64, strict=False),
            pl.when(~pl.col("_total"))
            .then(pl.col("cpu").replace_strict(cpus, default=None, return_dtype=pl.Int32))
            .alias("cpu"),
        )
    )
    if kind == "softirqs":
        return base.ParseResult(
            snap.conformed(TABLES, {"softirqs": rows.rename({"irq": "softirq"})}, phase, ts), cov
        )
    dev = pl.col("rest").str.extract_groups(r"^(\S+)\s+(\S+)(?:\s+(.*))?$")
    numbered = pl.col("irq").str.contains(r"^\d+$")
    rows = rows.with_columns(
        pl.when(numbered).then(dev.struct.field("1")).alias("chip"),
        pl.when(numbered).then(dev.struct.field("2")).alias("hwirq"),
        pl.when(numbered).then(dev.struct.field("3")).otherwise(pl.col("rest")).alias("name"),
    )
    return base.ParseResult(snap.conformed(TABLES, {"interrupts": rows}, phase, ts), cov)
