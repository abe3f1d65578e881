"""Sampled on-CPU stacks (bpftrace ``profile``, or ``perf record``) -> ``stack_samples`` and
``stack_slices``.

Two inputs of the "stacks" tool (docs/bundle-format.md): ``bpf_stacks``, what
``capture/bpftrace/stacks.bt`` prints (bpftrace 0.17, ``ustack(perf, N)``/``kstack(perf,
N)`` keys), and ``perf_stacks``, the capture's perf fallback. Both print a banner, a UTC
time line at the start, then every 10 s a time line, ``@samples: N`` (every sample of the
slice) and the most frequent keys. A bpftrace key ``@stacks[comm, pid, ustack, kstack]``
spans several lines, leaf frame first (the key line and the ``,`` end in a space)::

    2026-12-02T04:13:43Z
    @samples: 964
    @stacks[hot_c, 13998,
    \t563f02d7d159 hot_c_inner+32 (/tmp/stk/hot_c)
    ,
    \tffffffff81369742 handle_softirqs+114
    ]: 249

Any map name works, as do the default (``\\tfunc+off``) stack formats and keys without a
kernel or user stack. A perf key is one line already folded by the capture
(``comm-pid;frames count``, a ``;`` in the comm made ``:``), and each slice has two time
lines, its start and its end::

    hot_c-7408;__libc_start_call_main;hot_c_inner 325

Folding: a row is one (slice, pid, comm, folded stack), root → leaf with ``;``: the user
frames, then the kernel frames marked ``_[k]``; a frame is its symbol without
``+offset``, else ``[module]`` (base name) or ``[unknown]``, a ``;`` in it made ``:``.
Keys that differ only in offsets or addresses add up.

``stack_slices``: per slice ``@samples`` and what the printed keys add up to (the
difference is what the top-N cap left out). ``ts`` is a slice's end, ``interval_s`` the
time since the previous time line. A second print without a time line (bpftrace's exit
dump of the cleared maps, ``@samples: 0``) is structure; one with samples has ``ts`` NULL.

Coverage: a key's lines are parsed when its ``]: N`` line closes it; a key cut off and a
stray frame line are skipped; banners, time lines, blanks and the exit dump are structure.
Blocks (`_blocks.Blocks`) are cut before a time line; only the time in effect goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer.parsers import _blocks, _sampler, base

TABLES: dict[str, base.Table] = {
    "stack_samples": base.table(
        "one row per (slice, process, folded stack): on-CPU samples of that stack in the slice",
        ("ts", base.TS, "", "slice end: the time line printed before the map (NULL if unknown)"),
        ("interval_s", pl.Float64, "s", "slice length: time since the previous time line"),
        ("pid", pl.Int64, "", "process id (bpftrace ``pid``: the thread group)"),
        ("comm", pl.String, "", "thread name as the kernel keeps it (15 bytes at most)"),
        (
            "stack",
            pl.String,
            "",
            "folded stack root → leaf, ';' between frames; user frames then kernel frames "
            "(marked '_[k]'); symbols without offsets, '[module]'/'[unknown]' when unknown",
        ),
        ("user_frames", pl.Int32, "", "number of user-space frames in ``stack``"),
        ("kernel_frames", pl.Int32, "", "number of kernel frames in ``stack``"),
        ("leaf", pl.String, "", "the innermost frame (where the CPU was)"),
        ("samples", pl.Int64, "", "samples of this stack in the slice (49 Hz per CPU)"),
    ),
    "stack_slices": base.table(
        "one row per printed slice of the stack sampler",
        ("ts", base.TS, "", "slice end (NULL if unknown)"),
        ("interval_s", pl.Float64, "s", "slice length"),
        ("samples", pl.Int64, "", "every sample of the slice (``@samples``; NULL if not printed)"),
        ("samples_shown", pl.Int64, "", "samples of the printed keys (the top-N cap)"),
        ("stacks_shown", pl.Int64, "", "printed keys"),
    ),
}

BANNER = r"^(?:Attaching \d+ probes?\.*|hindsight stacks(?: \(perf\))?:.*)$"
TIME = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:Z|[+-]00:?00)?$"
SAMPLES = r"^@samples: (\d+)$"
KEY = r"^@\w*\[(.*), (\d+),(?: (?:, ?)?)?$"  # "@x[comm, pid, ", or ", , " without user stack
KEY_EMPTY = r"^@\w*\[(.*), (\d+), , \]: (\d+)$"  # no stack at all
FRAME = r"^[\t ]\s*(?:[0-9a-f]+ )?(\S.*?)\s*$"  # indented by a tab or a blank
END = r"^(?:,\s?)?\]: (\d+)$"
SEP = r"^,\s?$"
# perf form: "comm-pid;root;...;leaf count" (comm shortest first: it may hold "-N" too)
FOLDED = r"^(.*?)-(\d+)((?:;.*)?) (\d+)$"
_PERF = r"^(?:0x[0-9a-f]+|(.+?)(?:\+\d+)?) \((.*)\)$"
_TIME_CUT = re.compile(rb"\n(?=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|[+-]00:?00)?\r?\n)")


def sniff(head: str, name: str) -> float:
    """The capture's banner, bpftrace stack keys (``@x[comm, pid,`` lines with frames), or
    mostly folded ``comm-pid;frames count`` lines."""
    if re.search(r"^hindsight stacks(?: \(perf\))?:", head, re.M):
        return 0.98
    keys = len(re.findall(r"^@\w*\[.*, \d+, ?\n\t[0-9a-f]+ ", head, re.M))
    if keys >= 2:
        return 0.9
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    folded = sum(1 for ln in lines if ";" in ln and re.match(FOLDED, ln))
    return 0.8 if folded >= 3 and folded >= 0.8 * len(lines) else 0.0


def frame_name(text: str, kernel: bool) -> str:
    """One printed frame as it goes into the folded stack (`_frame_names` for a frame).

    >>> frame_name("hot_c_inner+32 (/tmp/stk/hot_c)", False)
    'hot_c_inner'
    >>> frame_name("0x958cc0 ([unknown])", False), frame_name("0x5fcd9c (/usr/bin/python3.11)", False)
    ('[unknown]', '[python3.11]')
    >>> frame_name("do_syscall_64+113", True)
    'do_syscall_64_[k]'
    """
    return _frame_names(pl.DataFrame({"text": [text], "kern": [kernel]}))["name"].item()


def _frame_names(df: pl.DataFrame) -> pl.DataFrame:
    """Printed frames (``text``, ``kern``) -> their folded ``name``: the symbol without
    ``+offset``, else ``[module]`` or ``[unknown]``; ``;`` becomes ``:``; kernel frames
    end in ``_[k]``."""
    c = pl.col
    df = df.with_columns(
        perf=c("text").str.extract_groups(_PERF), plain=c("text").str.extract(r"^(.+?)(?:\+\d+)?$")
    ).with_columns(sym=c("perf").struct.field("1"), module=c("perf").struct.field("2"))
    base_name = c("module").str.extract(r"([^/]*)$", 1)
    from_module = (
        pl.when(base_name.is_in(["", "[unknown]"]))
        .then(pl.lit("[unknown]"))
        .otherwise(pl.concat_str(pl.lit("["), base_name, pl.lit("]")))
    )
    name = (
        pl.when(c("module").is_null() & c("plain").str.contains(r"^(?:0x[0-9a-f]+|[0-9a-f]{6,})$"))
        .then(pl.lit("[unknown]"))
        .when(c("module").is_null())
        .then("plain")
        .when(c("sym").is_null() | c("sym").str.starts_with("0x"))
        .then(from_module)
        .otherwise("sym")
        .str.replace_all(";", ":", literal=True)
    )
    name = pl.when("kern").then(name + "_[k]").otherwise(name)
    return df.with_columns(name=name).drop("perf", "plain", "sym", "module")


def _cut_before_time(buf: bytes, limit: int) -> int:
    """Block cut: the start of the last time line at or before ``limit`` (-1: none)."""
    at = -1
    for m in _TIME_CUT.finditer(buf, 0, min(len(buf), limit + 64)):
        if m.end() <= limit:
            at = m.end()
    return at


@dataclass
class _Clock:
    """What goes on from block to block (a block starts at a time line)."""

    ts: datetime | None = None  # the time in effect
    started: bool = False  # a time line was seen
    untimed: int = 0  # slices printed without a time line
    rows: int = 0  # stack_samples rows so far
    folded: bool = False  # perf-form lines seen


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one stacks file, bpftrace's or perf's (see the module docstring)."""
    cov = base.Coverage()
    clock = _Clock()
    out = _blocks.Rows(ctx, TABLES)
    blocks = _blocks.Blocks(path, _cut_before_time)
    for block in blocks:
        out.put(_block(block.lines, block.last, clock, cov))
    if blocks.repaired:
        cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
    if clock.untimed:
        cov.notes.append(f"{clock.untimed} slice(s) printed without a time line: ts NULL")
    if not clock.started and clock.rows:
        cov.notes.append("no time line: ts NULL")
    meta = {"format": "perf folded" if clock.folded else "bpftrace"}
    tables = out.tables(dict.fromkeys(TABLES, pl.DataFrame()))
    return base.ParseResult(tables=tables, coverage=cov, meta=meta)


def _block(
    lines: pl.DataFrame, last: bool, clock: _Clock, cov: base.Coverage
) -> dict[str, pl.DataFrame]:
    """One block's tables (it ends before a time line, or at the end of the file when
    ``last``); counts its lines into ``cov`` and advances ``clock``."""
    line, what = pl.col("line"), pl.col("what")
    kinds = [
        (line.str.strip_chars() == "", "structure:blank"),
        (line.str.contains(BANNER), "structure:banner"),
        (line.str.contains(TIME), "time"),
        (line.str.contains(SAMPLES), "samples"),
        (line.str.contains(KEY_EMPTY), "key"),
        (line.str.contains(KEY), "open"),
        (line.str.contains(FRAME), "skipped:stack frame outside a map key"),
        (line.str.contains(FOLDED), "folded"),
        (line.str.contains("^(?:ERROR|WARNING):"), "skipped:bpftrace message"),
        (pl.lit(True), "skipped:unrecognised line"),
    ]
    df = lines.with_columns(
        what=pl.coalesce(pl.when(cond).then(pl.lit(name)) for cond, name in kinds),
        sep=line.str.contains(SEP),
        frame=line.str.contains(FRAME),
        end=line.str.contains(END),
    )
    # A key: an opener, the frame and separator lines after it, then its closing line.
    inner = pl.col("sep") | pl.col("frame")
    df = df.with_columns(group=(~inner).cast(pl.Int64).cum_sum())
    groups = df.group_by("group", maintain_order=True).agg(
        what.first(), pl.col("end").first(), pl.col("line_no").first().alias("start")
    )
    closed = pl.col("end").shift(-1)  # the group's next line closes the key
    status = (
        pl.when(what != "open")
        .then(None)
        .when(closed)
        .then(pl.lit("P"))
        .when(closed.is_null() & pl.lit(last))
        .then(pl.lit("skipped:stack key cut short at the end of the file"))
        .otherwise(pl.lit("skipped:stack key cut short by an unexpected line"))
    )
    groups = groups.select("group", "start", key=status, closes=status.shift(1) == "P")
    df = df.join(groups, on="group", how="left", maintain_order="left")
    closing = (pl.col("line_no") == pl.col("start")) & pl.col("closes").fill_null(False)
    df = df.with_columns(closing=closing)
    keys = _keys(df)
    samples, slices = _slices(df, keys, clock)
    role = pl.coalesce(
        "key",
        pl.when(closing | what.is_in(["key", "folded"])).then(pl.lit("P")),
        pl.when(what == "time").then(pl.lit("structure:interval timestamp")),
        pl.when(what == "samples").then(
            pl.col("line_no").replace_strict(samples, default=None, return_dtype=pl.String)
        ),
        what,
    )
    _sampler.tally(cov, df.select(why=pl.when(role != "P").then(role)))
    return slices


def _keys(df: pl.DataFrame) -> pl.DataFrame:
    """One row per printed key, in file order: ``pos`` (its first line), comm, pid,
    stack, user_frames, kernel_frames, leaf, count."""
    line, c = pl.col("line"), pl.col
    # bpftrace keys: frames leaf first, user frames before the ',' line, kernel ones after
    full = c("key") == "P"
    opener = (
        df.filter(full & (c("line_no") == c("start")))
        .select("group", pos="line_no", k=line.str.extract_groups(KEY))
        .unnest("k")
        .rename({"1": "comm", "2": "pid"})
    )
    counts = df.filter("closing").select(group=c("group") - 1, count=line.str.extract(END, 1))
    kern = line.str.strip_chars_end().str.ends_with(", ,").first() | (c("sep").cum_sum() > 0)
    frames = df.filter(full).with_columns(kern=kern.over("group")).filter("frame")
    frames = (
        _frame_names(frames.with_columns(text=line.str.extract(FRAME, 1)))
        .sort(["group", "kern", "line_no"], descending=[False, False, True])  # root first
        .group_by("group", maintain_order=True)
        .agg(
            stack=c("name").str.join(";"),
            user_frames=(~c("kern")).sum(),
            kernel_frames=c("kern").sum(),
            leaf=c("name").last(),
        )
    )
    bpf = opener.join(counts, on="group", how="left").join(frames, on="group", how="left")
    empty = (
        df.filter(c("what") == "key")
        .select("line_no", g=line.str.extract_groups(KEY_EMPTY))
        .unnest("g")
        .select(pos="line_no", comm="1", pid="2", count="3")
    )
    # perf's folded lines: frames root first, kernel ones marked already
    is_k = pl.element().str.ends_with("_[k]")
    folded = (
        df.filter(c("what") == "folded")
        .select("line_no", g=line.str.extract_groups(FOLDED))
        .unnest("g")
        .with_columns(split=pl.when(c("3") != "").then(c("3").str.slice(1).str.split(";")))
        .with_columns(user=c("split").list.filter(~is_k), kernel=c("split").list.filter(is_k))
        .with_columns(all=pl.concat_list("user", "kernel"))
        .select(
            pos="line_no",
            comm="1",
            pid="2",
            count="4",
            stack=pl.when(c("all").list.len() > 0).then(c("all").list.join(";")),
            user_frames=c("user").list.len(),
            kernel_frames=c("kernel").list.len(),
            leaf=c("all").list.last(),
            folded=pl.lit(True),
        )
    )
    out = pl.concat([bpf, empty, folded], how="diagonal_relaxed").sort("pos")
    return out.with_columns(
        c("pid", "count").cast(pl.Int64, strict=False),
        c("stack", "leaf").fill_null("[no stack]"),
        c("user_frames", "kernel_frames").fill_null(0).cast(pl.Int32),
        c("folded").fill_null(False),
    )


def _slices(
    df: pl.DataFrame, keys: pl.DataFrame, clock: _Clock
) -> tuple[dict[int, str], dict[str, pl.DataFrame]]:
    """Follow the time lines and ``@samples`` prints (a loop per slice): the coverage of
    each ``@samples`` line (line_no -> 'P' or the exit-dump structure) and the tables."""
    c = pl.col
    line, is_time = c("line"), c("what") == "time"
    printed = df.filter(is_time | (c("what") == "samples")).select(
        pos="line_no",
        kind=pl.when(is_time).then(pl.lit("T")).otherwise(pl.lit("S")),
        t=line.str.extract(TIME, 1).str.to_datetime(
            "%Y-%m-%dT%H:%M:%S", time_zone="UTC", strict=False
        ),
        n=line.str.extract(SAMPLES, 1).cast(pl.Int64, strict=False),
    )
    events = pl.concat([printed, keys.select("pos", kind=pl.lit("K"))], how="diagonal_relaxed")
    events = events.sort("pos")
    events = events.with_columns(run=(c("kind") != "K").cast(pl.Int64).cum_sum())
    with_keys = set(events.filter(c("kind") == "K")["run"].unique().to_list())
    slices: list[tuple] = []  # (ts, interval_s, samples)
    slice_of: dict[int, int] = {}  # run of keys -> slice
    prints_as: dict[int, str] = {}
    ts, prev = clock.ts, None
    samples, is_open, has_keys = None, False, False

    def begin() -> None:
        nonlocal is_open
        if not is_open:
            interval = (ts - prev).total_seconds() if ts and prev else None
            slices.append((ts, interval, samples))
            is_open = True

    def close() -> None:
        nonlocal samples, is_open, has_keys
        samples, is_open, has_keys = None, False, False

    if 0 in with_keys:  # keys before any time line or print (a file's first block only)
        begin()
        slice_of[0], has_keys = 0, True
        clock.untimed += ts is None
    for run, (pos, kind, t, n) in enumerate(
        events.filter(c("kind") != "K").select("pos", "kind", "t", "n").iter_rows(), start=1
    ):
        if kind == "T":
            close()
            prev, ts = (ts if clock.started else None), t
            clock.started = True
        elif samples is not None or has_keys:
            # a second print without a time line: the exit dump (cleared maps), or lost time
            close()
            if n == 0:
                prints_as[pos] = "structure:exit dump of the cleared maps"
            else:
                prev, ts = ts, None
                clock.untimed += 1
        if kind == "S" and pos not in prints_as:
            samples, prints_as[pos] = n, "P"
            begin()
        if run in with_keys:
            begin()
            slice_of[run], has_keys = len(slices) - 1, True
    clock.ts = ts
    keys = keys.with_columns(events.filter(c("kind") == "K")["run"])
    return prints_as, _tables(slices, slice_of, keys, clock)


def _tables(
    slices: list[tuple], slice_of: dict[int, int], keys: pl.DataFrame, clock: _Clock
) -> dict[str, pl.DataFrame]:
    """The block's slices and, per slice, its keys folded into stack rows."""
    c = pl.col
    schema = {"ts": base.TS, "interval_s": pl.Float64, "samples": pl.Int64}
    sl = pl.DataFrame(slices, schema=schema, orient="row").with_row_index("slice")
    keys = keys.with_columns(slice=c("run").replace_strict(slice_of, return_dtype=pl.UInt32))
    rows = keys.group_by("slice", "comm", "pid", "stack", maintain_order=True).agg(
        c("count").sum().alias("samples"), c("user_frames", "kernel_frames", "leaf").first()
    )
    rows = rows.join(sl.select("slice", "ts", "interval_s"), on="slice", how="left")
    shown = keys.group_by("slice").agg(samples_shown=c("count").sum(), stacks_shown=pl.len())
    sl = sl.join(shown, on="slice", how="left").with_columns(
        c("samples_shown", "stacks_shown").fill_null(0)
    )
    clock.rows += rows.height
    clock.folded = clock.folded or bool(keys["folded"].any())
    return {"stack_samples": rows, "stack_slices": sl}
