"""Network drops and errors per interface (sar -n EDEV).

Receive drops (no buffer / backlog), FIFO overruns and rx/tx errors. Any sustained rate is
reported; the severity grows with the rate. Frame/CRC errors point at cabling or the
switch port, drops and FIFO overruns at ring buffers, backlog and IRQ placement.
"""

from __future__ import annotations

import polars as pl

from analyzer import intervals
from analyzer.detectors._base import Context, r, span
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "net_errors"
INPUTS = ("sar_net_edev (sar -n EDEV)",)
THRESHOLDS = {
    "enter_per_s": 10.0,  # drops + errors ≥ 10/s ...
    "rel": 10.0,  # ... and 10x the interface's median
    "leave_frac": 0.5,
    "min_s": 3,
    "merge_gap_s": 5,
    "minor_per_s": 100.0,
    "major_per_s": 1000.0,
}
T = THRESHOLDS
_COLS = (
    "rxdrop_s",
    "txdrop_s",
    "rxerr_s",
    "txerr_s",
    "rxfram_s",
    "rxfifo_s",
    "txfifo_s",
    "txcarr_s",
)


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("sar_net_edev"):
        return NotEvaluated(NAME, "needs interface error counters: sar -n EDEV")
    sums = ", ".join(f"avg({c}) AS {c}" for c in _COLS)
    df = ctx.query(
        f"SELECT iface, second_of(ts) AS ts, {sums} FROM sar_net_edev WHERE iface <> 'lo' AND ts IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"
    )
    df = df.with_columns(x=pl.sum_horizontal(*_COLS))
    out = []
    for (iface,), sub in df.group_by("iface", maintain_order=True):
        thr = max(T["enter_per_s"], T["rel"] * float(sub["x"].median() or 0.0))
        wins = intervals.as_windows(
            intervals.runs(
                sub["ts"],
                sub["x"],
                enter=thr,
                leave=thr * T["leave_frac"],
                min_duration_s=T["min_s"],
                merge_gap_s=T["merge_gap_s"],
            )
        )
        for w in wins:
            inside = sub.filter((pl.col("ts") >= w[0]) & (pl.col("ts") < w[1]))
            rate = float(inside["x"].mean() or 0.0)
            ev = [
                Evidence(
                    f"{iface} {c}", r(inside[c].mean(), 2), r(sub[c].median(), 2), "1/s", "mean"
                )
                for c in _COLS
                if (inside[c].mean() or 0) > 0
            ]
            sev = (
                "major"
                if rate >= T["major_per_s"]
                else "minor"
                if rate >= T["minor_per_s"]
                else "info"
            )
            dur = (w[1] - w[0]).total_seconds()
            out.append(
                Finding(
                    key="NET_ERRORS",
                    kind=NAME,
                    title=f"Packet drops/errors on {iface} ({rate:.0f}/s)",
                    severity=sev,
                    start=w[0],
                    end=w[1],
                    summary=f"Interface {iface} dropped or errored {rate:.0f} packets/s at {span(w)} (about {rate * dur:.0f} packets).",
                    impact={"packets_lost": r(rate * dur, 0)},
                    evidence=ev,
                    remediation=[
                        f"See which counter grows: `ethtool -S {iface} | grep -iE 'drop|err|fifo|miss|discard'`, `ip -s link show {iface}`.",
                        f"Drops/FIFO: enlarge the rings `ethtool -G {iface} rx 4096`, raise `net.core.netdev_max_backlog=250000` and `net.core.netdev_budget=600`; spread IRQs (see IRQ_HOTSPOT).",
                        "Frame/CRC/carrier errors: check the cable/transceiver and the switch port counters.",
                    ],
                )
            )
    return out
