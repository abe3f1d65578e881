"""``iostat -t -x -y I N`` text and ``-o JSON`` (sysstat 12.6, ``S_TIME_FORMAT=ISO``).

Per report: an ISO stamp line, the ``avg-cpu`` block, the extended device table (read,
write, discard and flush groups, then ``aqu-sz %util``) and two blank lines. ``-y``
drops the since-boot report, so the first report covers the first interval. The JSON
variant is the same data in sysstat's tab-indented layout; a run cut short leaves it
unterminated, as the real tool does.

Sample::

    2026-11-29T14:00:01+0000
    avg-cpu:  %user   %nice %system %iowait  %steal   %idle
              21.34    0.01    2.96    0.03    0.00   75.66

    Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await  aqu-sz  %util
    nvme0n1          0.00      0.00     0.00   0.00    0.00     0.00    8.00     61.20     1.00  11.11    0.05     7.65    0.00      0.00     0.00   0.00    0.00     0.00    0.00    0.00    0.00   0.06
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt, cpus
from analyzer.synth.common import ARCH, KERNEL, Outcome, Sink, kept, outcome, sysstat_banner
from analyzer.synth.devices import disk_names
from analyzer.synth.model import World

CPU_HDR = "avg-cpu:  %user   %nice %system %iowait  %steal   %idle"
DEV_HDR = (
    "Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s   wrqm/s"
    "  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await dareq-sz     f/s f_await"
    "  aqu-sz  %util"
)
# (column in the disk frame, text width); the JSON order differs (see _JSON)
_TEXT = [
    ("rs", 7),
    ("rkb", 9),
    ("rrqm", 8),
    ("prrqm", 6),
    ("r_await", 7),
    ("rareq", 8),
    ("ws", 7),
    ("wkb", 9),
    ("wrqm", 8),
    ("pwrqm", 6),
    ("w_await", 7),
    ("wareq", 8),
    ("ds", 7),
    ("dkb", 9),
    ("drqm", 8),
    ("pdrqm", 6),
    ("d_await", 7),
    ("dareq", 8),
    ("fs", 7),
    ("f_await", 7),
    ("aqu", 7),
    ("util", 6),
]
_JSON = [
    ("r/s", "rs"),
    ("w/s", "ws"),
    ("d/s", "ds"),
    ("f/s", "fs"),
    ("rkB/s", "rkb"),
    ("wkB/s", "wkb"),
    ("dkB/s", "dkb"),
    ("rrqm/s", "rrqm"),
    ("wrqm/s", "wrqm"),
    ("drqm/s", "drqm"),
    ("rrqm", "prrqm"),
    ("wrqm", "pwrqm"),
    ("drqm", "pdrqm"),
    ("r_await", "r_await"),
    ("w_await", "w_await"),
    ("d_await", "d_await"),
    ("f_await", "f_await"),
    ("rareq-sz", "rareq"),
    ("wareq-sz", "wareq"),
    ("dareq-sz", "dareq"),
    ("aqu-sz", "aqu"),
    ("util", "util"),
]


def _frames(w: World, collector: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    ks = kept(w, collector)
    c = cpus.host_cpu(w).join(ks.select("k"), on="k").sort("k")
    d = w.disks.join(ks.select("k"), on="k").sort("k", "d")  # type: ignore[union-attr]

    def pct(a, b):
        return (
            pl.when(pl.col(a) + pl.col(b) > 0)
            .then(100 * pl.col(a) / (pl.col(a) + pl.col(b)))
            .otherwise(0.0)
        )

    size = lambda kb, n: pl.when(pl.col(n) > 0).then(pl.col(kb) / pl.col(n)).otherwise(0.0)  # noqa: E731
    d = d.with_columns(
        drqm=pl.lit(0.0),
        prrqm=pct("rrqm", "rs"),
        pwrqm=pct("wrqm", "ws"),
        pdrqm=pl.lit(0.0),
        rareq=size("rkb", "rs"),
        wareq=size("wkb", "ws"),
        dareq=pl.lit(0.0),
    )
    return c, d


def write_text(w: World, sink: Sink) -> Outcome:
    c, d = _frames(w, "iostat")
    names = pl.Series([n for n, _, _ in disk_names(w.spec.disks)])
    nd = w.spec.disks
    name = _fmt.text(names.gather(d["d"]), 13, left=True)
    dev_rows = _fmt.join([name, *[_fmt.num(d[col], wd) for col, wd in _TEXT]])
    stamp = _fmt.strftime(c["epoch"], "%Y-%m-%dT%H:%M:%S+0000")
    vals = _fmt.join(
        ["       ", *[_fmt.num(c[s], 7) for s in ("usr", "nice", "sys", "iowait", "steal", "idle")]]
    )
    n = c.height
    heads = [stamp, pl.Series([CPU_HDR] * n), vals, pl.Series([""] * n), pl.Series([DEV_HDR] * n)]
    sink.write(f"{sysstat_banner(w)}\n\n\n".encode())
    sink.write(_fmt.to_bytes(_fmt.blocks(dev_rows, nd, heads, tails=2)))
    return outcome(w, "iostat")


def write_json(w: World, sink: Sink) -> Outcome:
    c, d = _frames(w, "iostat_json")
    out = outcome(w, "iostat_json")
    names = pl.Series([n for n, _, _ in disk_names(w.spec.disks)])
    nd = w.spec.disks
    parts: list[pl.Series | str] = ['\t\t\t\t\t\t{"disk_device": "', names.gather(d["d"]), '"']
    for key, col in _JSON:
        parts += [f', "{key}": ', _fmt.num(d[col], 0)]
    last = (pl.int_range(0, d.height, eager=True) % nd) == nd - 1
    parts.append(pl.Series(["}"] * d.height).zip_with(last, pl.Series(["},"] * d.height)))
    dev_rows = _fmt.join(parts, "")
    n = c.height
    stamp = _fmt.strftime(c["epoch"], "%Y-%m-%dT%H:%M:%S+0000")
    cpu_parts: list[pl.Series | str] = ['\t\t\t\t\t"avg-cpu":  {']
    for i, (key, col) in enumerate(
        [
            ("user", "usr"),
            ("nice", "nice"),
            ("system", "sys"),
            ("iowait", "iowait"),
            ("steal", "steal"),
            ("idle", "idle"),
        ]
    ):
        cpu_parts += [("" if i == 0 else ", ") + f'"{key}": ', _fmt.num(c[col], 0)]
    cpu_parts.append("},")
    closing = pl.Series(["\t\t\t\t},"] * max(n - 1, 0) + ["\t\t\t\t}"] * min(n, 1))
    heads = [
        pl.Series(["\t\t\t\t{"] * n),
        _fmt.join(['\t\t\t\t\t"timestamp": "', stamp, '",'], ""),
        _fmt.join(cpu_parts, ""),
        pl.Series(['\t\t\t\t\t"disk": ['] * n),
    ]
    body = _fmt.blocks(dev_rows, nd, heads, tails=0)
    # the closing lines of each statistic come after its devices: append as a second pass
    per = len(heads) + nd
    idx = pl.DataFrame({"r": pl.int_range(0, n * (per + 2), eager=True)})
    b, j = pl.col("r") // (per + 2), pl.col("r") % (per + 2)
    src = pl.concat([body, pl.Series(["\t\t\t\t\t]"]), closing])
    gather = (
        pl.when(j < per).then(b * per + j).when(j == per).then(n * per).otherwise(n * per + 1 + b)
    )
    lines = src.gather(idx.select(gather).to_series())
    head = (
        '{"sysstat": {\n\t"hosts": [\n\t\t{\n'
        f'\t\t\t"nodename": "{w.spec.hostname}",\n\t\t\t"sysname": "Linux",\n'
        f'\t\t\t"release": "{KERNEL}",\n\t\t\t"machine": "{ARCH}",\n'
        f'\t\t\t"number-of-cpus": {w.spec.cpus},\n\t\t\t"date": "{w.spec.start:%Y-%m-%d}",\n'
        '\t\t\t"statistics": [\n\n'
    )
    sink.write(head.encode())
    sink.write(_fmt.to_bytes(lines))
    if out.averages:
        sink.write(b"\t\t\t]\n\t\t}\n\t]\n}}\n")
    return out
