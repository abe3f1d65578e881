"""The parser registry: tool name -> parser module (see `analyzer/parsers/base.py`).

One line per tool. The sniffer asks every module here; the store and docs/tables.md use
their declared ``TABLES``. Keep it a plain literal.
"""

from types import ModuleType

from analyzer.parsers import (
    app_log,
    app_metrics,
    bpftrace,
    buddyinfo,
    cgroup,
    containers,
    df,
    dmesg,
    host_config,
    interrupts,
    iostat,
    meminfo,
    mpstat,
    nvidia_dmon,
    nvidia_smi_q,
    pidstat,
    proc_cgroup,
    proc_vmstat,
    processes,
    psi,
    py_spy,
    sadf,
    sar,
    stacks,
    vmstat,
)

PARSERS: dict[str, ModuleType] = {
    "vmstat": vmstat,
    "psi": psi,
    "iostat": iostat,
    "mpstat": mpstat,
    "cgroup": cgroup,
    "proc_meminfo": meminfo,
    "proc_vmstat": proc_vmstat,
    "pidstat": pidstat,
    "dmesg": dmesg,
    "nvidia_dmon": nvidia_dmon,
    "nvidia_smi_q": nvidia_smi_q,
    "bpftrace": bpftrace,
    "sar": sar,
    "sadf": sadf,
    "host_config": host_config,
    "ps": processes,
    "df": df,
    "interrupts": interrupts,
    "buddyinfo": buddyinfo,
    "app_metrics": app_metrics,
    "app_log": app_log,
    "proc_cgroup": proc_cgroup,
    "containers": containers,
    "stacks": stacks,
    "py_spy": py_spy,
}
