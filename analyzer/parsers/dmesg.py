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

from analyzer.errors import ParseError
from analyzer.parsers import base
from analyzer.parsers._dmesg_classify import classify
from analyzer.parsers._dmesg_clock import place_on_clock
from analyzer.parsers._dmesg_tokens import (
    ANSI_RE,
    json_lines,
    pri_facility,
    pri_level,
    tokenize_text,
)

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
    """Parse one kernel log file into the `dmesg` table (see module docstring)."""
    cov = base.Coverage()
    if base.needs_utf8_repair(path):
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced by U+FFFD")
    head = base.read_head(path, 4096)
    all_lines = base.read_lines(path)
    cov.total = int(all_lines.select(pl.len()).collect().item())
    cov.add_skipped("beyond max_lines", max(0, cov.total - ctx.max_lines))
    lines = all_lines.filter(pl.col("line_no") <= ctx.max_lines)
    if re.match(r'\s*\{\s*"dmesg"\s*:', head):
        rows = _json(lines, cov)
    else:
        syz = bool(re.match(r"TITLE: ", head))
        rows = _text(lines, cov, syz, ctx.max_line_bytes)
        kernelish = rows["stamped"].any() or rows["message"].str.contains(_WORDS).any()
        if rows.height and not kernelish:
            raise ParseError(f"{path.name}: no kernel log timestamps and no kernel messages")
    rows = place_on_clock(rows, ctx, cov)
    rows = classify(rows)
    out = TABLES["dmesg"].conform(rows).collect()
    meta: dict[str, object] = {}
    kernel = out["message"].str.extract(r"^Linux version (\S+)", 1).drop_nulls()
    if len(kernel):
        meta["kernel"] = kernel[0]
    if (
        out.height
        and out["ts"].null_count() == out.height
        and out["uptime_s"].null_count() < out.height
    ):
        cov.notes.append("raw uptimes only and ctx.boot_time unknown: ts is NULL")
    return base.ParseResult(tables={"dmesg": out}, coverage=cov, meta=meta)


def _account(cov: base.Coverage, roles: pl.Series) -> None:
    for role, n in roles.value_counts().iter_rows():
        if role in ("row", "cont"):
            cov.parsed += n
        elif role.startswith("structure:"):
            cov.add_structure(role.removeprefix("structure:"), n)
        else:
            cov.add_skipped(role.removeprefix("skip:"), n)


def _text(lines: pl.LazyFrame, cov: base.Coverage, syz: bool, max_bytes: int) -> pl.DataFrame:
    df = tokenize_text(lines, syz, max_bytes)
    _account(cov, df["role"])
    df = df.filter(pl.col("role").is_in(["row", "cont"]))
    is_cont = pl.col("role") == "cont"
    kpri = pl.col("kpri").cast(I64, strict=False)
    ppri = pl.col("pri").cast(I64, strict=False)
    stamps = pl.col("stamps").fill_null("")
    width = (pl.col("line").str.len_chars() - pl.col("msg").str.len_chars()).cast(I64)
    df = df.with_columns(
        is_cont.alias("is_cont"),
        is_cont.not_().cast(I64).cum_sum().alias("rec"),
        pl.coalesce(
            pri_facility(kpri),
            pri_facility(ppri),
            pl.col("fac"),
            pl.when(pl.col("ident") == "kernel").then(pl.lit("kern")),
        ).alias("facility"),
        pl.coalesce(pri_level(kpri), pri_level(ppri), pl.col("lvl")).alias("level"),
        pl.coalesce(
            pl.col("kextra").str.extract(r"caller=([TC]\d+)", 1),
            stamps.str.extract(r"\[\s*([TC]\d+)\]", 1),
        ).alias("caller"),
        pl.col("kseq").cast(I64, strict=False).alias("seq"),
        pl.coalesce(
            (pl.col("kusec").cast(F64, strict=False) / 1e6).round(6),
            stamps.str.extract(r"\[\s*(\d+\.\d+)(?:\s*<|\])", 1).cast(F64, strict=False),
        ).alias("uptime_s"),
        stamps.str.extract(r"<\s*(\d+\.\d+)>", 1).cast(F64, strict=False).alias("delta_s"),
        stamps.str.extract_groups(
            r"\[(?P<cwday>[^\s\[\]]+) +(?P<cmon>[^\s\[\]]+) +(?P<cday>\d{1,2}) "
            r"(?P<chms>\d\d:\d\d:\d\d) (?P<cyear>\d{4})"
        ).alias("_c"),
        stamps.str.extract(
            r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z))", 1
        ).alias("iso"),
        pl.col("kmsg").is_not_null().alias("is_kmsg"),
        pl.when(pl.col("kmsg").is_null()).then(width).alias("_width"),
    ).unnest("_c")
    # Index of each line's record start: continuation lines copy fields from it (gather).
    start = pl.when(~is_cont).then(pl.int_range(pl.len())).forward_fill().fill_null(0)
    df = df.with_columns(start.alias("_start"))
    w = pl.col("_width").gather(pl.col("_start"))
    line = pl.col("line")
    cont_msg = (
        pl.when(line.str.slice(0, w).str.strip_chars() == "")
        .then(line.str.slice(w))
        .otherwise(line.str.strip_chars_start())
    )
    message = (
        pl.when(is_cont)
        .then(cont_msg)
        .when(pl.col("kmsg").is_not_null())
        .then(pl.col("kmsg").str.replace_all(r"\x5c", "\\", literal=True))
        .otherwise(pl.col("msg"))
    )
    inherit = [
        "facility",
        "level",
        "caller",
        "seq",
        "uptime_s",
        "cmon",
        "cday",
        "chms",
        "cyear",
        "iso",
        "smon",
        "sday",
        "shms",
        "siso",
        "ident",
        "is_kmsg",
    ]
    df = df.with_columns(message.alias("message")).with_columns(
        pl.col(c).gather(pl.col("_start")) for c in inherit
    )
    return df.with_columns(
        pl.col("line_no").cast(I64),
        pl.when(~pl.col("is_cont"))
        .then(
            pl.coalesce(
                pl.col("kusec"), pl.col("iso"), stamps.str.extract(r"\[\s*(\d+\.\d+)(?:\s*<|\])", 1)
            )
        )
        .alias("stamp_key"),
    )


def _json(lines: pl.LazyFrame, cov: base.Coverage) -> pl.DataFrame:
    df = json_lines(lines)
    field = pl.col("key").is_not_null() & ~pl.col("struct")
    has_msg = (pl.col("key") == "msg").any().over("rec")
    role = (
        pl.when(pl.col("struct"))
        .then(pl.lit("structure:json syntax"))
        .when(field & has_msg)
        .then(pl.lit("row"))
        .when(field)
        .then(pl.lit("skip:json record without msg"))
        .when(pl.col("line").str.strip_chars() == "")
        .then(pl.lit("structure:blank"))
        .otherwise(pl.lit("skip:not dmesg --json syntax"))
    )
    df = df.with_columns(role.alias("role"))
    _account(cov, df["role"])

    def val(key: str) -> pl.Expr:
        return pl.col("val").filter(pl.col("key") == key).first()

    recs = (
        df.filter(pl.col("role") == "row")
        .group_by("rec", maintain_order=True)
        .agg(
            pl.col("line_no").filter(pl.col("key") == "msg").first().cast(I64),
            val("pri").cast(I64, strict=False).alias("_pri"),
            val("time").alias("_time"),
            _json_str(val("caller")).alias("caller"),
            _json_str(val("msg")).alias("message"),
        )
    )
    time = pl.col("_time")
    iso = _json_str(time)
    return recs.with_columns(
        pri_facility(pl.col("_pri")).alias("facility"),
        pri_level(pl.col("_pri")).alias("level"),
        time.cast(F64, strict=False).alias("uptime_s"),
        pl.when(time.str.starts_with('"')).then(iso).alias("iso"),
        pl.lit(False).alias("is_cont"),
        pl.col("rec").alias("rec"),
        pl.when(time.str.starts_with('"')).then(iso).otherwise(time).alias("stamp_key"),
    )


_JSON_STR = r'^"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*"$'


def _json_str(expr: pl.Expr) -> pl.Expr:
    """Decode a JSON string literal; anything else (hostile input) is kept as printed."""
    valid = expr.str.contains(_JSON_STR)
    return pl.coalesce(pl.when(valid).then(expr).str.json_decode(S), expr)
