"""The tables of `sar` text and `sadf`, how header names map to their columns, and how the
tokens of a section's rows become table rows (`section_rows`, `tables_of`).

Both parsers (`sar.py`, `sadf.py`) declare the same ``TABLES``; the store appends rows of a
table coming from several files. A new column is one line in `_DECLARED` (``x*0.5``: the
value × 0.5, for old sector-based disk columns in kB). A section (one distinct header) goes
to the dedicated table whose identifying names it has and all of whose names it knows, to
``sar_psi`` for PSI names (``%scpu-10``…), else to ``sar_other`` (one row per value).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analyzer.parsers import _read, base
from analyzer.parsers import _sysstat as ss

_TS = ("ts", base.TS, "", "sample time (UTC)")
_DTYPES = {"i64": pl.Int64, "i32": pl.Int32, "f64": pl.Float64, "str": pl.String}
# table: the names that identify its section | its sadf -j activity keys | doc, then per
# column: name dtype unit | names in sar text and sadf -d headers | in sadf -j JSON | doc
_DECLARED = """
sar_cpu: CPU %idle | cpu-load cpu-load-all | one row per CPU (or all) per sample: sar -u / -u ALL / -P, sadf cpu-load
  cpu          i32 -       | CPU                  | cpu                  | CPU number; -1 = all CPUs
  user_pct     f64 %       | %user %usr           | user usr             | time in user mode (-u ALL: %usr, excludes guest)
  nice_pct     f64 %       | %nice                | nice                 | time in user mode at nice priority
  system_pct   f64 %       | %system %sys         | system sys           | time in kernel mode (-u: includes irq+soft; -u ALL: %sys excludes them)
  iowait_pct   f64 %       | %iowait              | iowait               | idle time with outstanding disk I/O
  steal_pct    f64 %       | %steal               | steal                | time stolen by the hypervisor
  irq_pct      f64 %       | %irq                 | irq                  | time servicing hardware interrupts (-u ALL)
  soft_pct     f64 %       | %soft                | soft                 | time servicing softirqs (-u ALL)
  guest_pct    f64 %       | %guest               | guest                | time running a virtual CPU (-u ALL)
  gnice_pct    f64 %       | %gnice               | gnice                | time running a niced guest (-u ALL)
  idle_pct     f64 %       | %idle                | idle                 | idle time without outstanding disk I/O
sar_queue: runq-sz | queue | one row per sample: run queue and load averages (sar -q)
  runq_sz      i64 tasks   | runq-sz              | runq-sz              | run queue length (running or waiting for a CPU)
  plist_sz     i64 tasks   | plist-sz             | plist-sz             | number of tasks in the task list
  ldavg_1      f64 -       | ldavg-1              | ldavg-1              | load average, last minute
  ldavg_5      f64 -       | ldavg-5              | ldavg-5              | load average, last 5 minutes
  ldavg_15     f64 -       | ldavg-15             | ldavg-15             | load average, last 15 minutes
  blocked      i64 tasks   | blocked              | blocked              | tasks blocked waiting for I/O (sysstat >= 10)
sar_paging: pgpgin/s | paging | one row per sample: paging statistics (sar -B)
  pgpgin_kb_s  f64 kB/s    | pgpgin/s             | pgpgin               | kB paged in from disk per second
  pgpgout_kb_s f64 kB/s    | pgpgout/s            | pgpgout              | kB paged out to disk per second
  fault_s      f64 1/s     | fault/s              | fault                | page faults (minor + major) per second
  majflt_s     f64 1/s     | majflt/s             | majflt               | major faults per second
  pgfree_s     f64 pages/s | pgfree/s             | pgfree               | pages put on the free list per second
  pgscank_s    f64 pages/s | pgscank/s            | pgscank              | pages scanned by kswapd per second
  pgscand_s    f64 pages/s | pgscand/s            | pgscand              | pages scanned directly per second
  pgsteal_s    f64 pages/s | pgsteal/s            | pgsteal              | pages reclaimed per second
  vmeff_pct    f64 %       | %vmeff               | vmeff-percent        | pgsteal / pgscan (up to sysstat 12.6)
  pgprom_s     f64 pages/s | pgprom/s             | pgprom               | pages promoted to a faster NUMA tier (sysstat 12.7+)
  pgdem_s      f64 pages/s | pgdem/s              | pgdem                | pages demoted to a slower NUMA tier (sysstat 12.7+)
sar_memory: kbmemfree | memory | one row per sample: memory utilisation (sar -r [ALL])
  kbmemfree    i64 kB      | kbmemfree            | memfree              | free memory
  kbavail      i64 kB      | kbavail              | avail                | available memory estimate (sysstat 11.5+)
  kbmemused    i64 kB      | kbmemused            | memused              | used memory
  memused_pct  f64 %       | %memused             | memused-percent      | used memory share
  kbbuffers    i64 kB      | kbbuffers            | buffers              | kernel buffers
  kbcached     i64 kB      | kbcached             | cached               | page cache
  kbcommit     i64 kB      | kbcommit             | commit               | memory needed for the current workload (committed)
  commit_pct   f64 %       | %commit              | commit-percent       | committed memory relative to RAM + swap
  kbactive     i64 kB      | kbactive             | active               | active memory
  kbinact      i64 kB      | kbinact              | inactive             | inactive memory
  kbdirty      i64 kB      | kbdirty              | dirty                | memory waiting to be written back
  kbshmem      i64 kB      | kbshmem kbshared     | shmem shared         | shared memory (sysstat 12.7+)
  kbanonpg     i64 kB      | kbanonpg             | anonpg               | anonymous pages (-r ALL)
  kbslab       i64 kB      | kbslab               | slab                 | slab memory (-r ALL)
  kbkstack     i64 kB      | kbkstack             | kstack               | kernel stacks (-r ALL)
  kbpgtbl      i64 kB      | kbpgtbl              | pgtbl                | page tables (-r ALL)
  kbvmused     i64 kB      | kbvmused             | vmused               | vmalloc area used (-r ALL)
sar_swap_space: kbswpfree | - | one row per sample: swap space utilisation (sar -S)
  kbswpfree    i64 kB      | kbswpfree            | swpfree              | free swap space
  kbswpused    i64 kB      | kbswpused            | swpused              | used swap space
  swpused_pct  f64 %       | %swpused             | swpused-percent      | used swap share
  kbswpcad     i64 kB      | kbswpcad             | swpcad               | swap cached (in swap and in RAM)
  swpcad_pct   f64 %       | %swpcad              | swpcad-percent       | cached swap relative to used swap
sar_swap: pswpin/s | swap-pages | one row per sample: swapping activity (sar -W)
  pswpin_s     f64 pages/s | pswpin/s             | pswpin               | pages swapped in per second (-W)
  pswpout_s    f64 pages/s | pswpout/s            | pswpout              | pages swapped out per second (-W)
sar_task: cswch/s | process-and-context-switch | one row per sample: task creation and context switches (sar -w)
  proc_s       f64 1/s     | proc/s               | proc                 | tasks created per second (-w)
  cswch_s      f64 1/s     | cswch/s              | cswch                | context switches per second (-w)
sar_io: tps bread/s | io | one row per sample: I/O totals over all devices (sar -b)
  tps          f64 1/s     | tps                  | tps                  | transfers (I/O requests) per second, all devices (-b)
  rtps         f64 1/s     | rtps                 | rtps                 | read requests per second
  wtps         f64 1/s     | wtps                 | wtps                 | write requests per second
  dtps         f64 1/s     | dtps                 | dtps                 | discard requests per second (sysstat 12+)
  bread_s      f64 blocks/s | bread/s              | bread                | 512-byte blocks read per second
  bwrtn_s      f64 blocks/s | bwrtn/s              | bwrtn                | 512-byte blocks written per second
  bdscd_s      f64 blocks/s | bdscd/s              | bdscd                | 512-byte blocks discarded per second
sar_disk: DEV tps | disk | one row per block device per sample (sar -d)
  dev          str -       | DEV                  | disk-device          | block device (name, or devM-N without -p)
  tps          f64 1/s     | tps                  | tps                  | transfers per second
  rkb_s        f64 kB/s    | rkB/s rd_sec/s*0.5   | rkB rd_sec*0.5       | kB read per second (old rd_sec/s converted)
  wkb_s        f64 kB/s    | wkB/s wr_sec/s*0.5   | wkB wr_sec*0.5       | kB written per second (old wr_sec/s converted)
  dkb_s        f64 kB/s    | dkB/s                | dkB dc_sec*0.5       | kB discarded per second
  areq_sz_kb   f64 kB      | areq-sz avgrq-sz*0.5 | areq-sz avgrq-sz*0.5 | average request size (old avgrq-sz sectors converted)
  aqu_sz       f64 -       | aqu-sz avgqu-sz      | aqu-sz avgqu-sz      | average queue length
  await_ms     f64 ms      | await                | await                | average request time (queue + service)
  svctm_ms     f64 ms      | svctm                | svctm                | average service time (old versions)
  util_pct     f64 %       | %util                | util-percent         | time the device was busy
sar_net_dev: IFACE rxpck/s | net-dev | one row per interface per sample (sar -n DEV)
  iface        str -       | IFACE                | iface                | network interface
  rxpck_s      f64 1/s     | rxpck/s              | rxpck                | packets received per second
  txpck_s      f64 1/s     | txpck/s              | txpck                | packets transmitted per second
  rxkb_s       f64 kB/s    | rxkB/s               | rxkB                 | kB received per second
  txkb_s       f64 kB/s    | txkB/s               | txkB                 | kB transmitted per second
  rxcmp_s      f64 1/s     | rxcmp/s              | rxcmp                | compressed packets received per second
  txcmp_s      f64 1/s     | txcmp/s              | txcmp                | compressed packets transmitted per second
  rxmcst_s     f64 1/s     | rxmcst/s             | rxmcst               | multicast packets received per second
  ifutil_pct   f64 %       | %ifutil              | ifutil-percent       | interface utilisation (sysstat 10+)
sar_net_edev: IFACE rxerr/s | net-edev | one row per interface per sample: error counters (sar -n EDEV)
  iface        str -       | IFACE                | iface                | network interface
  rxerr_s      f64 1/s     | rxerr/s              | rxerr                | bad packets received per second
  txerr_s      f64 1/s     | txerr/s              | txerr                | transmit errors per second
  coll_s       f64 1/s     | coll/s               | coll                 | collisions per second
  rxdrop_s     f64 1/s     | rxdrop/s             | rxdrop               | received packets dropped per second (no buffer)
  txdrop_s     f64 1/s     | txdrop/s             | txdrop               | transmitted packets dropped per second
  txcarr_s     f64 1/s     | txcarr/s             | txcarr               | carrier errors per second
  rxfram_s     f64 1/s     | rxfram/s             | rxfram               | frame alignment errors per second
  rxfifo_s     f64 1/s     | rxfifo/s             | rxfifo               | receive FIFO overruns per second
  txfifo_s     f64 1/s     | txfifo/s             | txfifo               | transmit FIFO overruns per second
sar_psi: | - | one row per resource and kind per sample: pressure stall information (sar -q PSI/ALL, sysstat 12.3+)
  resource     str -       | | | cpu, io or memory
  kind         str -       | | | some (at least one task stalled) or full (all non-idle tasks stalled)
  avg10_pct    f64 %       | | | kernel's 10 s running average
  avg60_pct    f64 %       | | | kernel's 60 s running average
  avg300_pct   f64 %       | | | kernel's 300 s running average
  avg_pct      f64 %       | | | share of the last sample interval spent stalled
sar_events: | - | one row per restart or comment record of the sa data file (deduplicated)
  event        str -       | | | 'restart' (LINUX RESTART: the host booted) or 'comment' (sadc -C)
  detail       str -       | | | comment text, or the restart's '(N CPU)' note
  cpus         i32 -       | | | CPU count after a restart (NULL for comments)
sar_other: | - | one row per value of an activity without a dedicated table (e.g. -I, -v, -n SOCK, -F), long format
  section      str -       | | | the section's header names joined by spaces (or the sadf -j activity key)
  item         str -       | | | item names of the row (CPU, INTR, IFACE, FILESYSTEM... joined by '|'), NULL if none
  metric       str -       | | | column name as printed (e.g. intr/s, %fsused)
  value        f64 -       | | | numeric value in the unit the tool printed (NULL when not a number)
  text         str -       | | | the raw token when it is not a number, else NULL
"""

#: column -> (dtype, unit, doc, text names, JSON names)
_Spec = tuple[pl.DataType, str, str, tuple[str, ...], tuple[str, ...]]


def _declared() -> tuple[
    dict[str, dict[str, _Spec]], dict[str, tuple[str, ...]], dict[str, str], dict[str, str]
]:
    columns: dict[str, dict[str, _Spec]] = {}
    acts: dict[str, str] = {}
    signatures: dict[str, tuple[str, ...]] = {}
    docs: dict[str, str] = {}
    table = ""
    for line in _DECLARED.strip("\n").splitlines():
        if not line.startswith(" "):
            head, keys, doc = line.split(" | ", 2)
            table, names = head.split(":")
            columns[table], signatures[table], docs[table] = {}, tuple(names.split()), doc
            acts.update(dict.fromkeys(keys.split(), table) if keys != "-" else {})
            continue
        spec, text, js, doc = (part.strip() for part in line.split("|", 3))
        name, dtype, unit = spec.split()
        unit = "" if unit == "-" else unit
        columns[table][name] = (_DTYPES[dtype], unit, doc, tuple(text.split()), tuple(js.split()))
    return columns, signatures, docs, acts


_SPECS, _SIGNS, _DOCS, JSON_ACTIVITIES = _declared()
#: The tables of sar and sadf: those of `COLUMNS`, then sar_psi, sar_events and sar_other.
TABLES: dict[str, base.Table] = {
    t: base.table(_DOCS[t], _TS, *((c, s[0], s[1], s[2]) for c, s in cols.items()))
    for t, cols in _SPECS.items()
}
#: The dedicated tables (column -> spec) and the header names that identify their sections.
COLUMNS = {t: cols for t, cols in _SPECS.items() if _SIGNS[t]}
SIGNATURES = {t: names for t, names in _SIGNS.items() if names}
#: Header name -> (column, scale) per dedicated table.
TEXT_ALIASES: dict[str, dict[str, tuple[str, float]]] = {
    table: {
        name.partition("*")[0]: (col, float(name.partition("*")[2] or 1.0))
        for col, spec in cols.items()
        for name in spec[3]
    }
    for table, cols in COLUMNS.items()
}
#: item-name columns of unmapped sections (their value is text, not a metric).
_KEYS = (
    "CPU INTR TTY DEV IFACE FILESYSTEM FCHOST BUS TEMP FAN IN DEVICE BAT manufact product status"
)
KEY_NAMES = frozenset(_KEYS.split())
#: trailing free-text columns (may hold blanks, or be empty)
TEXT_NAMES = frozenset({"manufact", "product", "FILESYSTEM", "DEVICE"})
_PSI_PREFIX = {
    "%scpu": ("cpu", "some"),
    "%sio": ("io", "some"),
    "%fio": ("io", "full"),
    "%smem": ("memory", "some"),
    "%fmem": ("memory", "full"),
}
_PSI_SUFFIX = {"-10": "avg10_pct", "-60": "avg60_pct", "-300": "avg300_pct", "": "avg_pct"}
#: PSI header name (``%scpu-10``, ``%fmem``) -> (resource, kind, column of sar_psi).
PSI_NAMES: dict[str, tuple[str, str, str]] = {
    pre + suf: (res, kind, col)
    for pre, (res, kind) in _PSI_PREFIX.items()
    for suf, col in _PSI_SUFFIX.items()
}


# --- sections: header names -> table and columns ------------------------------------------


@dataclass(frozen=True)
class Section:
    """One distinct header: its names, the table its rows go to and, for a dedicated table,
    the position and scale of each of its columns (the first name that maps to it)."""

    names: tuple[str, ...]
    table: str
    cols: dict[str, tuple[int, float]] = field(default_factory=dict)

    @property
    def width(self) -> int:
        return len(self.names)

    @property
    def label(self) -> str:
        return " ".join(self.names)


def section_table(names: Sequence[str]) -> str:
    """The table of a section with these header names (a dedicated one, 'sar_psi' or 'sar_other')."""
    if names and all(n in PSI_NAMES for n in names):
        return "sar_psi"
    for table, sig in SIGNATURES.items():
        # every name must be known, else the section is not what we think
        if all(n in names for n in sig) and all(n in TEXT_ALIASES[table] for n in names):
            return table
    return "sar_other"


def make_section(names: Sequence[str]) -> Section:
    """Classify a header and locate its columns."""
    names = tuple(names)
    table = section_table(names)
    cols: dict[str, tuple[int, float]] = {}
    if table in COLUMNS:
        for i, n in enumerate(names):
            col, scale = TEXT_ALIASES[table][n]
            cols.setdefault(col, (i, scale))
    return Section(names=names, table=table, cols=cols)


# --- typing: tokens -> table rows -------------------------------------------------------


def _float(tok: pl.Expr, human: bool = False, plain: bool = False) -> pl.Expr:
    if human:
        return ss.number(tok, human=True)
    return tok.cast(pl.Float64, strict=False) if plain else _read.decimal_number(tok)


def _int(tok: pl.Expr, human: bool = False, plain: bool = False) -> pl.Expr:
    whole = tok.cast(pl.Int64, strict=False) if plain and not human else _read.int_number(tok)
    return pl.coalesce(whole, _float(tok, human, plain).round().cast(pl.Int64, strict=False))


def cast_value(
    tok: pl.Expr, dtype: pl.DataType, col: str, human: bool = False, plain: bool = False
) -> pl.Expr:
    """One token -> the declared dtype (decimal comma; ``--human`` suffixes with ``human``).

    ``plain``: the tokens hold no blank and no comma, so stripping blanks and reading a
    decimal comma would change nothing: the token is cast as it is (same values, less work).
    """
    if col == "cpu":
        t = tok.str.strip_chars().str.to_lowercase().str.strip_prefix("cpu")  # sadf -p: cpu0
        return pl.when(t == "all").then(-1).otherwise(t.cast(pl.Int32, strict=False)).cast(pl.Int32)
    if dtype == pl.String:
        return tok
    if dtype in (pl.Int64, pl.Int32):
        return _int(tok, human, plain).cast(dtype, strict=False)
    return _float(tok, human, plain)


def number_positions(sec: Section) -> list[int]:
    """Positions of ``sec``'s names whose tokens are read as numbers (``--human`` matters)."""
    if sec.table == "sar_psi":
        return list(range(sec.width))
    if sec.table == "sar_other":
        return [i for i, n in enumerate(sec.names) if n not in KEY_NAMES]
    types = COLUMNS[sec.table]
    return [i for c, (i, _) in sec.cols.items() if c != "cpu" and types[c][0] != pl.String]


def section_rows(
    rows: pl.DataFrame, sec: Section, human: bool = False, plain: bool = False
) -> pl.DataFrame:
    """The table rows of one section from its rows' tokens: ``rows`` has ``ts`` and one
    String column ``t0``, ``t1``… per header name (and ``line_no``, kept in the rows of a
    dedicated table); ``plain`` as in `cast_value`."""
    tok = [pl.col(f"t{i}") for i in range(sec.width)]
    if sec.table == "sar_psi":  # one row per resource and kind
        groups: dict[tuple[str, str], dict[str, pl.Expr]] = {}
        for i, name in enumerate(sec.names):
            res, kind, col = PSI_NAMES[name]
            groups.setdefault((res, kind), {})[col] = _float(tok[i], human, plain)
        return pl.concat(
            rows.select(
                "ts",
                pl.lit(res).alias("resource"),
                pl.lit(kind).alias("kind"),
                *(vals.get(c, pl.lit(None, pl.Float64)).alias(c) for c in _PSI_SUFFIX.values()),
            )
            for (res, kind), vals in groups.items()
        )
    if sec.table == "sar_other":
        keys = [i for i, n in enumerate(sec.names) if n in KEY_NAMES]
        idx = [i for i in range(sec.width) if i not in keys]
        if not idx:
            return pl.DataFrame()
        n, k = rows.height, len(idx)
        row, col = (pl.Series(a) for a in np.divmod(np.arange(n * k), k))  # row by row
        at = col * n + row  # a value's place in its metric's column, the columns end to end
        values = rows.select(
            *(_float(tok[i], human, plain).alias(str(i)) for i in idx)
        ).get_columns()
        long = pl.DataFrame(
            {
                "ts": rows.get_column("ts").gather(row),
                "section": pl.repeat(sec.label, n * k, eager=True),
                "item": rows.select(pl.concat_str([tok[i] for i in keys], separator="|"))
                .to_series()
                .gather(row)
                if keys
                else pl.repeat(None, n * k, dtype=pl.String, eager=True),
                "metric": pl.Series([sec.names[i] for i in idx]).gather(col),
                "value": pl.concat(values).gather(at),
            }
        )
        if not any(v.null_count() for v in values):
            return long.with_columns(pl.lit(None, pl.String).alias("text"))
        raw = pl.concat([rows.get_column(f"t{i}") for i in idx]).gather(at)  # not a number: text
        return long.with_columns(pl.when(pl.col("value").is_null()).then(raw).alias("text"))
    exprs = []
    for col, (dtype, *_) in COLUMNS[sec.table].items():
        if col not in sec.cols:
            exprs.append(pl.lit(None, dtype).alias(col))
            continue
        at, scale = sec.cols[col]
        v = cast_value(tok[at], dtype, col, human, plain)
        exprs.append((v * scale if dtype == pl.Float64 and scale != 1.0 else v).alias(col))
    return rows.select("ts", *exprs, *(["line_no"] if "line_no" in rows.columns else []))


def tables_of(
    parts: Iterable[tuple[Section, pl.DataFrame]], human: bool = False, plain: bool = False
) -> dict[str, pl.DataFrame]:
    """Every table with rows, from the token rows of its sections (`section_rows`), in the
    order of their first section; a dedicated table's rows from several sections in line
    order when they have ``line_no``, else in the order given."""
    out: dict[str, list[pl.DataFrame]] = {}
    for sec, rows in parts:
        out.setdefault(sec.table, []).append(section_rows(rows, sec, human, plain))
    tables = {}
    for table, frames in out.items():
        frame = pl.concat([f for f in frames if f.height] or frames[:1], how="vertical")
        if "line_no" in frame.columns:
            frame = (frame.sort("line_no") if len(frames) > 1 else frame).drop("line_no")
        if frame.height:
            tables[table] = frame
    return tables


def event_rows(rows: pl.DataFrame, text: pl.Expr, restart: str) -> pl.DataFrame:
    """``sar_events`` rows (``ts``, ``event``, ``detail``, ``cpus``; each distinct one once)
    of restart and comment records: ``text`` is ``<restart> (N CPU)`` or ``COM <comment>``."""
    is_restart = text.str.starts_with(restart)
    return rows.select(
        "ts",
        pl.when(is_restart).then(pl.lit("restart")).otherwise(pl.lit("comment")).alias("event"),
        pl.when(is_restart)
        .then(text.str.strip_prefix(restart).str.strip_chars())
        .otherwise(text.str.strip_prefix("COM "))
        .alias("detail"),
        pl.when(is_restart)
        .then(text.str.extract(r"\((\d+) CPU\)").cast(pl.Int32, strict=False))
        .alias("cpus"),
    ).unique(maintain_order=True)
