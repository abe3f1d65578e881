"""``pidstat -u -r -d -w -h -H -p PID,... I N`` text (sysstat 12.6): per interval a
``# Time`` header and one row per target process, ``Time`` in epoch seconds (``-H``). A
process that exits (an OOM victim) has no rows after its death.

Sample::

    # Time        UID       PID    %usr %system  %guest   %wait    %CPU   CPU  minflt/s  majflt/s     VSZ     RSS   %MEM   kB_rd/s   kB_wr/s kB_ccwr/s iodelay   cswch/s nvcswch/s  Command
    1795960801   1000      4242   95.12   10.57    0.00    1.45  105.69     1    896.00      0.00 73291480 10542707  15.71      0.00     38.79      0.00       0    337.25     48.64  python3
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.common import Outcome, Sink, kept, outcome, sysstat_banner
from analyzer.synth.devices import procs
from analyzer.synth.model import World

HDR = (
    "# Time        UID       PID    %usr %system  %guest   %wait    %CPU   CPU  minflt/s  majflt/s"
    "     VSZ     RSS   %MEM   kB_rd/s   kB_wr/s kB_ccwr/s iodelay   cswch/s nvcswch/s  Command"
)
UID = 1000


def write(w: World, sink: Sink) -> Outcome:
    ps = procs(w)
    ks = kept(w, "pidstat")
    f = w.procs.join(ks.select("k"), on="k").filter(pl.col("alive")).sort("k", "p")  # type: ignore[union-attr]
    pids = pl.Series([p.pid for p in ps]).gather(f["p"])
    comm = pl.Series([p.comm for p in ps]).gather(f["p"])
    mem = 100 * f["rss"] / w.mem_total_kb
    rows = _fmt.join(
        [
            f["epoch"].cast(pl.String).str.pad_end(11),
            _fmt.num(pl.Series([float(UID)] * f.height), 5, 0),
            _fmt.num(pids.cast(pl.Float64), 9, 0),
            _fmt.num(f["usr"], 7),
            _fmt.num(f["sys"], 7),
            _fmt.num(pl.Series([0.0] * f.height), 7),
            _fmt.num(f["wait"], 7),
            _fmt.num(f["usr"] + f["sys"], 7),
            _fmt.num(f["cpu"].cast(pl.Float64), 5, 0),
            _fmt.num(f["minflt"], 9),
            _fmt.num(f["majflt"], 9),
            _fmt.num(f["vsz"], 7, 0),
            _fmt.num(f["rss"], 7, 0),
            _fmt.num(mem, 6),
            _fmt.num(f["kb_rd"], 9),
            _fmt.num(f["kb_wr"], 9),
            _fmt.num(f["kb_ccwr"], 9),
            _fmt.num(f["iodelay"], 7, 0),
            _fmt.num(f["cswch"], 9),
            _fmt.num(f["nvcswch"], 9),
            " " + comm,
        ]
    )
    # one header per sample that has rows; blocks separated by a blank line, none at the end
    sink.write(f"{sysstat_banner(w)}\n\n".encode())
    if f.height:
        first = (f["k"] != f["k"].shift(1)).fill_null(True)
        sep = (
            pl.when(pl.int_range(0, f.height) == 0)
            .then(pl.lit(HDR + "\n"))
            .otherwise(pl.lit("\n" + HDR + "\n"))
        )
        out = pl.DataFrame({"line": rows, "first": first}).select(
            pl.when(pl.col("first"))
            .then(pl.concat_str([sep, pl.col("line")]))
            .otherwise(pl.col("line"))
        )
        sink.write(_fmt.to_bytes(out.to_series()))
    return outcome(w, "pidstat")
