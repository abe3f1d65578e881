"""NVIDIA Xid errors and GPUs falling off the bus, from the kernel log.

Xid lines of one GPU within a minute of each other form one finding (13 followed by 43 is
one incident: the exception, then the channel it killed), named after its worst code. Severity and advice come
from the code (NVIDIA's Xid catalog: docs.nvidia.com/deploy/xid-errors).
"""

from __future__ import annotations

from datetime import timedelta

from analyzer.detectors._base import Context, hhmmss, second_of
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "gpu_xid"
INPUTS = ("dmesg lines classified xid / gpu_fallen_off_bus",)
THRESHOLDS = {"group_s": 60}
T = THRESHOLDS
# code -> (severity, meaning, what to do)
CODES: dict[int, tuple[str, str, str]] = {
    13: (
        "major",
        "graphics engine exception",
        "Usually the application (out-of-range access): rerun with CUDA_LAUNCH_BLOCKING=1 or under compute-sanitizer.",
    ),
    31: (
        "major",
        "GPU memory page fault",
        "Usually an application bug (illegal address); compute-sanitizer; if several jobs hit it, suspect driver/hardware.",
    ),
    43: (
        "major",
        "GPU stopped processing",
        "The application's context was reset; check the application log; recurrent on one GPU → drain and test it.",
    ),
    45: (
        "minor",
        "preemptive cleanup",
        "Follows a killed process or another Xid; look at the error before it.",
    ),
    48: (
        "critical",
        "double-bit ECC error",
        "Drain the node, reset the GPU (`nvidia-smi -r`), check `nvidia-smi -q -d ECC,PAGE_RETIREMENT`; RMA if it recurs.",
    ),
    61: (
        "major",
        "internal micro-controller breakpoint",
        "Reset the GPU; update driver/firmware if it recurs.",
    ),
    62: (
        "major",
        "internal micro-controller halt",
        "Reset the GPU; update driver/firmware if it recurs.",
    ),
    63: (
        "major",
        "ECC page retirement / row remapping event",
        "Check `nvidia-smi -q -d ROW_REMAPPER`; a pending remap needs a GPU reset.",
    ),
    64: (
        "critical",
        "ECC page retirement / row remapping failure",
        "The GPU could not remap a failing row: drain the node and RMA the GPU.",
    ),
    74: (
        "critical",
        "NVLink error",
        "Check `nvidia-smi nvlink -s` / `-e`; reseat or RMA the GPU/baseboard if it recurs.",
    ),
    79: (
        "critical",
        "GPU has fallen off the bus",
        "Drain the node; check PCIe link (`lspci -vvv`), power and thermals in the BMC log; reboot; RMA if it recurs.",
    ),
    92: (
        "major",
        "high single-bit ECC error rate",
        "Watch `nvidia-smi -q -d ECC`; schedule a reset and diagnostics (`dcgmi diag -r 3`).",
    ),
    94: (
        "major",
        "contained ECC error",
        "The affected application must restart; the GPU keeps running.",
    ),
    95: (
        "critical",
        "uncontained ECC error",
        "All applications on the GPU are affected: drain and reset the GPU.",
    ),
    119: (
        "critical",
        "GSP RPC timeout",
        "Update the driver; as a workaround some drivers allow disabling GSP firmware (NVreg_EnableGpuFirmware=0).",
    ),
    120: ("critical", "GSP error", "Update the driver; reset the GPU."),
}


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("dmesg"):
        return NotEvaluated(NAME, "needs the kernel log (dmesg)")
    df = ctx.query(
        """SELECT * FROM (SELECT ts, kind, pid, comm, source_file, line_no, message,
                  -- the parser's fields, else read from the line itself (a malformed bus id)
                  coalesce(xid_code, TRY_CAST(nullif(regexp_extract(message, 'Xid [(][^)]*[)]: ([0-9]+)', 1), '') AS BIGINT)) AS xid_code,
                  coalesce(pci_bus, nullif(regexp_extract(message, 'Xid [(](PCI:)?([^)]*)[)]', 2), '')) AS pci_bus,
                  row_number() OVER (PARTITION BY ts, xid_code, pci_bus, message ORDER BY source_file LIKE 'series/%' DESC, source_file) AS k
           FROM dmesg WHERE kind IN ('xid', 'gpu_fallen_off_bus') AND ts IS NOT NULL) WHERE k = 1 ORDER BY ts"""
    ).to_dicts()
    groups: list[list[dict]] = []
    for row in df:
        row["code"] = 79 if row["kind"] == "gpu_fallen_off_bus" else row["xid_code"]
        g = next(
            (
                g
                for g in groups
                if g[0]["pci_bus"] == row["pci_bus"]
                and row["ts"] - g[-1]["ts"] <= timedelta(seconds=T["group_s"])
            ),
            None,
        )
        if g is None:
            groups.append([row])
        else:
            g.append(row)
    return [_finding(ctx, g) for g in groups]


_UNKNOWN = (
    "major",
    "Xid error",
    "Look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors).",
)
_ORDER = ["info", "minor", "major", "critical"]


def _finding(ctx: Context, g: list[dict]) -> Finding:
    """One finding for the Xids of one GPU within a minute (13 then 43 is one incident)."""
    codes = list(dict.fromkeys(x["code"] for x in g))
    info = {c: CODES.get(c, _UNKNOWN) if c is not None else _UNKNOWN for c in codes}
    code = max(codes, key=lambda c: _ORDER.index(info[c][0]))  # the worst one names it
    sev, meaning, _ = info[code]
    bus, t0, t1 = g[0]["pci_bus"] or "?", g[0]["ts"], g[-1]["ts"]
    others = [str(c) for c in codes if c != code]
    also = f" (then Xid {', '.join(others)})" if others else ""
    who = next((f"{x['comm']} (pid {x['pid']})" for x in g if x.get("comm")), None)
    return Finding(
        key="GPU_XID",
        kind=NAME,
        title=f"GPU error Xid {code} ({meaning}) on {bus}{also}",
        severity=sev,
        start=second_of(t0),  # whole seconds: the signals grid
        end=second_of(t1) + timedelta(seconds=1),
        summary=f"The NVIDIA driver reported Xid {code} ({meaning}){also} on GPU {bus}, {len(g)} line(s) from {hhmmss(t0)} UTC"
        + (f", process {who}" if who else "")
        + ".",
        impact={"xid_events": len(g), "xid_codes": codes},
        evidence=[
            *(
                Evidence("xid_code", float(c) if c is not None else None, None, "", info[c][1])
                for c in codes
            ),
            Evidence("events", float(len(g)), None, "count", f"GPU {bus}"),
        ],
        log_lines=[
            ln for x in g[:20] for ln in ctx.log_lines(x["source_file"], line_no=int(x["line_no"]))
        ],
        remediation=[
            *dict.fromkeys(info[c][2] for c in codes),
            "Collect `nvidia-bug-report.sh` from the host before rebooting it.",
        ],
    )
