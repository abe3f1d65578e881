"""NVIDIA Xid errors and GPUs falling off the bus, from the kernel log.

Xid lines of one GPU within a minute of each other form one finding (13 followed by 43 is
one incident: the exception, then the channel it killed), named after its worst code. Severity and advice come
from the code (NVIDIA's Xid catalog: docs.nvidia.com/deploy/xid-errors).

A storm — more than ``storm_lines`` Xid lines, or more than ``storm_findings`` such
incidents — is one finding (`analyzer.detectors._storm`): counts per code and per GPU, the
span, the worst code, a bounded sample of log lines. Every line stays in table ``dmesg``.
"""

from __future__ import annotations

from datetime import timedelta

from analyzer.detectors import _storm
from analyzer.detectors._base import Context, hhmmss, second_of
from analyzer.detectors._storm import sample_lines, top_values
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "gpu_xid"
INPUTS = ("dmesg lines classified xid / gpu_fallen_off_bus",)
THRESHOLDS = {"group_s": 60, "storm_lines": 200, "storm_findings": 20}
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


# One row per Xid line (the same line in two files once), its code (79 for a GPU fallen
# off the bus) and bus from the parser, else read from the line itself (a malformed bus id).
XIDS = """SELECT *, CASE WHEN kind = 'gpu_fallen_off_bus' THEN 79 ELSE xid_code END AS code FROM (
            SELECT * FROM (SELECT ts, kind, pid, comm, source_file, line_no, message,
                  coalesce(xid_code, TRY_CAST(nullif(regexp_extract(message, 'Xid [(][^)]*[)]: ([0-9]+)', 1), '') AS BIGINT)) AS xid_code,
                  coalesce(pci_bus, nullif(regexp_extract(message, 'Xid [(](PCI:)?([^)]*)[)]', 2), '')) AS pci_bus,
                  row_number() OVER (PARTITION BY ts, xid_code, pci_bus, message ORDER BY source_file LIKE 'series/%' DESC, source_file) AS k
            FROM dmesg WHERE kind IN ('xid', 'gpu_fallen_off_bus') AND ts IS NOT NULL) WHERE k = 1)"""


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("dmesg"):
        return NotEvaluated(NAME, "needs the kernel log (dmesg)")
    n = int(ctx.query("SELECT count(*) AS n FROM (" + XIDS + ")")["n"][0])
    if n > T["storm_lines"]:
        return [_storm_finding(ctx, n)]
    groups: list[list[dict]] = []
    latest: dict[object, list[dict]] = {}  # bus -> its latest group: the only one a line can join
    for row in ctx.query(XIDS + " ORDER BY ts").to_dicts():
        g = latest.get(row["pci_bus"])
        if g is None or row["ts"] - g[-1]["ts"] > timedelta(seconds=T["group_s"]):
            g = latest[row["pci_bus"]] = []
            groups.append(g)
        g.append(row)
    if len(groups) > T["storm_findings"]:
        return [_storm_finding(ctx, n)]
    return [_finding(ctx, g) for g in groups]


_UNKNOWN = (
    "major",
    "Xid error",
    "Look the code up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors).",
)
_ORDER = ["info", "minor", "major", "critical"]


def _worst(codes: list[int | None]) -> int | None:
    """The code with the worst severity (the first of them on a tie)."""
    return max(codes, key=lambda c: _ORDER.index(_info(c)[0]))


def _info(code: int | None) -> tuple[str, str, str]:
    return CODES.get(code, _UNKNOWN) if code is not None else _UNKNOWN


def _finding(ctx: Context, g: list[dict]) -> Finding:
    """One finding for the Xids of one GPU within a minute (13 then 43 is one incident)."""
    codes = list(dict.fromkeys(x["code"] for x in g))
    info = {c: _info(c) for c in codes}
    code = _worst(codes)  # the worst one names it
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


# The lines of XIDS cut into incidents: a line more than $gap seconds after the last one of
# its GPU opens a new one (``grp``).
INCIDENTS = """SELECT *, sum(CAST(prev IS NULL OR ts - prev > to_seconds($gap) AS INTEGER))
                 OVER (ORDER BY pci_bus NULLS FIRST, ts, source_file, line_no) AS grp
               FROM (SELECT *, lag(ts) OVER (PARTITION BY pci_bus ORDER BY ts, source_file, line_no) AS prev
                     FROM (""" + XIDS + "))"  # fmt: skip


def _code_label(code: str) -> str:
    """'Xid 13 (graphics engine exception)' for a code as `top_values` names it."""
    meaning = _info(int(code))[1] if code.lstrip("-").isdigit() else _UNKNOWN[1]
    return f"Xid {code} ({meaning})"


def _storm_finding(ctx: Context, n: int) -> Finding:
    """One finding for the ``n`` Xid lines of a storm (see the module doc)."""
    facts = ctx.query(
        "SELECT min(ts) AS t0, max(ts) AS t1, count(DISTINCT grp) AS incidents,"
        " count(DISTINCT coalesce(pci_bus, '?')) AS gpus,"
        " bool_or(code IS NULL OR NOT list_contains($known, code)) AS unknown"
        " FROM (" + INCIDENTS + ")",
        {"gap": int(T["group_s"]), "known": list(CODES)},
    ).row(0, named=True)
    known = ctx.query(
        "SELECT DISTINCT code FROM (" + XIDS + ") WHERE list_contains($known, code) ORDER BY code",
        {"known": list(CODES)},
    )["code"].to_list()
    codes: list[int | None] = [*known, *([None] if facts["unknown"] else [])]
    code = _worst(codes)
    sev = _info(code)[0]
    t0, t1 = facts["t0"], facts["t1"]
    by_code = top_values(ctx, "SELECT code AS name, 1 AS n FROM (" + XIDS + ")")
    by_gpu = top_values(ctx, "SELECT pci_bus AS name, 1 AS n FROM (" + XIDS + ")")
    label = _code_label(str(code)) if code is not None else "an unknown Xid code"
    return Finding(
        key="GPU_XID",
        kind=NAME,
        title=f"{n:,} GPU Xid errors on {facts['gpus']:,} GPU(s), worst {label}",
        severity=sev,
        start=second_of(t0),
        end=second_of(t1) + timedelta(seconds=1),
        summary=f"The NVIDIA driver reported {n:,} Xid errors in {facts['incidents']:,} "
        f"incident(s) from {hhmmss(t0)} to {hhmmss(t1)} UTC; per code "
        f"{_storm.counts(by_code)}; per GPU {_storm.counts(by_gpu)}; the worst is {label}.",
        impact={
            "xid_events": n,
            "xid_codes": [int(c) if c != "?" else None for c, _ in by_code.items],
            "gpus": int(facts["gpus"]),
            "incidents": int(facts["incidents"]),
        },
        evidence=[
            Evidence("events", float(n), None, "count", f"{facts['gpus']:,} GPU(s)"),
            *(
                Evidence("xid_lines", float(k), None, "count", _code_label(c))
                for c, k in by_code.items
            ),
            *_storm.evidence("gpu_lines", by_gpu),
        ],
        log_lines=sample_lines(ctx, XIDS),
        remediation=[
            *dict.fromkeys(_info(c)[2] for c in codes),
            "Collect `nvidia-bug-report.sh` from the host before rebooting it.",
        ],
        caveats=[_storm.caveat(n, "Xid lines", "table dmesg (kind 'xid' / 'gpu_fallen_off_bus')")],
    )
