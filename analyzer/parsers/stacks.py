"""Sampled on-CPU stacks (bpftrace ``profile``, or ``perf record``) -> ``stack_samples`` and
``stack_slices``.

Two input shapes of the same "stacks" tool: bpftrace's keys (``bpf_stacks``) and the
folded lines of the capture's perf fallback (``perf_stacks``, below).

The bpftrace input is what ``capture/bpftrace/stacks.bt`` prints (bpftrace 0.17 text output,
``ustack(perf, N)``/``kstack(perf, N)`` keys): a banner, a UTC time line when the program
starts, then every 10 s a time line, ``@samples: N`` (every sample of the slice) and the
most frequent keys of ``@stacks[comm, pid, ustack, kstack]``, each printed on several
lines, leaf frame first::

    Attaching 4 probes...
    hindsight stacks: on-CPU stacks at 49 Hz per CPU, top 200 every 10 s
    2026-12-02T04:13:33Z
    2026-12-02T04:13:43Z
    @samples: 964
    @stacks[hot_c, 13998,
    \t563f02d7d159 hot_c_inner+32 (/tmp/stk/hot_c)
    \t563f02d7d194 main+14 (/tmp/stk/hot_c)
    ,
    \tffffffff81369742 handle_softirqs+114
    \tffffffff81000e06 asm_sysvec_apic_timer_interrupt+22
    ]: 249

(the key line and the ``,`` separator end in a space). Any map name works
(``@[comm, pid, ustack, kstack]`` too), as do the default (non-``perf``) stack formats
(``\\tfunc+off`` lines) and keys without a kernel or user stack.

The perf input (``perf_stacks``: ``perf record -g`` of every CPU at 49 Hz for 10 s, then
``perf script`` folded by the capture's awk, hosts without bpftrace) is the same framing
with one line per stack, already folded root → leaf by the capture the way this module
folds bpftrace's keys (flamegraph.pl's folded form, ``comm-pid;frames count``; the
capture turns a ``;`` in the comm into ``:``), and two time lines per slice, at its start
and its end (so ``interval_s`` is the recorded time)::

    hindsight stacks (perf): on-CPU stacks at 49 Hz per CPU, top 200 every 10 s
    2026-12-02T04:38:18Z
    2026-12-02T04:38:30Z
    @samples: 972
    hot_c-7408;__libc_start_call_main;hot_c_inner 325
    kworker/0:1-32283;ret_from_fork_asm_[k];ret_from_fork_[k];kthread_[k] 2

Folding: a row is one (slice, pid, comm, folded stack). The stack is folded root → leaf
with ``;``: the user frames (reversed), then the kernel frames (reversed), each kernel
frame marked ``_[k]`` (the flame-graph convention). A frame is its symbol without the
``+offset``; an unknown symbol is ``[module]`` (the module's base name) or
``[unknown]``; a ``;`` inside a symbol becomes ``:``. Keys that differ only in offsets or
addresses fold to one row and their counts add up.

``stack_slices`` keeps per slice ``@samples`` (all samples) and what the printed keys
add up to: the difference is what the top-N cap left out. The first time line starts the
first slice; ``ts`` is a slice's end and ``interval_s`` the time since the previous time
line. A second print without a time line (bpftrace's exit dump of the cleared maps,
``@samples: 0``) is structure; one with samples has ``ts`` NULL (noted).

Coverage: the lines of a key count as parsed when its ``]: N`` line closes it (a folded
line is one key); a key cut off by the end of the file, and a stray frame line outside a
key, are skipped with a reason; banners, time lines, blank lines and the exit dump are
structure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from analyzer.parsers import _blocks, base

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

BANNER = re.compile(r"^(?:Attaching \d+ probes?\.*|hindsight stacks(?: \(perf\))?:.*)$")
TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:Z|[+-]00:?00)?$")
SAMPLES = re.compile(r"^@samples: (\d+)$")
KEY = re.compile(r"^@(\w*)\[(.*), (\d+), ?$")
KEY_KERNEL = re.compile(r"^@(\w*)\[(.*), (\d+), , ?$")  # no user stack
KEY_EMPTY = re.compile(r"^@(\w*)\[(.*), (\d+), , \]: (\d+)$")  # no stack at all
FRAME = re.compile(r"^\s+(?:([0-9a-f]+) )?(\S.*?)\s*$")
END = re.compile(r"^(,\s?)?\]: (\d+)$")
SEP = re.compile(r"^,\s?$")
# perf form: "comm-pid;root;...;leaf count" (comm shortest first: it may hold "-N" too)
FOLDED = re.compile(r"^(.*?)-(\d+)((?:;.*)?) (\d+)$")
_PERF = re.compile(r"^(?:0x[0-9a-f]+|(.+?)(?:\+\d+)?) \((.*)\)$")
_DEFAULT = re.compile(r"^(.+?)(?:\+\d+)?$")


def sniff(head: str, name: str) -> float:
    """The capture's banner, bpftrace stack keys (``@x[comm, pid,`` lines with frames), or
    mostly folded ``comm-pid;frames count`` lines."""
    if re.search(r"^hindsight stacks(?: \(perf\))?:", head, re.M):
        return 0.98
    keys = len(re.findall(r"^@\w*\[.*, \d+, ?\n\t[0-9a-f]+ ", head, re.M))
    if keys >= 2:
        return 0.9
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    folded = sum(1 for ln in lines if ";" in ln and FOLDED.match(ln))
    return 0.8 if folded >= 3 and folded >= 0.8 * len(lines) else 0.0


def frame_name(text: str, kernel: bool) -> str:
    """One printed frame as it goes into the folded stack.

    >>> frame_name("hot_c_inner+32 (/tmp/stk/hot_c)", False)
    'hot_c_inner'
    >>> frame_name("0x958cc0 ([unknown])", False), frame_name("0x5fcd9c (/usr/bin/python3.11)", False)
    ('[unknown]', '[python3.11]')
    >>> frame_name("do_syscall_64+113", True)
    'do_syscall_64_[k]'
    """
    m = _PERF.match(text)
    if m:
        sym, module = m.group(1), m.group(2)
        if not sym or sym.startswith("0x"):
            base_name = module.rsplit("/", 1)[-1]
            sym = "[unknown]" if base_name in ("", "[unknown]") else f"[{base_name}]"
    else:
        sym = _DEFAULT.match(text).group(1)  # type: ignore[union-attr]
        if re.fullmatch(r"0x[0-9a-f]+|[0-9a-f]{6,}", sym):
            sym = "[unknown]"
    sym = sym.replace(";", ":")
    return sym + "_[k]" if kernel else sym


@dataclass
class _State:
    ts: datetime | None = None
    prev: datetime | None = None
    started: bool = False  # a time line was seen
    slice_samples: int | None = None
    slice_open: bool = False
    # the key being read
    key: tuple[str, int] | None = None
    key_lines: int = 0
    user: list[str] = field(default_factory=list)
    kern: list[str] = field(default_factory=list)
    in_kernel: bool = False
    # rows of the current slice: (comm, pid, stack) -> [samples, user_n, kernel_n, leaf]
    agg: dict[tuple[str, int, str], list] = field(default_factory=dict)
    shown: int = 0
    nkeys: int = 0
    rows: list[dict] = field(default_factory=list)
    slices: list[dict] = field(default_factory=list)
    untimed: int = 0
    folded: int = 0  # perf-form lines seen


def _interval(st: _State) -> float | None:
    if st.ts is None or st.prev is None:
        return None
    return (st.ts - st.prev).total_seconds()


def _close_slice(st: _State) -> None:
    if not st.slice_open:
        return
    iv = _interval(st)
    for (comm, pid, stack), (n, nu, nk, leaf) in st.agg.items():
        st.rows.append(
            {
                "ts": st.ts,
                "interval_s": iv,
                "pid": pid,
                "comm": comm,
                "stack": stack,
                "user_frames": nu,
                "kernel_frames": nk,
                "leaf": leaf,
                "samples": n,
            }
        )
    st.slices.append(
        {
            "ts": st.ts,
            "interval_s": iv,
            "samples": st.slice_samples,
            "samples_shown": st.shown,
            "stacks_shown": st.nkeys,
        }
    )
    st.agg, st.shown, st.nkeys, st.slice_samples, st.slice_open = {}, 0, 0, None, False


def _add(st: _State, comm: str, pid: int, user: list[str], kern: list[str], count: int) -> None:
    """Count one stack (frames root → leaf) into the current slice."""
    frames = user + kern
    stack = ";".join(frames) if frames else "[no stack]"
    k = (comm, pid, stack)
    if k in st.agg:
        st.agg[k][0] += count
    else:
        st.agg[k] = [count, len(user), len(kern), frames[-1] if frames else "[no stack]"]


def _folded(st: _State, m: re.Match[str], cov: base.Coverage) -> None:
    """One perf-form line: its frames are final names already (kernel ones end ``_[k]``)."""
    frames = m.group(3)[1:].split(";") if m.group(3) else []
    kern = [f for f in frames if f.endswith("_[k]")]
    user = [f for f in frames if not f.endswith("_[k]")]
    _add(st, m.group(1), int(m.group(2)), user, kern, int(m.group(4)))
    st.shown += int(m.group(4))
    st.nkeys += 1
    st.slice_open = True
    st.folded += 1
    cov.parsed += 1


def _finish_key(st: _State, count: int, cov: base.Coverage) -> None:
    assert st.key is not None
    comm, pid = st.key
    _add(st, comm, pid, st.user[::-1], st.kern[::-1], count)
    st.shown += count
    st.nkeys += 1
    st.slice_open = True
    cov.parsed += st.key_lines
    st.key, st.key_lines, st.user, st.kern, st.in_kernel = None, 0, [], [], False


def _line(st: _State, line: str, cov: base.Coverage) -> None:
    if st.key is not None:
        st.key_lines += 1
        m = END.match(line)
        if m:
            _finish_key(st, int(m.group(2)), cov)
            return
        if SEP.match(line):
            st.in_kernel = True
            return
        m = FRAME.match(line)
        if m and line[:1] in ("\t", " "):
            (st.kern if st.in_kernel else st.user).append(frame_name(m.group(2), st.in_kernel))
            return
        # anything else inside a key: the key is broken; skip it and read the line again
        cov.add_skipped("stack key cut short by an unexpected line", st.key_lines - 1)
        st.key, st.key_lines, st.user, st.kern, st.in_kernel = None, 0, [], [], False
        _line(st, line, cov)
        return
    if not line.strip():
        cov.add_structure("blank", 1)
        return
    if BANNER.match(line):
        cov.add_structure("banner", 1)
        return
    m = TIME.match(line)
    if m:
        _close_slice(st)
        st.prev = st.ts if st.started else None
        st.ts = datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC)
        st.started = True
        cov.add_structure("interval timestamp", 1)
        return
    m = SAMPLES.match(line)
    if m:
        n = int(m.group(1))
        if st.slice_samples is not None or (st.slice_open and st.nkeys):
            # a second print without a time line: the exit dump (cleared maps), or lost time
            _close_slice(st)
            if n == 0:
                cov.add_structure("exit dump of the cleared maps", 1)
                return
            st.prev, st.ts = st.ts, None
            st.untimed += 1
        st.slice_samples = n
        st.slice_open = True
        cov.parsed += 1
        return
    m = KEY_EMPTY.match(line)
    if m:
        st.key, st.key_lines = (m.group(2), int(m.group(3))), 1
        _finish_key(st, int(m.group(4)), cov)
        return
    m = KEY_KERNEL.match(line) or KEY.match(line)
    if m:
        st.key, st.key_lines = (m.group(2), int(m.group(3))), 1
        st.in_kernel = line.rstrip().endswith(", ,")
        return
    if FRAME.match(line) and line[:1] in ("\t", " "):
        cov.add_skipped("stack frame outside a map key", 1)
        return
    m = FOLDED.match(line)
    if m:
        _folded(st, m, cov)
        return
    if line.startswith(("ERROR:", "WARNING:")):
        cov.add_skipped("bpftrace message", 1)
        return
    cov.add_skipped("unrecognised line", 1)


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one stacks file, bpftrace's or perf's (see the module docstring)."""
    cov = base.Coverage()
    st = _State()
    blocks = _blocks.Blocks(path)
    for block in blocks:
        lines = block.lines.get_column("line").to_list()
        cov.total += len(lines)
        for line in lines:
            _line(st, line, cov)
    if blocks.repaired:
        cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
    if st.key is not None:
        cov.add_skipped("stack key cut short at the end of the file", st.key_lines)
    _close_slice(st)
    if st.untimed:
        cov.notes.append(f"{st.untimed} slice(s) printed without a time line: ts NULL")
    if not st.started and st.rows:
        cov.notes.append("no time line: ts NULL")
    tables = {
        "stack_samples": TABLES["stack_samples"]
        .conform(pl.DataFrame(st.rows, schema=TABLES["stack_samples"].schema))
        .collect(),
        "stack_slices": TABLES["stack_slices"]
        .conform(pl.DataFrame(st.slices, schema=TABLES["stack_slices"].schema))
        .collect(),
    }
    fmt = "perf folded" if st.folded else "bpftrace"
    return base.ParseResult(tables=tables, coverage=cov, meta={"format": fmt})
