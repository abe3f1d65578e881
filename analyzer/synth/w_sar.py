"""``sar -n DEV,EDEV,SOFT -q -B -w I N`` text (sysstat 12.6).

Per interval the sections ``-w`` (proc/s cswch/s), ``-B`` (paging), ``-q`` (run queue,
load averages, blocked), ``-n DEV`` and ``-n EDEV`` (one row per interface, ``lo``
first) and ``-n SOFT`` (``all``), each headed by the previous sample's time and followed
by a blank line; ``Average:`` sections close a complete run.

Sample::

    14:00:00       proc/s   cswch/s
    14:00:01         3.00   3236.00

    14:00:00        IFACE   rxerr/s   txerr/s    coll/s  rxdrop/s  txdrop/s  txcarr/s  rxfram/s  rxfifo/s  txfifo/s
    14:00:01           lo      0.00      0.00      0.00      0.00      0.00      0.00      0.00      0.00      0.00
"""

from __future__ import annotations

import math

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.common import Outcome, Sink, kept, outcome, sysstat_banner
from analyzer.synth.devices import nic_names
from analyzer.synth.model import World

W_COLS = ["procs_s", "cs_s"]
B_COLS = [
    "pgpgin",
    "pgpgout",
    "pgfault_s",
    "pgmajfault_s",
    "pgfree_s",
    "scan_kswapd",
    "scan_direct",
    "pgsteal",
    "vmeff",
]
Q_COLS = ["runq", "plist", "ldavg1", "ldavg5", "ldavg15", "blocked"]
DEV_COLS = ["rxpck", "txpck", "rxkb", "txkb", "rxcmp", "txcmp", "rxmcst", "ifutil"]
EDEV_COLS = ["rxerr", "txerr", "coll", "rxdrop", "txdrop", "txcarr", "rxfram", "rxfifo", "txfifo"]
SOFT_COLS = ["total", "dropd", "squeezd", "rx_rps", "flw_lim", "blg_len"]
HDR = {
    "w": "       proc/s   cswch/s",
    "B": "     pgpgin/s pgpgout/s   fault/s  majflt/s  pgfree/s pgscank/s pgscand/s pgsteal/s    %vmeff",
    "q": "      runq-sz  plist-sz   ldavg-1   ldavg-5  ldavg-15   blocked",
    "DEV": "        IFACE   rxpck/s   txpck/s    rxkB/s    txkB/s   rxcmp/s   txcmp/s  rxmcst/s   %ifutil",
    "EDEV": "        IFACE   rxerr/s   txerr/s    coll/s  rxdrop/s  txdrop/s  txcarr/s  rxfram/s  rxfifo/s  txfifo/s",
    "SOFT": "        CPU   total/s   dropd/s squeezd/s  rx_rps/s flw_lim/s   blg_len",
}
INTS = {"runq", "plist", "blocked", "blg_len"}


def host_frame(w: World) -> pl.DataFrame:
    """Per-sample host values of the -w, -B, -q and SOFT sections."""
    disks = w.disks.group_by("k").agg(pgpgin=pl.col("rkb").sum(), pgpgout=pl.col("wkb").sum())  # type: ignore[union-attr]
    nets = (
        w.nics.filter(pl.col("i") > 0)
        .group_by("k")
        .agg(  # type: ignore[union-attr]
            total=pl.col("rxpck").sum(), dropd=pl.col("rxdrop").sum() * 0.1
        )
    )
    h = w.host.join(disks, on="k").join(nets, on="k", how="left").sort("k")
    h = h.with_columns(pl.col("total", "dropd").fill_null(0.0))
    iv = w.interval
    avg = lambda win: (pl.col("runq") + 0.0).ewm_mean(alpha=1 - math.exp(-iv / win), adjust=False)  # noqa: E731
    return h.with_columns(
        pgsteal=pl.col("pgsteal_kswapd_s") + pl.col("pgsteal_direct_s"),
        vmeff=pl.when(pl.col("scan_kswapd") + pl.col("scan_direct") > 0)
        .then(
            100
            * (pl.col("pgsteal_kswapd_s") + pl.col("pgsteal_direct_s"))
            / (pl.col("scan_kswapd") + pl.col("scan_direct"))
        )
        .otherwise(0.0),
        ldavg1=avg(60),
        ldavg5=avg(300),
        ldavg15=avg(900),
        squeezd=(pl.col("total") / 40_000).floor(),
        rx_rps=pl.lit(0.0),
        flw_lim=pl.lit(0.0),
        blg_len=pl.lit(0.0),
    )


def _vals(f: pl.DataFrame, cols: list[str]) -> list[pl.Series]:
    return [_fmt.num(f[c], 9, 0 if c in INTS else 2) for c in cols]


def _section(
    lead: pl.Series, f: pl.DataFrame, cols: list[str], label: pl.Series | None, lw: int
) -> pl.Series:
    parts: list[pl.Series | str] = [lead.str.pad_end(11)]
    if label is not None:
        parts.append(_fmt.text(label, lw))
    return _fmt.join(parts + _vals(f, cols))


def write(w: World, sink: Sink) -> Outcome:
    out = outcome(w, "sar")
    ks = kept(w, "sar")
    h = host_frame(w).join(ks.select("k", "prev_epoch"), on="k").sort("k")
    nic = w.nics.join(ks.select("k"), on="k").sort("k", "i")  # type: ignore[union-attr]
    names = pl.Series(nic_names(w.spec.nics))
    ni = len(names)
    t, head = _fmt.hms(h["epoch"]), _fmt.hms(h["prev_epoch"])
    t_nic = t.gather(pl.int_range(0, nic.height, eager=True) // ni)
    n = h.height
    blank = pl.Series([""] * n)
    hd = lambda key: _fmt.join([head.str.pad_end(11), HDR[key][3:]], "")  # noqa: E731
    single = []
    for key, cols in (("w", W_COLS), ("B", B_COLS), ("q", Q_COLS)):
        single += [hd(key), _section(t, h, cols, None, 0), blank]
    dev = _section(t_nic, nic, DEV_COLS, names.gather(nic["i"]), 9)
    edev = _section(t_nic, nic, EDEV_COLS, names.gather(nic["i"]), 9)
    soft = _section(t, h, SOFT_COLS, pl.Series(["all"] * n), 7)
    # per sample: 9 single lines, DEV block (hdr + ni + blank), EDEV block, SOFT (hdr, row, blank)
    per = 9 + 2 * (ni + 2) + 3
    src = pl.concat([*single, hd("DEV"), dev, hd("EDEV"), edev, hd("SOFT"), soft, pl.Series([""])])
    r = pl.DataFrame({"r": pl.int_range(0, n * per, eager=True)})
    b, j = pl.col("r") // per, pl.col("r") % per
    off_dev_h = 9 * n
    off_dev = off_dev_h + n
    off_edev_h = off_dev + n * ni
    off_edev = off_edev_h + n
    off_soft_h = off_edev + n * ni
    off_soft = off_soft_h + n
    blank_i = off_soft + n
    e1, e2 = 9 + ni + 2, 9 + 2 * (ni + 2)
    idx = (
        pl.when(j < 9)
        .then((j * n) + b)
        .when(j == 9)
        .then(off_dev_h + b)
        .when(j < 10 + ni)
        .then(off_dev + b * ni + j - 10)
        .when(j == 10 + ni)
        .then(blank_i)
        .when(j == e1)
        .then(off_edev_h + b)
        .when(j < e1 + 1 + ni)
        .then(off_edev + b * ni + j - e1 - 1)
        .when(j == e1 + 1 + ni)
        .then(blank_i)
        .when(j == e2)
        .then(off_soft_h + b)
        .when(j == e2 + 1)
        .then(off_soft + b)
        .otherwise(blank_i)
    )
    sink.write(f"{sysstat_banner(w)}\n\n".encode())
    sink.write(_fmt.to_bytes(src.gather(r.select(idx).to_series())))
    if out.averages and n:
        sink.write(_fmt.to_bytes(_averages(h, nic, names)))
    return out


def _averages(h: pl.DataFrame, nic: pl.DataFrame, names: pl.Series) -> pl.Series:
    lead = pl.Series(["Average:"])
    parts = []
    for key, cols in (("w", W_COLS), ("B", B_COLS), ("q", Q_COLS)):
        parts += [
            pl.Series(["Average:".ljust(11) + HDR[key][3:]]),
            _section(lead, h.select(pl.col(cols).mean()), cols, None, 0),
            pl.Series([""]),
        ]
    per_nic = nic.group_by("i").agg(pl.col(DEV_COLS + EDEV_COLS).mean()).sort("i")
    lead_n = pl.Series(["Average:"] * per_nic.height)
    parts += [
        pl.Series(["Average:".ljust(11) + HDR["DEV"][3:]]),
        _section(lead_n, per_nic, DEV_COLS, names.gather(per_nic["i"]), 9),
        pl.Series([""]),
    ]
    parts += [
        pl.Series(["Average:".ljust(11) + HDR["EDEV"][3:]]),
        _section(lead_n, per_nic, EDEV_COLS, names.gather(per_nic["i"]), 9),
        pl.Series([""]),
    ]
    parts += [
        pl.Series(["Average:".ljust(11) + HDR["SOFT"][3:]]),
        _section(lead, h.select(pl.col(SOFT_COLS).mean()), SOFT_COLS, pl.Series(["all"]), 7),
    ]
    return pl.concat(parts)
