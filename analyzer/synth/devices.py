"""Per-device state from the drivers: disks, GPUs, NICs and the target processes.

Each frame is long (one row per sample ``k`` per device), sorted by ``k`` then device:

- ``disks``: ``d``, ``rs rkb ws wkb rrqm wrqm r_await w_await ds dkb d_await fs f_await
  aqu util`` (iostat -x units: 1/s, kB/s, ms, requests, %).
- ``gpus``: ``g``, ``sm mem pwr gtemp mtemp mclk pclk pviol tviol fb bar1 rxpci txpci``
  (nvidia-smi dmon units: %, W, C, MHz, %, MB, MB/s).
- ``nics``: ``i`` (0 = ``lo``), ``rxpck txpck rxkb txkb rxcmp txcmp rxmcst ifutil rxerr
  txerr coll rxdrop txdrop txcarr rxfram rxfifo txfifo`` (sar -n DEV/EDEV units).
- ``procs``: ``p``, ``usr sys wait cpu minflt majflt vsz rss kb_rd kb_wr kb_ccwr iodelay
  cswch nvcswch alive`` (pidstat units; ``alive`` false once the process is gone).

Names and ids (`DISKS`, `nic_names`, `PROCS`, `gpu_ids`) are shared with the snapshots so
that ``lsblk``, ``nvidia-smi -L`` and ``ps`` agree with the series.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.model import World

READ_BW_KB = 3_500_000.0
WRITE_BW_KB = 2_000_000.0
GPU_CAP_W = 700.0
GPU_MAX_CLK = 1980
GPU_MCLK = 3201
GPU_FB_TOTAL = 143771


@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    args: str
    role: str  # trainer | loader
    cpu: int


def disk_names(n: int) -> list[tuple[str, int, int]]:
    """(name, major, minor): nvme0n1 has two partitions, the data disks none."""
    out, minor = [], 0
    for i in range(n):
        out.append((f"nvme{i}n1", 259, minor))
        minor += 3 if i == 0 else 1
    return out


def nic_names(n: int) -> list[str]:
    return ["lo"] + ["eno1" if i == 0 else f"ens{i}f0np0" for i in range(n)]


def procs(w: World) -> list[Proc]:
    """The training process (pidstat target) and its data-loader workers."""
    first_trainer = w.roles.index("trainer") if "trainer" in w.roles else 0
    loaders = [c for c, r in enumerate(w.roles) if r == "loader"] or [0]
    script = "python3 train.py --config configs/llm-7b.yaml --ckpt-dir /data/ckpt"
    out = [Proc(4242, "python3", script, "trainer", first_trainer)]
    for j in range(min(2, max(1, len(loaders)))):
        out.append(Proc(4310 + j, "python3", script, "loader", loaders[j % len(loaders)]))
    return out


def gpu_ids(w: World, g: int) -> tuple[str, str]:
    """(bus id ``00000000:18:00.0``, ``GPU-<uuid>``), stable per host name and index."""
    bus = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"][g % 8]
    u = "".join(f"{zlib.crc32(f'{w.spec.hostname}/{g}/{i}'.encode()):08x}" for i in range(4))
    return f"00000000:{bus}:00.0", f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:32]}"


def _long(w: World, n_dev: int, dev: str, cols: list[str]) -> pl.DataFrame:
    h = w.host.select(cols)
    rows = h.height * n_dev
    idx = pl.int_range(0, rows, dtype=pl.Int64, eager=True)
    f = h.select(pl.all().gather(idx // n_dev))
    return f.with_columns(**{dev: (idx % n_dev).cast(pl.Int32)})


def derive_disks(w: World) -> None:
    n = w.spec.disks
    cols = ["k", "epoch", "rd_kb_s", "wr_kb_s", "wr_disk", "io_slow", "io_sat", "sat_disk"]
    f = _long(w, n, "d", cols)
    rows = f.height
    z = _fmt.normal(rows, w.spec.seed, "disk") * w.spec.noise
    u = _fmt.uniform(rows, w.spec.seed, "disk-u")
    data = n - 1 if n > 1 else 1
    is_os = (pl.col("d") == 0) & pl.lit(n > 1)
    f = f.with_columns(z=z, u=u)
    rkb = pl.when(is_os).then(8.0 * pl.col("u")).otherwise(pl.col("rd_kb_s") / data)
    wkb = pl.when(is_os).then(60.0 + 20 * pl.col("z")).otherwise(2500.0 + 300 * pl.col("z"))
    wkb = wkb.clip(0.0) + pl.when(pl.col("d") == pl.col("wr_disk")).then(
        pl.col("wr_kb_s")
    ).otherwise(0.0)
    sat = pl.when(pl.col("d") == pl.col("sat_disk")).then(pl.col("io_sat")).otherwise(0.0)
    f = f.with_columns(rkb=(rkb * (1 + 0.05 * pl.col("z"))).clip(0.0), wkb=wkb, sat=sat)
    f = f.with_columns(
        rkb=pl.col("rkb") + pl.col("sat") * 380_000.0,
        rsz=pl.when(pl.col("sat") > 0).then(4.0).otherwise(128.0),
        wsz=pl.when(pl.col("wkb") > 100_000)
        .then(256.0)
        .otherwise(pl.when(is_os).then(7.5).otherwise(48.0)),
    )
    f = f.with_columns(
        rs=(pl.col("rkb") / pl.col("rsz")),
        ws=(pl.col("wkb") / pl.col("wsz")),
        load=(pl.col("rkb") / READ_BW_KB + pl.col("wkb") / WRITE_BW_KB),
    )
    slow = pl.col("io_slow") * (1 + 8 * pl.col("sat"))
    f = f.with_columns(
        r_await=pl.when(pl.col("rs") > 0.5)
        .then((0.12 + 0.03 * pl.col("u")) * slow * (1 + 2 * pl.col("load")))
        .otherwise(0.0),
        w_await=pl.when(pl.col("ws") > 0.5)
        .then((0.04 + 0.02 * pl.col("u") + 9.0 * pl.col("load").clip(0.0, 1.5) ** 2) * slow)
        .otherwise(0.0),
        rrqm=pl.col("rs") * 0.01 * pl.col("u"),
        wrqm=pl.col("ws") * (0.05 + 0.1 * pl.col("u")),
        fs=pl.when(pl.col("ws") > 0.5).then((pl.col("ws") * 0.02).round(0)).otherwise(0.0),
    )
    iv = float(w.interval)
    whole = lambda e: (e * iv).round(0) / iv  # noqa: E731 - whole requests per interval
    f = f.with_columns(
        rs=whole(pl.col("rs")),
        ws=whole(pl.col("ws")),
        rrqm=whole(pl.col("rrqm")),
        wrqm=whole(pl.col("wrqm")),
    )
    f = f.with_columns(
        rkb=pl.when(pl.col("rs") > 0).then(pl.col("rkb")).otherwise(0.0),
        wkb=pl.when(pl.col("ws") > 0).then(pl.col("wkb")).otherwise(0.0),
        f_await=pl.when(pl.col("fs") > 0).then(0.3 + 0.4 * pl.col("u")).otherwise(0.0),
        ds=pl.lit(0.0),
        dkb=pl.lit(0.0),
        d_await=pl.lit(0.0),
    )
    f = f.with_columns(
        aqu=(pl.col("rs") * pl.col("r_await") + pl.col("ws") * pl.col("w_await")) / 1000,
        util=(
            100 * (pl.col("load") * 1.15 + pl.col("sat"))
            + 0.02 * (pl.col("rs") + pl.col("ws")) ** 0.5
        ).clip(0.0, 100.0),
    )
    w.disks = f.drop("z", "u", "load", "sat", "rsz", "wsz")


def derive_gpus(w: World) -> None:
    g = max(w.spec.gpus, 0)
    if g == 0:
        w.gpus = None
        return
    cols = ["k", "epoch", "train", "gpu_clk", "gpu_pviol", "gpu_capped", "gpu_sel"]
    f = _long(w, g, "g", cols)
    z = _fmt.normal(f.height, w.spec.seed, "gpu") * w.spec.noise
    f = f.with_columns(z=z)
    hit = (pl.col("gpu_sel") < 0) | (pl.col("gpu_sel") == pl.col("g"))
    f = f.with_columns(
        clk=pl.when(hit).then(pl.col("gpu_clk")).otherwise(1.0),
        pviol=pl.when(hit).then(pl.col("gpu_pviol")).otherwise(0.0),
        capped=pl.when(hit).then(pl.col("gpu_capped")).otherwise(0.0),
    )
    busy = (pl.col("train") * 95.5 + 1.6 * pl.col("z")).clip(0.0, 100.0)
    f = f.with_columns(
        sm=pl.when(pl.col("train") < 0.15)
        .then((pl.col("train") * 100 + pl.col("z").abs()).clip(0.0, 100.0))
        .otherwise(busy)
    )
    f = f.with_columns(
        sm=pl.when(pl.col("capped") > 0)
        .then((97.0 + pl.col("z")).clip(0.0, 100.0))
        .otherwise(pl.col("sm")),
    )
    pwr = 72.0 + (GPU_CAP_W - 150.0) * pl.col("sm") / 100 + 12 * pl.col("z")
    f = f.with_columns(
        pwr=pl.when(pl.col("capped") > 0)
        .then(GPU_CAP_W - 2.5 * pl.col("z").abs())
        .otherwise(pwr.clip(60.0, GPU_CAP_W)),
        mem=(pl.col("sm") * 0.46 + 1.5 * pl.col("z")).clip(0.0, 100.0),
        pclk=(GPU_MAX_CLK * pl.col("clk") - (5 * pl.col("z")).abs())
        .round(0)
        .clip(210.0, GPU_MAX_CLK),
    )
    heat = (pl.col("pwr") / GPU_CAP_W).ewm_mean(alpha=0.03, adjust=False).over("g")
    f = f.with_columns(
        gtemp=(33.0 + 36.0 * heat + 0.4 * pl.col("z")).round(0),
        mclk=pl.lit(float(GPU_MCLK)),
        tviol=pl.lit(0.0),
        fb=(pl.lit(71_000.0) + 40 * pl.col("g") + (30 * pl.col("z")).round(0) * 10).clip(0.0),
        bar1=pl.lit(14.0),
        rxpci=(pl.col("train") * 1800 + 120 * pl.col("z")).clip(0.0),
        txpci=(pl.col("train") * 650 + 60 * pl.col("z")).clip(0.0),
    )
    w.gpus = f.with_columns(mtemp=pl.col("gtemp") + 4).drop(
        "z", "clk", "capped", "train", "gpu_clk", "gpu_pviol", "gpu_capped", "gpu_sel"
    )


def derive_nics(w: World) -> None:
    n = w.spec.nics + 1
    cols = ["k", "epoch", "net_rx_mult", "net_drop", "net_err", "net_nic", "hot_cpu"]
    f = _long(w, n, "i", cols)
    z = _fmt.normal(f.height, w.spec.seed, "nic") * w.spec.noise
    f = f.with_columns(z=z)
    lo = pl.col("i") == 0
    main = pl.col("i") == 1
    rxkb = pl.when(lo).then(12.0).when(main).then(14_000.0).otherwise(900.0) * pl.col("net_rx_mult")
    rxkb = rxkb + pl.when(main & (pl.col("hot_cpu") >= 0)).then(2_100_000.0).otherwise(0.0)
    txkb = pl.when(lo).then(12.0).when(main).then(2_400.0).otherwise(300.0) * (
        1 + 0.05 * pl.col("z")
    )
    f = f.with_columns(rxkb=(rxkb * (1 + 0.06 * pl.col("z"))).clip(0.0), txkb=txkb.clip(0.0))
    iv = float(w.interval)
    whole = lambda e: (e * iv).round(0).clip(0) / iv  # noqa: E731
    mine = (pl.col("i") - 1) == pl.col("net_nic")
    f = f.with_columns(
        rxpck=whole(pl.col("rxkb") / 1.45),
        txpck=whole(pl.col("txkb") / 0.9),
        rxmcst=whole(pl.when(lo).then(0.0).otherwise(0.4 + 0.2 * pl.col("z").abs())),
        rxdrop=whole(
            pl.when(mine).then(pl.col("net_drop")).otherwise(0.0) * (1 + 0.1 * pl.col("z"))
        ),
        rxerr=whole(pl.when(mine).then(pl.col("net_err")).otherwise(0.0) * (1 + 0.1 * pl.col("z"))),
    )
    speed_kb = 25_000_000 / 8
    f = f.with_columns(
        rxcmp=pl.lit(0.0),
        txcmp=pl.lit(0.0),
        ifutil=pl.when(lo).then(0.0).otherwise(pl.max_horizontal("rxkb", "txkb") / speed_kb * 100),
        txerr=pl.lit(0.0),
        coll=pl.lit(0.0),
        txdrop=pl.lit(0.0),
        txcarr=pl.lit(0.0),
        rxfram=pl.lit(0.0),
        rxfifo=whole(pl.col("rxerr") * 0.5),
        txfifo=pl.lit(0.0),
    )
    w.nics = f.drop("z", "net_rx_mult", "net_drop", "net_err", "net_nic", "hot_cpu")


def derive_procs(w: World) -> None:
    ps = procs(w)
    cols = ["k", "epoch", "lvl_trainer", "lvl_loader", "peg_cpu", "peg_pct", "wr_kb_s", "rd_kb_s"]
    cols += ["anon_add_kb", "throttle", "psi_io_some"]
    f = _long(w, len(ps), "p", cols)
    z = _fmt.normal(f.height, w.spec.seed, "proc") * w.spec.noise
    u = _fmt.uniform(f.height, w.spec.seed, "proc-u")
    role = pl.Series([p.role for p in ps]).gather(f["p"])
    core = pl.Series([p.cpu for p in ps], dtype=pl.Int32).gather(f["p"])
    nload = sum(p.role == "loader" for p in ps)
    f = f.with_columns(z=z, u=u, role=role, cpu=core)
    trainer = pl.col("role") == "trainer"
    pegged = (pl.col("peg_cpu") >= 0) & (pl.col("p") == 1)
    cpu = pl.when(trainer).then(pl.col("lvl_trainer") * 1.08).otherwise(pl.col("lvl_loader") * 0.95)
    cpu = (
        pl.when(pegged)
        .then(pl.col("peg_pct") - 0.4 * pl.col("u"))
        .when((pl.col("peg_cpu") >= 0) & ~trainer)
        .then(2.0 + pl.col("u"))
        .otherwise(cpu)
    )
    f = f.with_columns(pcpu=(cpu + 2 * pl.col("z")).clip(0.0))
    mem_total = w.mem_total_kb
    rss0 = pl.when(trainer).then(0.16 * mem_total).otherwise(0.02 * mem_total)
    grow = pl.when(pl.col("p") == len(ps) - 1).then(pl.col("anon_add_kb")).otherwise(0.0)
    f = f.with_columns(
        usr=pl.col("pcpu") * 0.9,
        sys=pl.col("pcpu") * 0.1,
        wait=(pl.col("throttle") * 30 + 1.5 * pl.col("u")).clip(0.0, 100.0),
        minflt=(pl.when(trainer).then(850.0).otherwise(240.0) * (1 + 0.2 * pl.col("z")))
        .round(0)
        .clip(0.0),
        majflt=pl.lit(0.0),
        vsz=(
            pl.when(trainer)
            .then(0.5 * mem_total + 40_000_000)
            .otherwise(0.05 * mem_total + 9_000_000)
        ).round(0),
        rss=(rss0 + grow + (2000 * pl.col("z")).round(0)).round(0),
        kb_rd=pl.when(trainer).then(0.0).otherwise(pl.col("rd_kb_s") / max(nload, 1)),
        kb_wr=pl.when(trainer).then(pl.col("wr_kb_s") + 40.0 * pl.col("u")).otherwise(0.0),
        kb_ccwr=pl.lit(0.0),
        iodelay=pl.when(trainer)
        .then((pl.col("psi_io_some") * 100 * w.interval).round(0))
        .otherwise(0.0),
        cswch=(pl.when(trainer).then(320.0).otherwise(90.0) * (1 + 0.2 * pl.col("z"))).clip(0.0),
        nvcswch=(pl.when(trainer).then(45.0).otherwise(12.0) * (1 + 0.3 * pl.col("z"))).clip(0.0),
    )
    alive = pl.lit(True)
    for pid, t in w.dead_pids.items():
        alive = alive & ~(
            (pl.Series([p.pid for p in ps]).gather(f["p"]) == pid) & (pl.col("epoch") > t)
        )
    w.procs = f.with_columns(alive=alive).drop("z", "u", "pcpu")


def derive_host_rates(w: World) -> None:
    """Host-wide per-second counts the tools print: interrupts, context switches, forks."""
    c = w.spec.cpus
    iv = float(w.interval)
    whole = lambda e: (e * iv).round(0).clip(0) / iv  # noqa: E731
    w.host = w.host.with_columns(
        intr_s=whole(
            c * 34.0
            + 246.0 * pl.col("busy_cores")
            + w.noise("intr", 40.0)
            + pl.when(pl.col("hot_cpu") >= 0).then(48_000.0).otherwise(0.0)
            + 900 * pl.col("net_rx_mult")
        ),
        cs_s=whole(
            1500.0
            + 900.0 * pl.col("busy_cores")
            + 400.0 * pl.col("runq_extra")
            + w.noise("cs", 120.0)
        ),
        procs_s=whole((3.0 + w.noise("forks", 2.0)).clip(0.0)),
        plist=(850 + 12 * c + w.noise("plist", 3.0).round(0)).cast(pl.Int64),
    )


def derive_all(w: World) -> None:
    derive_host_rates(w)
    derive_disks(w)
    derive_gpus(w)
    derive_nics(w)
    derive_procs(w)
