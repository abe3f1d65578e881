"""``nvidia-smi dmon -o DT -d I -s pucvmet`` text and the capture's bpftrace histograms
(``capture/bpftrace/runqlat.bt``, ``biolat.bt``).

dmon: two ``#`` header lines (names, units), repeated every page (44 rows), then one row
per GPU per sample: date ``YYYYMMDD``, time, GPU index and the ``pucvmet`` metrics,
right-aligned, each line ending in a space. bpftrace: ``Attaching N probes...``, the
script's banner, then every 10 s an ISO time line and the log2 histogram(s) in µs
(``@usecs:`` for runqlat, ``@usecs[major, minor]:`` per disk for biolat), each followed by
a blank line.

Sample::

    #Date        Time         gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk  pviol  tviol     fb   bar1   ccpm  sbecc  dbecc    pci  rxpci  txpci
    #YYYYMMDD    HH:MM:SS     Idx      W      C      C      %      %      %      %      %      %    MHz    MHz      %   bool     MB     MB     MB   errs   errs   errs   MB/s   MB/s
     20261129    14:00:01       0    614     65     69     97     46      0      0      0      0   3201   1976      0      0  71250     14      0      0      0      0   1899    700
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.common import Outcome, Sink, kept
from analyzer.synth.devices import disk_names
from analyzer.synth.model import World

DMON_H1 = "#Date        Time         gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk  pviol  tviol     fb   bar1   ccpm  sbecc  dbecc    pci  rxpci  txpci "
DMON_H2 = "#YYYYMMDD    HH:MM:SS     Idx      W      C      C      %      %      %      %      %      %    MHz    MHz      %   bool     MB     MB     MB   errs   errs   errs   MB/s   MB/s "
DMON_COLS = [
    "pwr",
    "gtemp",
    "mtemp",
    "sm",
    "mem",
    "enc",
    "dec",
    "jpg",
    "ofa",
    "mclk",
    "pclk",
    "pviol",
    "tviol",
    "fb",
    "bar1",
    "ccpm",
    "sbecc",
    "dbecc",
    "pci",
    "rxpci",
    "txpci",
]
PAGE_ROWS = 44
BPF_WINDOW_S = 10
RUNQLAT_BANNER = "hindsight runqlat: run-queue latency in microseconds, histogram every 10 s"
BIOLAT_BANNER = (
    "hindsight biolat: block I/O latency in microseconds per major, minor; histogram every 10 s"
)


def write_dmon(w: World, sink: Sink) -> Outcome:
    g = w.spec.gpus
    ks = kept(w, "nvidia_dmon")
    f = w.gpus.join(ks.select("k"), on="k").sort("k", "g")  # type: ignore[union-attr]
    f = f.with_columns(
        enc=pl.lit(0.0),
        dec=pl.lit(0.0),
        jpg=pl.lit(0.0),
        ofa=pl.lit(0.0),
        ccpm=pl.lit(0.0),
        sbecc=pl.lit(0.0),
        dbecc=pl.lit(0.0),
        pci=pl.lit(0.0),
    )
    date = _fmt.strftime(f["epoch"], " %Y%m%d    %H:%M:%S")
    rows = _fmt.join(
        [
            date,
            _fmt.num(f["g"].cast(pl.Float64), 7, 0),
            *[_fmt.num(f[c], 6, 0) for c in DMON_COLS],
            "",
        ]
    )
    per_page = max(1, PAGE_ROWS // max(g, 1)) * g
    n_pages = -(-rows.len() // per_page) if rows.len() else 0
    out = []
    for p in range(n_pages):
        out += [pl.Series([DMON_H1, DMON_H2]), rows.slice(p * per_page, per_page)]
    if out:
        sink.write(_fmt.to_bytes(pl.concat(out)))
    return Outcome(rc=0, averages=False)


def _label(v: int) -> str:
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if v >= div and v % div == 0:
            return f"{v // div}{unit}"
    return str(v)


def _bucket_names(n: int) -> list[str]:
    """bpftrace hist() bucket labels: [0], [1], [2, 4), [4, 8), ... [512, 1K), ..."""
    names = ["[0]", "[1]"]
    lo = 2
    while len(names) < n:
        names.append(f"[{_label(lo)}, {_label(lo * 2)})")
        lo *= 2
    return names


NBUCKETS = 26
BUCKETS = _bucket_names(NBUCKETS)


BAR = pl.Series([("@" * i).ljust(52) for i in range(53)])


def _histograms(frame: pl.DataFrame) -> pl.DataFrame:
    """Histogram lines for rows (win, key, header, total, mu, sigma, u): the expected
    events per log2 bucket of a log-normal latency (mu, sigma in log2 µs; bucket b >= 2
    is [2^(b-1), 2^b)), from the first to the last non-empty bucket, as ``print(@map)``
    shows them. Returns (win, key, pos, line) with pos -1 header, 0..25 rows, 99 blank."""
    b = pl.DataFrame({"b": pl.int_range(0, NBUCKETS, dtype=pl.Int64, eager=True), "label": BUCKETS})
    f = frame.join(b, how="cross")
    cdf = lambda x: 1 / (1 + (-1.702 * (x - pl.col("mu")) / pl.col("sigma")).exp())  # noqa: E731
    hi = (
        pl.when(pl.col("b") == NBUCKETS - 1)
        .then(pl.lit(1.0))
        .otherwise(cdf(pl.col("b").cast(pl.Float64)))
    )
    lo = (
        pl.when(pl.col("b") == 0)
        .then(pl.lit(0.0))
        .otherwise(cdf((pl.col("b") - 1).cast(pl.Float64)))
    )
    f = f.with_columns(
        n=(pl.col("total") * (hi - lo) * (0.95 + 0.1 * pl.col("u"))).round(0).cast(pl.Int64)
    )
    g = ["win", "key"]
    f = f.with_columns(
        first=pl.col("b").filter(pl.col("n") > 0).min().over(g),
        last=pl.col("b").filter(pl.col("n") > 0).max().over(g),
        top=pl.col("n").max().over(g),
    ).filter((pl.col("b") >= pl.col("first")) & (pl.col("b") <= pl.col("last")))
    rows = f.select(
        *g,
        pos=pl.col("b"),
        line=pl.concat_str(
            [
                pl.col("label").str.pad_end(16),
                pl.lit(" "),
                pl.col("n").cast(pl.String).str.pad_start(7),
                pl.lit(" |"),
                pl.lit(BAR).gather((52 * pl.col("n") / pl.col("top")).floor().cast(pl.Int64)),
                pl.lit("|"),
            ]
        ),
    )
    keys = f.select(*g, "header").unique(g)
    return pl.concat(
        [
            rows,
            keys.select(*g, pos=pl.lit(-1, pl.Int64), line=pl.col("header")),
            keys.select(*g, pos=pl.lit(99, pl.Int64), line=pl.lit("")),
        ]
    )


def _render(w: World, f: pl.DataFrame, hist: pl.DataFrame, banner: str, probes: int) -> bytes:
    times = f.select(
        "win",
        key=pl.lit(-1, pl.Int64),
        pos=pl.lit(-2, pl.Int64),
        line=_fmt.strftime(f["end"], "%Y-%m-%dT%H:%M:%SZ"),
    )
    lines = pl.concat([times, hist.cast({"key": pl.Int64})]).sort("win", "key", "pos")["line"]
    return f"Attaching {probes} probes...\n{banner}\n".encode() + _fmt.to_bytes(lines)


def _windows(w: World) -> pl.DataFrame:
    """Per 10 s window: end epoch and the mean drivers over it."""
    h = w.host.filter(pl.col("k") > 0).with_columns(
        win=((pl.col("epoch") - w.t0 - 1) // BPF_WINDOW_S)
    )
    agg = h.group_by("win").agg(
        end=pl.col("epoch").max(), runq=pl.col("runq").mean(), cs=pl.col("cs_s").mean(), n=pl.len()
    )
    full = w.spec.seconds // BPF_WINDOW_S
    return (
        agg.filter(pl.col("win") < full)
        .sort("win")
        .with_columns(end=w.t0 + (pl.col("win") + 1) * BPF_WINDOW_S)
    )


def write_runqlat(w: World, sink: Sink) -> Outcome:
    f = _windows(w)
    c = w.spec.cpus
    over = (f["runq"] / c - 0.8).clip(0.0, 1.2)
    frame = f.select(
        "win",
        key=pl.lit(0, pl.Int64),
        header=pl.lit("@usecs: "),
        total=pl.col("cs") * BPF_WINDOW_S,
        mu=1.6 + 8.5 * over,
        sigma=1.25 + 0.4 * over,
        u=_fmt.uniform(f.height, w.spec.seed, "runqlat"),
    )
    sink.write(_render(w, f, _histograms(frame), RUNQLAT_BANNER, 6))
    return Outcome(rc=143, averages=False)


def write_biolat(w: World, sink: Sink) -> Outcome:
    f = _windows(w)
    d = w.disks.filter(pl.col("k") > 0).with_columns(
        win=((pl.col("epoch") - w.t0 - 1) // BPF_WINDOW_S)
    )  # type: ignore[union-attr]
    d = d.with_columns(
        ios=pl.col("rs") + pl.col("ws"),
        wt=pl.col("rs") * pl.col("r_await") + pl.col("ws") * pl.col("w_await"),
    )
    agg = d.group_by("win", "d").agg(
        ios=pl.col("ios").sum() * w.interval, wt=pl.col("wt").sum() * w.interval
    )
    agg = agg.filter((pl.col("ios") >= 1) & pl.col("win").is_in(f["win"].implode())).sort(
        "win", "d"
    )
    names = disk_names(w.spec.disks)
    hdr = pl.Series([f"@usecs[{major}, {minor}]: " for _, major, minor in names])
    frame = agg.select(
        "win",
        key=pl.col("d").cast(pl.Int64),
        header=pl.lit(hdr).gather(pl.col("d")),
        total=pl.col("ios"),
        mu=(pl.col("wt") / pl.col("ios") * 1000).clip(2.0).log(2) - 0.2,
        sigma=pl.lit(0.9),
        u=_fmt.uniform(agg.height, w.spec.seed, "biolat"),
    )
    sink.write(_render(w, f, _histograms(frame), BIOLAT_BANNER, 5))
    return Outcome(rc=143, averages=False)
