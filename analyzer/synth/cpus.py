"""Per-CPU time shares and interrupt rates, generated one chunk of samples at a time.

`cpu_chunk` returns one row per (sample, CPU) for samples ``k0..k1-1``, block-major (all
CPUs of a sample together): ``k``, ``cpu`` and the shares ``usr nice sys iowait irq soft
steal guest gnice idle`` in hundredths of a percent (integers summing to 10000, like
sysstat's two-decimal output), plus ``intr`` (interrupts/s) and the softirq rates
``HI TIMER NET_TX NET_RX BLOCK IRQ_POLL TASKLET SCHED HRTIMER RCU`` (1/s). `all_rows`
averages a chunk over CPUs exactly as ``mpstat``'s ``all`` line does (the mean of the
CPUs), and `host_cpu` gives the host-wide shares from the drivers for vmstat/iostat/sar.
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.model import World

SHARES = ["usr", "nice", "sys", "iowait", "irq", "soft", "steal", "guest", "gnice", "idle"]
SOFTIRQS = [
    "HI",
    "TIMER",
    "NET_TX",
    "NET_RX",
    "BLOCK",
    "IRQ_POLL",
    "TASKLET",
    "SCHED",
    "HRTIMER",
    "RCU",
]
SYS_SHARE = 0.11
CHUNK_ROWS = 400_000


def chunk_ticks(w: World) -> int:
    """Samples per chunk so that a chunk has about CHUNK_ROWS per-CPU rows."""
    return max(1, CHUNK_ROWS // (w.spec.cpus + 1))


def cpu_chunk(w: World, k0: int, k1: int) -> pl.DataFrame:
    """Per-CPU rows for samples k0..k1-1 (see module docstring)."""
    c = w.spec.cpus
    b = k1 - k0
    role_code = {"trainer": 0, "loader": 1, "other": 2}
    roles = pl.Series("role", [role_code[r] for r in w.roles], dtype=pl.Int32)
    host = w.host.slice(k0, b)
    seed, tag = w.spec.seed, f"{k0}"
    frame = pl.DataFrame(
        {
            "i": pl.int_range(0, b * c, dtype=pl.Int64, eager=True),
            "z": _fmt.normal(b * c, seed, "cpu/" + tag) * w.spec.noise,
            "u": _fmt.uniform(b * c, seed, "cpu-u/" + tag),
            "zi": _fmt.normal(b * c, seed, "intr/" + tag) * w.spec.noise,
        }
    ).with_columns(tick=pl.col("i") // c, cpu=(pl.col("i") % c).cast(pl.Int32))
    cols = ["k", "lvl_trainer", "lvl_loader", "lvl_other", "peg_cpu", "peg_pct", "hot_cpu"]
    cols += ["hot_irq", "hot_soft", "iowait", "net_rx_mult"]
    picked = host.select(pl.col(cols).gather(frame["tick"]))
    f = pl.concat([frame, picked], how="horizontal")
    f = f.with_columns(role=roles.gather(f["cpu"])).lazy()
    level = (
        pl.when(pl.col("role") == 0)
        .then(pl.col("lvl_trainer"))
        .when(pl.col("role") == 1)
        .then(pl.col("lvl_loader"))
        .otherwise(pl.col("lvl_other"))
    )
    spread = pl.when(pl.col("role") == 2).then(1.2).otherwise(3.5)
    busy = (level + pl.col("z") * spread).clip(0.0, 100.0)
    busy = pl.when(pl.col("cpu") == pl.col("peg_cpu")).then(pl.col("peg_pct")).otherwise(busy)
    hot = pl.col("cpu") == pl.col("hot_cpu")
    f = f.with_columns(busy=busy.clip(0.0, 100.0), hot=hot)
    base_soft = pl.when(pl.col("cpu") == 0).then(1.2).otherwise(0.15) * pl.col("net_rx_mult")
    f = f.with_columns(
        irq=pl.when(pl.col("hot")).then(pl.col("hot_irq")).otherwise(0.02 + 0.02 * pl.col("u")),
        soft=pl.when(pl.col("hot"))
        .then(pl.col("hot_soft"))
        .otherwise(base_soft * (0.6 + 0.8 * pl.col("u"))),
        nice=0.01 * (pl.col("u") > 0.93).cast(pl.Float64),
    )
    f = f.with_columns(
        busy=pl.when(pl.col("hot"))
        .then((pl.col("busy") * 0.02).clip(0.0, 2.0))
        .otherwise(pl.col("busy").clip(0.0, 100.0 - pl.col("irq") - pl.col("soft")))
    )
    f = f.with_columns(
        usr=pl.col("busy") * (1 - SYS_SHARE),
        sys=pl.col("busy") * SYS_SHARE,
        iowait=(100.0 - pl.col("busy") - pl.col("irq") - pl.col("soft")).clip(0.0)
        * pl.col("iowait")
        / 100.0,
    )
    # sysstat works in clock ticks (USER_HZ=100): a CPU has ~100 ticks per second, so its
    # shares are multiples of 1/T; the ``all`` line divides summed ticks by summed T.
    jitter = (_fmt.uniform(b * c, seed, "ticks/" + tag) * 9 - 1).floor().clip(-1, 7)
    f = f.with_columns(T=(100 * w.interval + pl.lit(jitter)).cast(pl.Int64))
    parts = ["usr", "nice", "sys", "iowait", "irq", "soft"]
    f = f.with_columns(
        [(pl.col(x) / 100 * pl.col("T")).round(0).cast(pl.Int64).alias(f"t_{x}") for x in parts]
    )
    f = f.with_columns(t_idle=(pl.col("T") - pl.sum_horizontal([f"t_{x}" for x in parts])).clip(0))
    f = f.with_columns(
        [
            (pl.col(f"t_{x}") * 10000 / pl.col("T")).round(0).cast(pl.Int64).alias(x)
            for x in [*parts, "idle"]
        ]
        + [pl.lit(0, pl.Int64).alias(x) for x in ("steal", "guest", "gnice")]
    )
    ticks = ["T", *[f"t_{x}" for x in [*parts, "idle"]]]
    out = f.with_columns(_interrupts(w)).select("k", "cpu", *SHARES, *ticks, "intr", *SOFTIRQS)
    return out.collect()


def _interrupts(w: World) -> list[pl.Expr]:
    """Interrupt and softirq rates per CPU (1/s): timer ticks on busy CPUs, NET_RX on the
    IRQ CPU (and hugely on a hot one), BLOCK completions, SCHED/RCU housekeeping."""
    iv = float(w.interval)
    jit = 1 + 0.15 * pl.col("zi").clip(-3.0, 3.0)
    hot = pl.col("hot")
    q = lambda e: (e * iv).round(0).clip(0) / iv  # noqa: E731 - whole counts per interval
    net_rx = (
        pl.when(hot)
        .then(55_000.0 * jit)
        .otherwise(
            pl.when(pl.col("cpu") == 0).then(900.0).otherwise(25.0) * pl.col("net_rx_mult") * jit
        )
    )
    timer = (4.0 + 2.46 * pl.col("busy")) * jit
    sched = (20.0 + 1.6 * pl.col("busy")) * jit
    rcu = (30.0 + 0.9 * pl.col("busy")) * jit
    block = pl.when(pl.col("role") == 1).then(40.0 * jit).otherwise(2.0 * pl.col("u"))
    return [
        pl.lit(0.0).alias("HI"),
        q(timer).alias("TIMER"),
        q(pl.col("u") * 3).alias("NET_TX"),
        q(net_rx).alias("NET_RX"),
        q(block).alias("BLOCK"),
        pl.lit(0.0).alias("IRQ_POLL"),
        q((pl.col("u") > 0.9).cast(pl.Float64)).alias("TASKLET"),
        q(sched).alias("SCHED"),
        q(pl.col("u") * 1.5).alias("HRTIMER"),
        q(rcu).alias("RCU"),
        q(timer + 30.0 * jit + pl.when(hot).then(48_000.0 * jit).otherwise(0.0)).alias("intr"),
    ]


def all_rows(chunk: pl.DataFrame) -> pl.DataFrame:
    """The ``all`` line of each sample: summed ticks over summed ticks, like mpstat."""
    ticks = [c for c in chunk.columns if c.startswith("t_")]
    a = chunk.group_by("k", maintain_order=True).agg(
        pl.col(["T", *ticks]).sum(), pl.col("intr").sum() * 1.02
    )
    shares = [(pl.col(t) * 10000 / pl.col("T")).round(0).cast(pl.Int64).alias(t[2:]) for t in ticks]
    zero = [pl.lit(0, pl.Int64).alias(x) for x in ("steal", "guest", "gnice")]
    return a.with_columns(shares + zero)


def host_cpu(w: World) -> pl.DataFrame:
    """Host-wide shares per sample (%, floats): usr nice sys iowait irq soft steal idle."""
    h = w.host
    counts = {r: w.roles.count(r) for r in ("trainer", "loader", "other")}
    c = w.spec.cpus
    busy = sum(pl.col(f"lvl_{r}").clip(0.0, 100.0) * n for r, n in counts.items())
    busy = busy + pl.when(pl.col("peg_cpu") >= 0).then(
        pl.col("peg_pct") - pl.col("lvl_trainer")
    ).otherwise(0.0)
    busy = (busy / c).clip(0.0, 100.0)
    hot = (
        pl.when(pl.col("hot_cpu") >= 0)
        .then((pl.col("hot_irq") + pl.col("hot_soft")) / c)
        .otherwise(0.0)
    )
    f = h.select(
        "k",
        "epoch",
        busy=busy,
        irq=pl.lit(0.03) + hot * 0.12,
        soft=(1.2 + 0.15 * (c - 1)) / c * pl.col("net_rx_mult") + hot * 0.88,
        iowait_frac=pl.col("iowait"),
    )
    return f.select(
        "k",
        "epoch",
        usr=pl.col("busy") * (1 - SYS_SHARE),
        nice=pl.lit(0.01),
        sys=pl.col("busy") * SYS_SHARE,
        iowait=(100 - pl.col("busy") - pl.col("irq") - pl.col("soft")).clip(0.0)
        * pl.col("iowait_frac")
        / 100,
        irq=pl.col("irq"),
        soft=pl.col("soft"),
        steal=pl.lit(0.0),
    ).with_columns(
        idle=(100 - pl.sum_horizontal("usr", "nice", "sys", "iowait", "irq", "soft", "steal")).clip(
            0.0
        )
    )
