"""The cgroup tables chunk by chunk: state carried across the cuts (see ``cgroup.py``).

Input: token frames of ``cgroup.py`` (``line_no, ts, cgroup, file, key, val, val2, device,
kv``) of parsed lines, chunk after chunk in line order. Output per chunk: the frames of
``cgroup_cpu``, ``cgroup_memory``, ``cgroup_memory_stat``, ``cgroup_io`` and
``cgroup_limits`` built by :mod:`._cgroup_tables` (declared columns, before ``conform``).
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers._cgroup_tables import (
    BLKIO_FILES,
    CPU_MAP,
    LIMIT_SINGLE,
    MEM_KEYED,
    MEM_SINGLE,
    cpu_long,
    deltas,
    io_rows,
    limits,
    memory_long,
    wide,
)
from analyzer.parsers.base import Table


class Builder:
    """The five cgroup tables from token chunks given in line order (see ``cgroup.py``).

    Wide rows gather every line of one (ts, cgroup), so the rows of the last sample time
    of a chunk are held back and built with the next chunk (``final`` builds them); the
    last counter sample of each cgroup carries over for the per-interval values. For a
    file whose sample times do not go back, the tables equal those of one whole-file
    chunk.
    """

    def __init__(self, tables: dict[str, Table]) -> None:
        self.tables = tables
        self.held: pl.DataFrame | None = None
        self.prev: dict[str, pl.DataFrame | None] = {"throttle": None, "usage": None}
        self.resets = 0

    def add(self, tok: pl.DataFrame, final: bool = False) -> dict[str, pl.DataFrame]:
        """Tables of the complete samples in ``tok`` (and the rows held before it)."""
        if self.held is not None:
            tok = pl.concat([self.held, tok])
            self.held = None
        if not final and tok.height:
            ts = tok.get_column("ts")
            hold = ts.is_null() if ts[-1] is None else ts.eq_missing(ts[-1])
            n = int(hold.sum())
            if hold.slice(tok.height - n).all():  # the usual case: a tail, no copies
                self.held, tok = tok.slice(tok.height - n), tok.slice(0, tok.height - n)
            else:
                self.held, tok = tok.filter(hold), tok.filter(~hold)
        return self._build(tok)

    def _build(self, ok: pl.DataFrame) -> dict[str, pl.DataFrame]:
        files = set(ok.get_column("file").unique().drop_nulls().to_list())

        def part(feeds: set[str]) -> pl.DataFrame | None:  # the rows a table needs
            return ok.filter(pl.col("file").is_in(sorted(feeds))) if files & feeds else None

        cpu, mem, io, lim = (part(s) for s in (_CPU_FILES, _MEM_FILES, _IO_FILES, _LIMIT_FILES))
        none = pl.DataFrame()
        return {
            "cgroup_cpu": none if cpu is None else self._cpu(cpu),
            "cgroup_memory": (
                none
                if mem is None
                else wide(memory_long(mem), ["ts", "cgroup"], self._cols("cgroup_memory"))
            ),
            "cgroup_memory_stat": ok.filter(pl.col("file").is_in(MEM_KEYED)).select(
                "ts", "cgroup", "file", "key", value=pl.col("val").cast(pl.Int64, strict=False)
            ),
            "cgroup_io": none if io is None else io_rows(io),
            "cgroup_limits": none if lim is None else limits(lim),
        }

    def _cols(self, name: str, but: tuple[str, ...] = ()) -> list[str]:
        return [c.name for c in self.tables[name].columns if c.name not in but]

    def _cpu(self, ok: pl.DataFrame) -> pl.DataFrame:
        derived = ("throttled_pct", "throttled_ms_per_s", "usage_pct")
        cpu = wide(cpu_long(ok), ["ts", "cgroup"], self._cols("cgroup_cpu", derived))
        cpu, r1, self.prev["throttle"] = deltas(
            cpu,
            ["nr_periods", "nr_throttled", "throttled_usec"],
            {
                "throttled_pct": pl.when(pl.col("d_nr_periods") > 0).then(
                    100.0 * pl.col("d_nr_throttled") / pl.col("d_nr_periods")
                ),
                "throttled_ms_per_s": pl.col("d_throttled_usec") / 1000.0 / pl.col("dt_s"),
            },
            self.prev["throttle"],
        )
        cpu, r2, self.prev["usage"] = deltas(
            cpu,
            ["usage_usec"],
            {"usage_pct": 100.0 * pl.col("d_usage_usec") / (pl.col("dt_s") * 1e6)},
            self.prev["usage"],
        )
        self.resets += r1 + r2
        return cpu


#: files that feed each table (a chunk without any skips the table's work)
_CPU_FILES = {f for f, _ in CPU_MAP}
_MEM_FILES = {*MEM_SINGLE, "memory.events", "memory.oom_control"}
_IO_FILES = {"io.stat", *BLKIO_FILES}
_LIMIT_FILES = {*LIMIT_SINGLE, "cpu.max", "io.max"}
