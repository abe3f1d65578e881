"""NVIDIA Xid errors and GPUs falling off the bus, from the kernel log.

Repeats of one code on one GPU within a minute form one finding. Severity and advice come
from the code (NVIDIA's Xid catalog: docs.nvidia.com/deploy/xid-errors).
"""

from __future__ import annotations

from datetime import timedelta

from analyzer.detectors._base import Context, hhmmss
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
        """SELECT * FROM (SELECT ts, kind, xid_code, pci_bus, pid, comm, source_file, line_no, message,
                  row_number() OVER (PARTITION BY ts, xid_code, pci_bus, message ORDER BY source_file LIKE 'series/%' DESC, source_file) AS k
           FROM dmesg WHERE kind IN ('xid', 'gpu_fallen_off_bus') AND ts IS NOT NULL) WHERE k = 1 ORDER BY ts"""
    ).to_dicts()
    groups: list[list[dict]] = []
    for row in df:
        code = 79 if row["kind"] == "gpu_fallen_off_bus" else row["xid_code"]
        row["code"] = code
        g = next(
            (
                g
                for g in groups
                if g[0]["code"] == code
                and g[0]["pci_bus"] == row["pci_bus"]
                and row["ts"] - g[-1]["ts"] <= timedelta(seconds=T["group_s"])
            ),
            None,
        )
        if g is None:
            groups.append([row])
        else:
            g.append(row)
    out = []
    for g in groups:
        code, bus, t0, t1 = g[0]["code"], g[0]["pci_bus"] or "?", g[0]["ts"], g[-1]["ts"]
        sev, meaning, todo = CODES.get(
            code,
            (
                "major",
                "Xid error",
                "Look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors).",
            ),
        )
        who = next((f"{x['comm']} (pid {x['pid']})" for x in g if x.get("comm")), None)
        out.append(
            Finding(
                key="GPU_XID",
                kind=NAME,
                title=f"GPU error Xid {code} ({meaning}) on {bus}",
                severity=sev,
                start=t0,
                end=t1 + timedelta(seconds=1),
                summary=f"The NVIDIA driver reported Xid {code} ({meaning}) on GPU {bus} {len(g)} time(s) from {hhmmss(t0)} UTC"
                + (f", process {who}" if who else "")
                + ".",
                impact={"xid_events": len(g)},
                evidence=[
                    Evidence(
                        "xid_code", float(code) if code is not None else None, None, "", meaning
                    ),
                    Evidence("events", float(len(g)), None, "count", f"GPU {bus}"),
                ],
                log_lines=[
                    ln
                    for x in g[:20]
                    for ln in ctx.log_lines(
                        f"source_file = '{x['source_file']}' AND line_no = {int(x['line_no'])}"
                    )
                ],
                remediation=[
                    todo,
                    "Collect `nvidia-bug-report.sh` from the host before rebooting it.",
                ],
            )
        )
    return out
