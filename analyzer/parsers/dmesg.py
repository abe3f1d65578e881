"""Kernel log (`dmesg`, `/dev/kmsg`, syslog/journal kernel lines) -> table `dmesg`.

Input (util-linux dmesg 2.2x-2.40, busybox, kernel console logs): raw `[  748.543172] msg`,
`-r` (`<4>[...]`), `-x` (`kern  :warn  : [...]`), `-T` (`[Sun Nov 29 17:25:08 2026]`, month
names localised), `--time-format iso`, `--show-delta` (`[<  0.000000>]`), several formats at
once, `--reltime` (no absolute time), `--color=always` (ANSI removed), printk caller ids
(`[ T1478]`), `--json`; `/dev/kmsg` records `6,3964,206764307,-;msg` (`\\x5c` unescaped, NUL
separators and ` KEY=value` lines are structure); syslog / journalctl kernel lines (`Jan 28
19:58:45 host kernel: msg`, `-o short-iso`, `-- Boot <id> --` is structure; other programs'
lines are skipped); message-only text (syzkaller `TITLE:` headers are structure).

Clock (`ts`, `ts_source`): ISO stamps carry their offset; `-T` and syslog times are local,
read in `ctx.tz` (UTC + a note when unknown); syslog times take `ctx.capture_start`'s year
(the year before for dates after the capture; unknown: ts NULL + note); raw uptimes need
`ctx.boot_time` (not for syslog-wrapped lines, which may come from earlier boots).
Continuation lines inherit their record's clock, level and caller; otherwise ts is NULL.

Events (`_dmesg_events`): an event opens at a classified report line (OOM, hung task, Xid,
...) or an unrelated line and goes on over continuation lines, lines of the same sub-second
stamp and report-body lines (stack frames, registers, Mem-Info, `Killed process`, ...).
`kind` is on the line that states the fact, `event_kind` is the event's first kind.

Bounds (docs/limits.md "Kernel log"): an impossible stamp (uptime outside 0..100 years, a
date that does not exist or lies outside 1970..2199) skips its line ('timestamp out of
range'); an event holds at most 10 000 lines, a record 1 000 continuation lines, a JSON
record 16 lines.

Reading: block by block (`_blocks.Blocks`). Text is read twice: first the file's
`_TextFacts` (what a line's role depends on besides itself), then each block is tokenized,
placed on the clock, classified and grouped into events. The last event's lines are
carried over and parsed again with the next block, so the result is the one-block parse's.

Sample (`dmesg`, kernel 6.18, memcg OOM)::

    [  748.543172] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
    [  748.543309] CPU: 0 UID: 0 PID: 24288 Comm: python3 Not tainted 6.18.44-fc-v669 #1
    [  748.543328] Call Trace:
    [  748.561076] oom-kill:constraint=CONSTRAINT_MEMCG,...,task_memcg=/corpus_oom,task=python3,pid=24288,uid=0
    [  748.561100] Memory cgroup out of memory: Killed process 24288 (python3) total-vm:85460kB, anon-rss:65280kB, ...
"""

from __future__ import annotations

import re
import zoneinfo
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _dmesg_events, _read, _sampler, _sysstat, base

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

#: Continuation lines one record may have (a printk record is at most 1 KiB).
MAX_CONT_LINES = 1000
#: Lines of one `dmesg --json` record that are read (from the line that opens it).
MAX_JSON_RECORD_LINES = 16
#: Wall-clock times outside [TS_MIN, TS_MAX) are not believed.
TS_MIN, TS_MAX = datetime(1970, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC)
SKIP_RANGE = "skipped:timestamp out of range"
SKIP_CONT = f"skipped:continuation line beyond {MAX_CONT_LINES} lines of one record"
SKIP_JSON_LONG = f"skipped:json record longer than {MAX_JSON_RECORD_LINES} lines"

FACILITIES = [
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
    "authpriv", "ftp", "res0", "res1", "res2", "res3", "local0", "local1", "local2",
    "local3", "local4", "local5", "local6", "local7",
]  # fmt: skip
LEVELS = ["emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"]
_MONTHS = (
    "1 jan janv ene gen|2 feb févr fev fevr|3 mar mär mrt mars maerz|4 apr avr abr|5 may mai mei mag"
    "|6 jun juin giu|7 jul juil lug|8 aug août ago aou|9 sep sept set|10 oct okt ott out|11 nov"
    "|12 dec dez déc dic"
)
#: Abbreviated month names (C, de, fr, es, it, nl, pt locales) -> 1..12.
MONTHS = {n: int(g.split()[0]) for g in _MONTHS.split("|") for n in g.split()[1:]}
_UTC_NAMES = {"UTC", "UTC0", "GMT", "GMT0", "Etc/UTC", "Etc/GMT", "Z", "Universal", "Zulu"}

# Printk prefix tokens. Only the short prefix is matched with captures (capture engines
# are slow on whole lines); the message is the rest of the line, cut with str.slice.
_FAC, _LVL = "|".join(FACILITIES), "|".join(LEVELS)
_RAW = r"\[\s*\d+\.\d+(?:\s*<\s*\d+\.\d+>)?\]"
_DELTA = r"\[<\s*\d+\.\d+>\]"
_CTIME = r"\[[^\s\[\]]{1,12} +[^\s\[\]]{1,12} +\d{1,2} \d\d:\d\d:\d\d \d{4}(?:\s*<\s*\d+\.\d+>)?\]"
_RELMIN = r"\[[^\s\[\]\d]{2,8} ?\d{1,2} \d\d:\d\d\]"
_RELOFF = r"\[\s*[+-]\d+\.\d+\]"
_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)"
_TOKEN = rf"(?:{_RAW}|{_DELTA}|{_CTIME}|{_RELMIN}|{_RELOFF}|{_ISO}|\[\s*[TC]\d+\])"
_PRI = rf"^(?:<\d{{1,3}}>)?(?:(?:{_FAC}) *:(?:{_LVL}) *: )?"
PREFIX_HEAD = rf"({_PRI}(?:{_TOKEN} ?)*)"
PREFIX_PARTS = (
    rf"^(?:<(?P<pri>\d{{1,3}})>)?(?:(?P<fac>{_FAC}) *:(?P<lvl>{_LVL}) *: )?(?P<stamps>.*)$"
)
STAMP_HEAD = _PRI + _TOKEN  # a printk token right after the priority: the line is stamped
# `Jan 28 19:58:45 host kernel: msg` (host optional), or journalctl -o short-iso.
SYSLOG = (
    r"^(?:(?P<smon>[A-Z][a-z]{2}) +(?P<sday>\d{1,2}) (?P<shms>\d\d:\d\d:\d\d(?:\.\d+)?)"
    r"|(?P<siso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z))) "
    r"(?:(?P<host>[^\s\[\]:]+) )?(?P<ident>[^\s\[\]:]+)(?:\[\d+\])?: ?"
)
KMSG = r"^(?P<kpri>\d{1,4}),(?P<kseq>\d+),(?P<kusec>\d+),(?P<kflags>[^,;]*)(?P<kextra>,[^;]*)?;"
JOURNAL_SEP = r"^-- (?:Boot [0-9a-f]+|Logs begin at .*|Journal begins at .*|No entries|Reboot) --$"
ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
_SYSLOG_COLS = ("smon", "sday", "shms", "siso", "host", "ident")
_KMSG_COLS = ("kpri", "kseq", "kusec", "kflags", "kextra")

# Sniffing
_SNIFF_STAMP = (
    r"(?m)^(?:<\d{1,3}>)?(?:[a-z0-9]+ *:[a-z]+ *: )?(?:\[\s*\d+\.\d{3,9}(?:\]| <)|\[<\s*\d+\.\d+>\]"
    r"|\[\S+ +\S+ +\d{1,2} \d\d:\d\d:\d\d \d{4}\]|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d "
    r"|\[[A-Z][a-z]{2} ?\d{1,2} \d\d:\d\d\] |\[\s*\+\d+\.\d{6}\] )"
)
_SNIFF_KMSG = r"(?m)^\d{1,4},\d+,\d+,[-c+]?[,;]"
_SNIFF_SYSLOG = (
    r"(?m)^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)) (?:\S+ )?kernel: "
)
#: Words that make a file without a single stamp a kernel log.
WORDS = (
    r"invoked oom-killer|Out of memory: Kill|Killed process \d+ \(|Call Trace:|NVRM: |"
    r"blocked for more than \d+ seconds|segfault at [0-9a-f]+ ip|BUG: soft lockup|Tainted: |"
    r"Not tainted|nvme nvme\d+: |I/O error, dev |Kernel panic - not syncing|^\s*\[<[0-9a-f]{8,16}>\]|"
    r"hung_task_timeout_secs|oom_reaper: |Memory cgroup out of memory"
)


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is a kernel log; message-only logs get a moderate score."""
    head = re.sub(ANSI, "", head.replace("\x00", "\n"))
    lines = [ln for ln in head.splitlines()[:400] if ln.strip()]
    if not lines:
        return 0.0
    text = "\n".join(lines)
    if re.match(r'\s*\{\s*"dmesg"\s*:\s*\[', text):
        return 0.95
    n = len(lines)
    hits = max(len(re.findall(rx, text)) for rx in (_SNIFF_STAMP, _SNIFF_KMSG, _SNIFF_SYSLOG))
    if hits >= max(1, n // 2):
        return 0.9
    words = sum(1 for ln in lines if re.search(WORDS, ln))
    if hits and words:
        return 0.75
    if hits >= 3 or (words and 2 * words >= n):
        return 0.6
    return 0.5 if words >= 2 else 0.3 if words else 0.0


# --- the file, block by block ----------------------------------------------------------

_CARRIED_ROLES = ("row", "cont", SKIP_CONT)  # roles that depend on the lines before
# What `_dmesg_events.classify` and the carry read besides the table's own columns.
_ROW_COLS = {"rec", "is_cont", "stamp_key", "src_line", "_unknown_month"}


@dataclass
class _State:
    """What goes on from block to block (the clock's notes: each once, whatever the block)."""

    json: bool
    syz: bool  # a syzkaller report: its metadata header is structure
    facts: _TextFacts | None  # the whole file's, for text
    carry: pl.DataFrame | None = None  # lines (line_no, line) to parse again
    events: int = 0  # events handed over so far
    roles: Counter[str] = field(default_factory=Counter)  # role -> lines, as counted
    rows: int = 0
    ts_known: int = 0
    uptimes: int = 0
    kernel: str | None = None
    kernelish: bool = False
    ctime_zone: str | None = None
    unknown_month: int = 0
    syslog_no_year: bool = False
    syslog_zone: str | None = None


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one kernel log file into the `dmesg` table (see the module docstring)."""
    head = _read.read_head(path, 4096)
    is_json = re.match(r'\s*\{\s*"dmesg"\s*:', head) is not None
    syz = not is_json and re.match(r"TITLE: ", head) is not None
    blocks = scan = _blocks.Blocks(path)
    facts = None
    if not is_json:
        facts, n = _TextFacts(ctx.max_line_bytes), 0
        for block in scan:
            n += 1
            facts.add(block.lines.filter(pl.col("line_no") <= ctx.max_lines))
        # A file of one block keeps that block (and its split lines) for the second pass.
        blocks = [block] if n == 1 else _blocks.Blocks(path)
    # A text log without a single stamp is a kernel log only if some line says so.
    words = None if is_json or (facts is not None and facts.n_stamped) else WORDS
    state = _State(is_json, syz, facts)
    out = _blocks.Rows(ctx, TABLES)
    for block in blocks:
        lines = block.lines
        if state.carry is not None:
            lines = pl.concat([state.carry, lines])
        out.put({"dmesg": _hand_over(_block(lines, block.last, ctx, state), words, state)})
    if words is not None and state.rows and not state.kernelish:
        raise ParseError(f"{path.name}: no kernel log timestamps and no kernel messages")
    cov = base.Coverage()
    for role, n in state.roles.items():  # every line's role, counted once
        _sampler.count(cov, None if role in ("row", "cont") else role, n)
    if scan.repaired:
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced by U+FFFD")
    if state.ctime_zone:
        cov.notes.append(state.ctime_zone)
    if state.unknown_month:
        cov.notes.append(f"{state.unknown_month} ctime stamps with an unknown month name: ts NULL")
    if state.syslog_no_year:
        cov.notes.append("syslog/journal times carry no year and capture_start is unknown: ts NULL")
    if state.syslog_zone:
        cov.notes.append(state.syslog_zone)
    if state.rows and not state.ts_known and state.uptimes:
        cov.notes.append("raw uptimes only and ctx.boot_time unknown: ts is NULL")
    meta: dict[str, object] = {"kernel": state.kernel} if state.kernel else {}
    empty = TABLES["dmesg"].conform(pl.DataFrame()).collect()
    return base.ParseResult(tables=dict(out.tables({"dmesg": empty})), coverage=cov, meta=meta)


def _block(lines: pl.DataFrame, last: bool, ctx: base.ParseContext, state: _State) -> pl.DataFrame:
    """The finished rows of ``lines`` (the carried lines, then a block's); counts the
    roles of the lines that are not carried again and sets ``state.carry``."""
    beyond = pl.col("line_no") > ctx.max_lines
    state.roles["skipped:beyond max_lines"] += int(lines.select(beyond.sum()).item())
    lines = lines.filter(~beyond)
    if state.json:
        tok = _json_lines(lines)
        rows = _place_on_clock(_json_rows(tok), ctx, state)
        bad_recs = rows.filter(pl.col("_bad"))["rec"].implode()
        bad = pl.col("rec").is_in(bad_recs) & (pl.col("role") == "row")
        context = ~tok["capped"]
        open_from = int(tok["rec_line"][-1]) if tok.height else None
    else:
        assert state.facts is not None
        tok = _tokenize_text(lines, state.facts, state.syz)
        rows = _place_on_clock(_text_rows(tok), ctx, state)
        bad_lines = rows.filter(pl.col("_bad"))["line_no"].implode()
        bad = pl.col("line_no").cast(pl.Int64).is_in(bad_lines)
        context = tok["role"].is_in(_CARRIED_ROLES)
        open_from = None
    roles = tok.select(
        pl.col("line_no").cast(pl.Int64),
        pl.when(bad).then(pl.lit(SKIP_RANGE)).otherwise("role").alias("role"),
    )
    del tok  # the block's biggest frame: not needed from here on
    need = [c for c in rows.columns if c in _ROW_COLS or c in TABLES["dmesg"].schema]
    rows = _dmesg_events.classify(rows.filter(~pl.col("_bad")).select(need))
    carry_from = None
    if not last:
        starts = [open_from] if open_from is not None else []
        if rows.height:
            last_event = rows["event_id"][-1]
            starts.append(int(rows.filter(pl.col("event_id") == last_event)["src_line"].min()))
            rows = rows.filter(pl.col("event_id") < last_event)
        carry_from = min(starts) if starts else None
    keep = (roles["line_no"] >= (carry_from if carry_from is not None else 1 << 62)) & context
    state.carry = lines.filter(keep) if keep.any() else None
    state.roles.update(dict(roles.filter(~keep)["role"].value_counts().iter_rows()))
    return rows


def _hand_over(rows: pl.DataFrame, words: str | None, state: _State) -> pl.DataFrame:
    """``rows`` with event ids going on from the earlier blocks'; notes what the file-level
    facts need (rows, clocks, kernel version, and the kernel ``words`` when asked)."""
    if not rows.height:
        return rows
    rows = rows.with_columns(pl.col("event_id") + state.events)
    state.events = int(rows["event_id"].max())
    state.rows += rows.height
    state.ts_known += rows.height - rows["ts"].null_count()
    state.uptimes += rows.height - rows["uptime_s"].null_count()
    state.unknown_month += int(rows["_unknown_month"].sum())
    if state.kernel is None:
        kernel = rows["message"].str.extract(r"^Linux version (\S+)", 1).drop_nulls()
        state.kernel = kernel[0] if len(kernel) else None
    if words is not None and not state.kernelish:
        state.kernelish = bool(rows["message"].str.contains(words).any())
    return rows


# --- text lines: prefix fields, role ---------------------------------------------------


def _body(lines: pl.DataFrame, max_line_bytes: int) -> pl.LazyFrame:
    """``lines`` with ``line`` cleaned (ANSI codes removed; empty when longer than the
    bound, flagged ``toolong``), the syslog prefix fields (SYSLOG's groups, NULL when
    none), ``_slen`` (the prefix's length), ``body`` (the line without a kernel syslog
    prefix, NULL for other programs' lines) and ``stamped``: a syslog prefix, a
    /dev/kmsg record or a printk token right after the optional priority. Work a block
    does not need (no ESC byte, no syslog line) is left out; the columns are the same."""
    line = pl.col("line")
    toolong = line.str.len_bytes() > max_line_bytes
    has_esc = bool(lines["line"].str.contains("\x1b", literal=True).any())
    clean = line.str.replace_all(ANSI, "") if has_esc else line
    df = lines.with_columns(
        toolong.alias("toolong"), pl.when(toolong).then(pl.lit("")).otherwise(clean).alias("line")
    )
    is_syslog = line.str.contains(SYSLOG)
    if not df.select(is_syslog.any()).item():
        nulls = [pl.lit(None, pl.String).alias(c) for c in _SYSLOG_COLS]
        lf = df.lazy().with_columns(*nulls, pl.lit(None, pl.UInt32).alias("_slen"), body=line)
    else:
        lf = (
            df.lazy()
            .with_columns(
                pl.when(is_syslog).then(line).str.extract_groups(SYSLOG).alias("_sys"),
                pl.when(is_syslog)
                .then(line.str.extract(f"({SYSLOG})", 1).str.len_chars())
                .alias("_slen"),
            )
            .unnest("_sys")
            .with_columns(
                body=pl.when(pl.col("ident") == "kernel")
                .then(line.str.slice(pl.col("_slen")))
                .when(pl.col("ident").is_null())
                .then(line)
            )
        )
    body = pl.col("body")
    has = pl.col("ident").is_not_null() | body.str.contains(KMSG)
    return lf.with_columns(stamped=(has | body.str.contains(STAMP_HEAD)).fill_null(False))


@dataclass
class _TextFacts:
    """What the roles of a text log's lines depend on beyond the line itself (whole file).

    ``n_stamped``: lines with a stamp; ``n_bare``: unstamped, unindented, non-blank lines;
    ``has_kmsg``: some line is a /dev/kmsg record; ``first_blank`` / ``first_stamped``:
    line numbers (1-based) of the first blank and first stamped line, None when none.
    """

    max_line_bytes: int
    n_stamped: int = 0
    n_bare: int = 0
    has_kmsg: bool = False
    first_blank: int | None = None
    first_stamped: int | None = None

    @property
    def stamped_file(self) -> bool:
        """Timestamped log: unstamped lines are continuations or noise, not records."""
        return self.n_stamped > 0 and self.n_stamped >= self.n_bare

    def add(self, lines: pl.DataFrame) -> None:
        """Count the facts of some of the file's lines (``line_no``, ``line``), in order."""
        line, stamped = pl.col("line"), pl.col("stamped")
        blank = line.str.strip_chars() == ""
        got = (
            _body(lines, self.max_line_bytes)
            .select(
                stamped.sum().alias("n_stamped"),
                (~stamped & ~line.str.contains(r"^\s") & ~blank).sum().alias("n_bare"),
                pl.col("body").str.contains(KMSG).fill_null(False).any().alias("has_kmsg"),
                pl.col("line_no").filter(blank).min().cast(pl.Int64).alias("first_blank"),
                pl.col("line_no").filter(stamped).min().cast(pl.Int64).alias("first_stamped"),
            )
            .collect()
            .row(0, named=True)
        )
        self.n_stamped += got["n_stamped"]
        self.n_bare += got["n_bare"]
        self.has_kmsg = self.has_kmsg or got["has_kmsg"]
        self.first_blank = self.first_blank or got["first_blank"]
        self.first_stamped = self.first_stamped or got["first_stamped"]


def _tokenize_text(lines: pl.DataFrame, facts: _TextFacts, syz: bool) -> pl.DataFrame:
    """Every text line split into prefix fields and a message, with its ``role``: 'row',
    'cont', 'structure:<why>' or 'skipped:<why>'. Columns (strings unless noted): line_no,
    line, role, pri, fac, lvl, stamps, msg, kmsg, the syslog and kmsg fields, stamped."""
    lf = _body(lines, facts.max_line_bytes)
    body = pl.col("body")
    if facts.has_kmsg:
        lf = lf.with_columns(
            pl.when(body.str.contains(KMSG)).then(body).str.extract_groups(KMSG).alias("_k")
        ).unnest("_k")
    else:
        lf = lf.with_columns(pl.lit(None, pl.String).alias(c) for c in _KMSG_COLS)
    df = (
        lf.with_columns(body.str.extract(PREFIX_HEAD, 1).alias("_head"))
        .with_columns(
            pl.when(pl.col("kseq").is_not_null())
            .then(body.str.slice(body.str.find(";", literal=True) + 1))
            .alias("kmsg"),
            pl.when(pl.col("kseq").is_null() & (pl.col("_head") != ""))
            .then(pl.col("_head"))
            .str.extract_groups(PREFIX_PARTS)
            .alias("_p"),
            pl.when(pl.col("kseq").is_null())
            .then(body.str.slice(pl.col("_head").str.len_chars()))
            .alias("msg"),
        )
        .unnest("_p")
        .collect()
    )
    line, no = pl.col("line"), pl.col("line_no")
    meta = pl.lit(syz) & (no < (facts.first_blank or 0)) & line.str.contains(r"^[A-Z][A-Z_]*: ")
    seen_stamp = pl.lit(facts.first_stamped is not None) & (no >= (facts.first_stamped or 0))
    stamped_file = pl.lit(facts.stamped_file)
    role = pl.coalesce(
        pl.when(cond).then(pl.lit(role))
        for cond, role in [
            (pl.col("toolong"), "skipped:line longer than max_line_bytes"),
            (meta, "structure:syzkaller metadata header"),
            (line.str.strip_chars() == "", "structure:blank"),
            (line.str.contains(JOURNAL_SEP), "structure:journal separator"),
            (pl.col("ident") != "kernel", "skipped:syslog line from a non-kernel program"),
            (
                pl.lit(facts.has_kmsg) & line.str.contains(r"^ [A-Z][A-Z0-9_]*="),
                "structure:kmsg dictionary (KEY=value)",
            ),
            (pl.col("stamped"), "row"),
            (stamped_file & line.str.contains(r"^\s") & seen_stamp, "cont"),
            (stamped_file, "skipped:unstamped line in a timestamped log (not kernel output)"),
            (pl.lit(True), "row"),
        ]
    )
    df = df.with_columns(role.alias("role"))
    # One printk record is at most 1 KiB: longer runs of continuation lines are not one.
    is_cont = pl.col("role") == "cont"
    rank = is_cont.cast(pl.Int32).cum_sum().over((pl.col("role") == "row").cum_sum())
    too_many = is_cont & (rank > MAX_CONT_LINES)
    return df.with_columns(
        pl.when(too_many).then(pl.lit(SKIP_CONT)).otherwise("role").alias("role")
    )


def _pri_names(pri: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Syslog priority number -> (facility, level) names (pri >> 3, pri & 7)."""
    fac = (pri // 8).replace_strict(dict(enumerate(FACILITIES)), default=None, return_dtype=S)
    return fac, (pri % 8).replace_strict(dict(enumerate(LEVELS)), default=None, return_dtype=S)


def _text_rows(tok: pl.DataFrame) -> pl.DataFrame:
    """One untyped row per line of role 'row' or 'cont' of ``tok``: continuation lines
    inherit their record's clock, level and caller (``src_line``: the record's first
    line, the first line the row depends on)."""
    df = tok.filter(pl.col("role").is_in(("row", "cont")))
    is_cont = pl.col("role") == "cont"
    (kfac, klvl), (pfac, plvl) = (
        _pri_names(pl.col(c).cast(I64, strict=False)) for c in ("kpri", "pri")
    )
    stamps = pl.col("stamps").fill_null("")
    raw_up = stamps.str.extract(r"\[\s*(\d+\.\d+)(?:\s*<|\])", 1)
    width = (pl.col("line").str.len_chars() - pl.col("msg").str.len_chars()).cast(I64)
    df = df.with_columns(
        is_cont.alias("is_cont"),
        is_cont.not_().cast(I64).cum_sum().alias("rec"),
        pl.coalesce(
            kfac, pfac, pl.col("fac"), pl.when(pl.col("ident") == "kernel").then(pl.lit("kern"))
        ).alias("facility"),
        pl.coalesce(klvl, plvl, pl.col("lvl")).alias("level"),
        pl.coalesce(
            pl.col("kextra").str.extract(r"caller=([TC]\d+)", 1),
            stamps.str.extract(r"\[\s*([TC]\d+)\]", 1),
        ).alias("caller"),
        pl.col("kseq").cast(I64, strict=False).alias("seq"),
        pl.coalesce(
            (pl.col("kusec").cast(F64, strict=False) / 1e6).round(6), raw_up.cast(F64, strict=False)
        ).alias("uptime_s"),
        stamps.str.extract(r"<\s*(\d+\.\d+)>", 1).cast(F64, strict=False).alias("delta_s"),
        stamps.str.extract_groups(
            r"\[(?P<cwday>[^\s\[\]]+) +(?P<cmon>[^\s\[\]]+) +(?P<cday>\d{1,2}) "
            r"(?P<chms>\d\d:\d\d:\d\d) (?P<cyear>\d{4})"
        ).alias("_c"),
        stamps.str.extract(f"({_ISO})", 1).alias("iso"),
        pl.col("kmsg").is_not_null().alias("is_kmsg"),
        pl.when(pl.col("kmsg").is_null()).then(width).alias("_width"),
    ).unnest("_c")
    # Index of each line's record start: continuation lines copy fields from it (gather).
    start = pl.when(~is_cont).then(pl.int_range(pl.len())).forward_fill().fill_null(0)
    df = df.with_columns(start.alias("_start"))
    w, line = pl.col("_width").gather(pl.col("_start")), pl.col("line")
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
        "facility", "level", "caller", "seq", "uptime_s", "cmon", "cday", "chms", "cyear",
        "iso", "smon", "sday", "shms", "siso", "ident", "is_kmsg",
    ]  # fmt: skip
    df = df.with_columns(message.alias("message")).with_columns(
        pl.col(c).gather(pl.col("_start")) for c in inherit
    )
    return df.with_columns(
        pl.col("line_no").cast(I64),
        pl.col("line_no").gather(pl.col("_start")).cast(I64).alias("src_line"),
        pl.when(~pl.col("is_cont"))
        .then(pl.coalesce(pl.col("kusec"), pl.col("iso"), raw_up))
        .alias("stamp_key"),
    )


# --- dmesg --json ----------------------------------------------------------------------


def _json_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """Each line of `dmesg --json` output with its ``role`` ('row': a field of a record
    with a msg, as `_tokenize_text`'s roles) and its `"key": value` field. ``rec``
    numbers the records (a line ``{`` or ``},{`` opens one), ``rec_line`` is the line
    number of the line that opened the line's record (1 before the first), ``capped``
    marks lines `MAX_JSON_RECORD_LINES` or more after it (not read: util-linux prints a
    handful of fields per record)."""
    line = pl.col("line").str.strip_chars()
    struct = line.str.contains(r'^(?:\{|\}|\},\s*\{|\]|\],?|\}\s*\]|\{?\s*"dmesg"\s*:\s*\[)\s*,?$')
    start = line.str.contains(r"^(?:\},\s*)?\{$")
    rec_line = pl.when(start).then(pl.col("line_no")).forward_fill().fill_null(1).cast(I64)
    df = lines.with_columns(
        start.cast(I64).cum_sum().alias("rec"),
        rec_line.alias("rec_line"),
        struct.alias("struct"),
        line.str.extract(r'^"(\w+)"\s*:', 1).alias("key"),
        line.str.extract(r'^"\w+"\s*:\s*(.*?)\s*,?$', 1).alias("val"),
        (pl.col("line_no").cast(I64) - rec_line >= MAX_JSON_RECORD_LINES).alias("capped"),
    )
    field_ = pl.col("key").is_not_null() & ~pl.col("struct")
    read = field_ & ~pl.col("capped")
    has_msg = (read & (pl.col("key") == "msg")).any().over("rec")
    role = pl.coalesce(
        pl.when(cond).then(pl.lit(role))
        for cond, role in [
            (pl.col("struct"), "structure:json syntax"),
            (read & has_msg, "row"),
            (read, "skipped:json record without msg"),
            (field_, SKIP_JSON_LONG),
            (pl.col("line").str.strip_chars() == "", "structure:blank"),
            (pl.lit(True), "skipped:not dmesg --json syntax"),
        ]
    )
    return df.with_columns(role.alias("role"))


_JSON_STR = r'^"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*"$'


def _json_str(expr: pl.Expr) -> pl.Expr:
    """Decode a JSON string literal; anything else (hostile input) is kept as printed."""
    return pl.coalesce(pl.when(expr.str.contains(_JSON_STR)).then(expr).str.json_decode(S), expr)


def _json_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One untyped row per `dmesg --json` record with a msg field."""

    def val(key: str) -> pl.Expr:
        return pl.col("val").filter(pl.col("key") == key).first()

    recs = (
        df.filter(pl.col("role") == "row")
        .group_by("rec", maintain_order=True)
        .agg(
            pl.col("line_no").filter(pl.col("key") == "msg").first().cast(I64),
            pl.col("rec_line").first().alias("src_line"),
            val("pri").cast(I64, strict=False).alias("_pri"),
            val("time").alias("_time"),
            _json_str(val("caller")).alias("caller"),
            _json_str(val("msg")).alias("message"),
        )
    )
    time = pl.col("_time")
    iso = pl.when(time.str.starts_with('"')).then(_json_str(time))
    facility, level = _pri_names(pl.col("_pri"))
    return recs.with_columns(
        facility.alias("facility"),
        level.alias("level"),
        time.cast(F64, strict=False).alias("uptime_s"),
        iso.alias("iso"),
        pl.lit(False).alias("is_cont"),
        iso.otherwise(time).alias("stamp_key"),
    )


# --- the clock -------------------------------------------------------------------------


def _zone(tz: str | None, what: str) -> tuple[str, str | None]:
    """The zone to read local times in, and the note to make about it (None: none)."""
    if tz is None:
        return "UTC", f"{what} printed in local time and host timezone unknown: read as UTC"
    if tz in _UTC_NAMES:
        return "UTC", None
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return "UTC", f"unknown timezone {tz!r}: {what} read as UTC"
    return tz, None


def _naive(year: pl.Expr, month: pl.Expr, day: pl.Expr, hms: pl.Expr) -> pl.Expr:
    text = pl.concat_str(
        year.cast(S), pl.lit("-"), month.cast(S).str.zfill(2), pl.lit("-"),
        day.cast(S).str.zfill(2), pl.lit(" "), hms,
    )  # fmt: skip
    return text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)


def _iso_ts(expr: pl.Expr) -> pl.Expr:
    norm = expr.str.replace(",", ".", literal=True).str.replace(r"Z$", "+00:00")
    return norm.str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%z", time_zone="UTC", time_unit="us", strict=False
    )


def _month(expr: pl.Expr) -> pl.Expr:
    key = expr.str.to_lowercase().str.strip_chars_end(".")
    return key.replace_strict(MONTHS, default=None, return_dtype=pl.Int32)


def _place_on_clock(df: pl.DataFrame, ctx: base.ParseContext, notes: _State) -> pl.DataFrame:
    """Add `ts` (UTC), `ts_source`, `_bad` (the row's stamp is impossible or out of range)
    and `_unknown_month` (a ctime stamp whose month name is unknown: the caller counts
    the rows it keeps in ``notes.unknown_month``); the other notes go to ``notes``.

    Sources, best first: an ISO stamp with offset, a `-T` ctime stamp in local time, a
    syslog prefix in local time without a year, a raw uptime plus the boot time."""
    cols = ["iso", "cmon", "cday", "chms", "cyear", "smon", "sday", "shms", "siso", "ident"]
    df = df.with_columns(pl.lit(None, S).alias(c) for c in cols if c not in df.columns)
    if "is_kmsg" not in df.columns:
        df = df.with_columns(pl.lit(False).alias("is_kmsg"))
    iso_ts = _iso_ts(pl.col("iso"))
    exprs: list[tuple[str, pl.Expr]] = [("iso", iso_ts)]
    unknown_month = pl.lit(False)
    # A stamp that is there but gives no date: it does not exist (month 13, Feb 30...).
    impossible = pl.col("iso").is_not_null() & iso_ts.is_null()
    if df["chms"].is_not_null().any():
        tz, note = _zone(ctx.tz, "dmesg -T (ctime) times")
        notes.ctime_zone = notes.ctime_zone or note
        month = _month(pl.col("cmon"))
        naive = _naive(pl.col("cyear"), month, pl.col("cday"), pl.col("chms"))
        exprs.append(("ctime", _sysstat.local_to_utc(naive, tz)))
        unknown_month = pl.col("chms").is_not_null() & month.is_null()
        impossible = impossible | (month.is_not_null() & naive.is_null())
    siso = _iso_ts(pl.col("siso"))
    exprs.append(("syslog", siso))
    impossible = impossible | (pl.col("siso").is_not_null() & siso.is_null())
    if df["shms"].is_not_null().any():
        if ctx.capture_start is None:
            notes.syslog_no_year = True
        else:
            tz, note = _zone(ctx.tz, "syslog/journal times")
            notes.syslog_zone = notes.syslog_zone or note
            ref = ctx.capture_end or ctx.capture_start
            month = _month(pl.col("smon"))
            this_naive = _naive(pl.lit(ref.year), month, pl.col("sday"), pl.col("shms"))
            last_naive = _naive(pl.lit(ref.year - 1), month, pl.col("sday"), pl.col("shms"))
            this, last = (
                _sysstat.local_to_utc(this_naive, tz),
                _sysstat.local_to_utc(last_naive, tz),
            )
            # Feb 29 exists in one of the two years only: the one where it does.
            later = this_naive.is_null() | (this > pl.lit(ref + timedelta(days=2)))
            exprs.append(("syslog", pl.when(later).then(last).otherwise(this)))
            no_day = month.is_not_null() & this_naive.is_null() & last_naive.is_null()
            impossible = impossible | no_day
    up = pl.col("uptime_s")
    up_ok = up.is_finite() & (up >= 0) & (up <= _dmesg_events.MAX_UPTIME_S)
    if ctx.boot_time is not None:
        wrapped = pl.col("ident").is_not_null()
        micros = (pl.when(up_ok).then(up) * 1e6).round(0).cast(pl.Int64)
        at = pl.lit(ctx.boot_time).cast(base.TS) + pl.duration(microseconds=micros)
        exprs.append(("kmsg+boot", pl.when(~wrapped & pl.col("is_kmsg")).then(at)))
        exprs.append(("boot+uptime", pl.when(~wrapped).then(at)))
    ts = pl.coalesce(e.cast(base.TS) for _, e in exprs)
    source = pl.coalesce(pl.when(e.is_not_null()).then(pl.lit(name)) for name, e in exprs)
    out_of_range = (pl.col("ts") < pl.lit(TS_MIN)) | (pl.col("ts") >= pl.lit(TS_MAX))
    bad_uptime = up.is_not_null() & ~up_ok
    return df.with_columns(
        ts.alias("ts"),
        source.alias("ts_source"),
        impossible.fill_null(False).alias("_imp"),
        unknown_month.alias("_unknown_month"),
    ).with_columns((pl.col("_imp") | bad_uptime | out_of_range.fill_null(False)).alias("_bad"))
