"""Kernel log (`dmesg`, `/dev/kmsg`, syslog/journal kernel lines) -> table `dmesg`.

Supported input (util-linux dmesg 2.2x-2.40, busybox dmesg, kernel console logs):

- raw `[  748.543172] msg` (default), `-r` (`<4>[  748.543172] msg`), `-x`/`--decode`
  (`kern  :warn  : [  748.543172] msg`), `-T`/`--ctime` (`[Sun Nov 29 17:25:08 2026] msg`,
  weekday/month names localised, e.g. de_DE `[So Nov 29 ...]`), `--time-format iso`
  (`2026-11-29T17:25:08,543172+00:00 msg`), `--show-delta` / `--time-format delta`
  (`[<  747.176843>]`, `[  1.000000 <  0.000000>]`), several `--time-format`s at once,
  `--reltime` (`[Feb13 23:31]`, `[  +0.000000]`: no absolute time), `--color=always` (ANSI
  codes are removed), printk caller ids (`[  610.334229][ T1478]`, `[    T1]`), `--json`
  (pretty-printed `{"dmesg": [{"pri":..,"time":..,"caller":..,"msg":..}]}`).
- `/dev/kmsg` records `6,3964,206764307,-;msg` (`,caller=T1` too); NUL separators and
  ` KEY=value` dictionary lines of the util-linux `.bin` dumps (structure). `\\x5c` in kmsg
  text is unescaped to a backslash; other `\\xNN` escapes are kept as printed.
- syslog / journalctl kernel lines `Jan 28 19:58:45 host kernel: [  455.498827] msg`, host
  optional, `-o short-iso` stamps, `-- Boot <id> --` separators (structure). Lines of other
  programs in the same log are skipped with a reason.
- message-only text (no timestamps at all: node-problem-detector, pasted reports, syzkaller
  console logs whose `TITLE:`/`TYPE:` metadata header before the first blank line is
  structure).

Clock (`ts`, `ts_source`): ISO stamps carry their offset ('iso'); `-T` ctime and syslog times
are local time, read in `ctx.tz` (UTC + a coverage note when unknown); syslog lines have no
year: `ctx.capture_start`'s year is used (one year earlier for dates after the capture), else
ts is NULL ('syslog' rows with NULL ts + note). Raw uptimes go on the wall clock only when
`ctx.boot_time` is known ('boot+uptime', 'kmsg+boot'); not for syslog-wrapped lines, which can
come from earlier boots. Unstamped continuation lines of a multi-line record inherit the
record's clock, level and caller.

Events: every row has `event_id`; an event opens at a classified report line (OOM
invocation, hung task, Xid, ...) or at any unrelated line, and goes on over continuation
lines, lines sharing the same sub-second stamp and report-body lines (stack frames,
registers, Mem-Info, memcg stats, task tables, `oom-kill:` summary, `Killed process`).
`kind` is set on the line that states the fact (first line of the event for starters; the
`Killed process` line for 'oom_kill'); `event_kind` is the first kind in the event.

Bounds (docs/limits.md "Kernel log"): a line whose stamp cannot be real (an uptime that is
not 0..100 years of seconds, a date that does not exist or lies outside 1970..2199) is
skipped, reason 'timestamp out of range', and costs nothing else; an event holds at most
10 000 lines, a record 1 000 continuation lines, a JSON record 16 lines. The file is read
block by block and its rows go to ``ctx.sink`` as they are finished (`_dmesg_stream`):
memory is a few blocks whatever the file size.

Sample (`dmesg`, kernel 6.18, memcg OOM)::

    [  748.543172] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
    [  748.543309] CPU: 0 UID: 0 PID: 24288 Comm: python3 Not tainted 6.18.44-fc-v669 #1
    [  748.543328] Call Trace:
    [  748.556747]  <TASK>
    [  748.560840] Memory cgroup stats for /corpus_oom:
    [  748.561076] oom-kill:constraint=CONSTRAINT_MEMCG,...,task_memcg=/corpus_oom,task=python3,pid=24288,uid=0
    [  748.561100] Memory cgroup out of memory: Killed process 24288 (python3) total-vm:85460kB, anon-rss:65280kB, ...
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.parsers import _dmesg_stream, _read, base
from analyzer.parsers._dmesg_tokens import ANSI_RE

S, I64, F64 = pl.String, pl.Int64, pl.Float64

TABLES: dict[str, base.Table] = {
    "dmesg": base.table(
        "one row per kernel log line (continuation lines of multi-line records included)",
        ("ts", base.TS, "", "wall-clock time of the record (UTC); NULL when it cannot be known"),
        ("ts_source", S, "", "how ts was found: iso, ctime, syslog, boot+uptime, kmsg+boot, NULL"),
        ("uptime_s", F64, "s", "seconds since boot as printed by the kernel ([sec.usec], kmsg)"),
        ("delta_s", F64, "s", "seconds since the previous record (dmesg --show-delta)"),
        ("facility", S, "", "syslog facility (kern, user, daemon, ...) when printed"),
        ("level", S, "", "log level emerg, alert, crit, err, warn, notice, info, debug"),
        ("caller", S, "", "printk caller id: thread T<pid> or CPU C<n> (CONFIG_PRINTK_CALLER)"),
        ("seq", I64, "", "/dev/kmsg sequence number"),
        ("event_id", I64, "", "groups the lines of one report (OOM, hung task, Xid block, ...)"),
        (
            "kind",
            S,
            "",
            "classified fact on this line: oom_invoked, oom_kill, hung_task, xid, "
            "gpu_fallen_off_bus, io_error, segfault, soft_lockup, rcu_stall, mce, panic, oops",
        ),
        ("event_kind", S, "", "first kind found in this line's event"),
        ("message", S, "", "the line's text without its timestamp/priority prefix, verbatim"),
        ("line_no", I64, "", "1-based line number in the input file"),
        ("pid", I64, "", "process id: OOM victim, hung task, Xid pid=, segfault, soft lockup"),
        ("comm", S, "", "process name: OOM victim/invoker, hung task, Xid name=, segfault"),
        ("uid", I64, "", "user id of the OOM victim (UID: or the oom-kill summary's uid=)"),
        ("memcg", S, "", "OOM victim's memory cgroup (summary task_memcg= or 'Task in X')"),
        ("oom_constraint", S, "", "OOM constraint: CONSTRAINT_MEMCG, CONSTRAINT_NONE, ..."),
        ("total_vm_kb", I64, "kB", "OOM victim total-vm"),
        ("anon_rss_kb", I64, "kB", "OOM victim anon-rss"),
        ("file_rss_kb", I64, "kB", "OOM victim file-rss"),
        ("shmem_rss_kb", I64, "kB", "OOM victim shmem-rss"),
        ("xid_code", I64, "", "NVIDIA Xid error code"),
        ("pci_bus", S, "", "GPU PCI address domain:bus:device, lower case (0000:9b:00)"),
        ("device", S, "", "block/NVMe device of an io_error (nvme0n1, nvme0, sda)"),
        ("blocked_s", I64, "s", "hung task: blocked for more than N s; soft lockup: stuck N s"),
    )
}

_STAMP = (
    r"(?m)^(?:<\d{1,3}>)?(?:[a-z0-9]+ *:[a-z]+ *: )?(?:\[\s*\d+\.\d{3,9}(?:\]| <)|\[<\s*\d+\.\d+>\]"
    r"|\[\S+ +\S+ +\d{1,2} \d\d:\d\d:\d\d \d{4}\]|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d "
    r"|\[[A-Z][a-z]{2} ?\d{1,2} \d\d:\d\d\] |\[\s*\+\d+\.\d{6}\] )"
)
_KMSG = r"(?m)^\d{1,4},\d+,\d+,[-c+]?[,;]"
_SYSLOG = (
    r"(?m)^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)) (?:\S+ )?kernel: "
)
_WORDS = (
    r"invoked oom-killer|Out of memory: Kill|Killed process \d+ \(|Call Trace:|NVRM: |"
    r"blocked for more than \d+ seconds|segfault at [0-9a-f]+ ip|BUG: soft lockup|Tainted: |"
    r"Not tainted|nvme nvme\d+: |I/O error, dev |Kernel panic - not syncing|^\s*\[<[0-9a-f]{8,16}>\]|"
    r"hung_task_timeout_secs|oom_reaper: |Memory cgroup out of memory"
)


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is a kernel log; message-only logs get a moderate score."""
    head = re.sub(ANSI_RE, "", head.replace("\x00", "\n"))
    lines = [ln for ln in head.splitlines()[:400] if ln.strip()]
    if not lines:
        return 0.0
    text = "\n".join(lines)
    if re.match(r'\s*\{\s*"dmesg"\s*:\s*\[', text):
        return 0.95
    n = len(lines)
    hits = max(
        len(re.findall(_STAMP, text)), len(re.findall(_KMSG, text)), len(re.findall(_SYSLOG, text))
    )
    if hits >= max(1, n // 2):
        return 0.9
    words = sum(1 for ln in lines if re.search(_WORDS, ln))
    if hits and words:
        return 0.75
    if hits >= 3 or (words and 2 * words >= n):
        return 0.6
    return 0.5 if words >= 2 else 0.3 if words else 0.0


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one kernel log file into the `dmesg` table (see module docstring), block by
    block: rows go to ``ctx.sink`` when there is one (`_dmesg_stream`)."""
    head = _read.read_head(path, 4096)
    is_json = re.match(r'\s*\{\s*"dmesg"\s*:', head) is not None
    syz = not is_json and re.match(r"TITLE: ", head) is not None
    log = _dmesg_stream.Log(TABLES["dmesg"], is_json, syz, _WORDS)
    return _dmesg_stream.parse(path, ctx, log)
