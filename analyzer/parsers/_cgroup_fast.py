"""cgroup sampler lines from CSV fields: the fast path of ``cgroup.py`` for clean chunks.

Input: the fields of :func:`._sampler_stream.fields` (``e``, ``p``, ``f0`` .. ``f3``) of
one clean chunk. A line is taken here only in one of the shapes the capture writes, with
exactly the tokens ``cgroup._tokenize`` would give it:

- keyed files (``cpu.stat``, ``memory.stat``, ``memory.events``...): ``key int``;
- single-value files (``memory.current``, ``cpuacct.usage``...): ``int`` or ``max``;
- ``io.stat`` / ``io.max``: ``maj:min k=v ...`` (``kv`` is cut from the line's text);
- v1 ``blkio.throttle.*``: ``maj:min Read|Write|Discard int`` (rows), ``[maj:min] Total
  int`` and ``maj:min Sync|Async int`` (structure);
- any line of a ``*.pressure`` file (skipped: the psi parser's) or of a file the parser
  does not support (skipped).

Everything else (``cpu.max``, other shapes, lines with runs of spaces, non-sampler lines)
is left to the regular expressions. Output: the token frame of parsed lines (``line_no,
ts, cgroup, file, key, val, val2, device, kv``, strings except ts, in line order), the
coverage counts of the lines decided here, and the mask of the other lines.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzer.parsers import _cgroup_tables as ct
from analyzer.parsers import _sampler_stream as st

FIELDS: dict[str, pl.DataType] = {
    "e": pl.String(),
    "p": pl.String(),
    **{f"f{i}": pl.String() for i in range(4)},
}
_REST, _PSI, _UNSUPPORTED, _KEYED, _SINGLE, _IO, _BLK = range(7)
_DEV = r"^\d+:\d+$"
_CPU_KEYS = {f: [k for (ff, k) in ct.CPU_MAP if ff == f] for f in ("cpu.stat", "cpuacct.stat")}
_FLAGS = ("keyed", "unknown_cpu", "single", "io", "blk", "total", "sync")


def _path_kind() -> pl.Expr:
    """Kind of a sampler path's file (``_PSI`` ... ``_BLK``; ``_REST``: left to regexes)."""
    f = pl.col("path_file")
    return (
        pl.when(f.str.ends_with(".pressure"))
        .then(_PSI)
        .when(~f.is_in(ct.ALL_FILES))
        .then(_UNSUPPORTED)
        .when(f.is_in(ct.KEYED_FILES))
        .then(_KEYED)
        .when(f.is_in(ct.SINGLE_FILES))
        .then(_SINGLE)
        .when(f.is_in(["io.stat", "io.max"]))
        .then(_IO)
        .when(f.is_in(ct.BLKIO_FILES))
        .then(_BLK)
        .otherwise(_REST)
        .cast(pl.UInt8)
    )


def tokens(
    chunk: st.Chunk, f: pl.DataFrame, bad: np.ndarray, cgroup: pl.Expr
) -> tuple[pl.DataFrame, dict[str | None, int], np.ndarray]:
    """Parsed tokens, ``{reason: lines}`` (``smp.reason`` values, None = parsed) and the
    mask of the lines left to the regular expressions. ``cgroup``: the cgroup of
    ``path_dir`` (an expression)."""
    file = pl.col("path_file")
    cpu_file = pl.when(file == "cpu.stat").then(1).when(file == "cpuacct.stat").then(2)
    run, runs = st.prefix_runs(
        f, kind=_path_kind(), cpu=cpu_file.otherwise(0).cast(pl.UInt8), file=file, cgroup=cgroup
    )
    rest = pl.lit(_REST, pl.UInt8)
    runs = runs.with_columns(kind=pl.when("s_ok").then("kind").otherwise(rest))
    f0, f1, f2 = (pl.col(f"f{i}") for i in range(3))
    kind = pl.col("kind")
    g = f.with_columns(
        run=run,
        kind=runs.get_column("kind").gather(run),
        cpu=runs.get_column("cpu").gather(run),
        bad=pl.Series(bad),
    ).with_columns(kind=pl.when(pl.col("bad") | f0.is_null()).then(rest).otherwise(kind))
    g = _flags(g, set(runs.get_column("kind").unique().to_list()))
    sums = g.select(
        (kind == _PSI).sum().alias("psi"),
        (kind == _UNSUPPORTED).sum().alias("unsupported"),
        *(pl.col(c).sum() for c in _FLAGS),
    ).row(0, named=True)
    counts: dict[str | None, int] = {
        "skipped:psi line (psi parser)": sums["psi"],
        "skipped:unsupported cgroup file": sums["unsupported"],
        "skipped:unknown cpu.stat key": sums["unknown_cpu"],
        "structure:blkio total": sums["total"],
        "structure:blkio sync/async (redundant)": sums["sync"],
        None: sums["keyed"] + sums["single"] + sums["io"] + sums["blk"],
    }
    decided = pl.any_horizontal(*_FLAGS) | kind.is_in([_PSI, _UNSUPPORTED])
    left = ~g.select(decided).to_series().to_numpy()
    rows = g.with_columns(line_no=chunk.line_nos()).filter(
        pl.col("keyed") | pl.col("single") | pl.col("io") | pl.col("blk")
    )
    at = rows.get_column("run")
    tok = rows.select(
        "line_no",
        runs.get_column("ts").gather(at),
        runs.get_column("cgroup").gather(at),
        runs.get_column("file").gather(at),
        key=pl.when("keyed").then(f0).when("blk").then(f1),
        val=pl.when("keyed").then(f1).when("single").then(f0).when("blk").then(f2),
        val2=pl.lit(None, pl.String),
        device=pl.when(pl.col("io") | pl.col("blk")).then(f0),
        kv=pl.lit(None, pl.String),
    )
    if sums["io"]:
        tok = _io_kv(chunk, rows, tok)
    return tok, {k: v for k, v in counts.items() if v}, left


def _flags(g: pl.DataFrame, present: set[int]) -> pl.DataFrame:
    """One boolean column per shape of line decided here (see the module doc); shapes of
    files absent from the chunk (``present``: kinds of its runs) cost nothing."""
    f0, f1, f2, f3 = (pl.col(f"f{i}") for i in range(4))
    kind, cpu = pl.col("kind"), pl.col("cpu")
    no = pl.lit(False)
    out = {c: no for c in _FLAGS}
    if _KEYED in present:
        g = g.with_columns(_k=(kind == _KEYED) & _is_int(f1) & f2.is_null())
        known = ((cpu == 1) & f0.is_in(_CPU_KEYS["cpu.stat"])) | (
            (cpu == 2) & f0.is_in(_CPU_KEYS["cpuacct.stat"])
        )
        g = g.with_columns(_u=pl.col("_k") & (cpu > 0) & ~known)
        out["keyed"], out["unknown_cpu"] = pl.col("_k") & ~pl.col("_u"), pl.col("_u")
    if _SINGLE in present:
        out["single"] = (kind == _SINGLE) & f1.is_null() & ((f0 == "max") | _is_int(f0))
    dev = pl.when(kind >= _IO).then(f0).str.contains(_DEV)
    if _IO in present:
        out["io"] = (kind == _IO) & dev & f1.is_not_null()
    if _BLK in present:
        blk = (kind == _BLK) & dev & _digits(f2) & f3.is_null()
        out["blk"] = blk & f1.is_in(["Read", "Write", "Discard"])
        total = (kind == _BLK) & (f0 == "Total") & _digits(f1) & f2.is_null()
        out["total"] = (blk & (f1 == "Total")) | total
        out["sync"] = blk & f1.is_in(["Sync", "Async"])
    return g.with_columns(e.fill_null(False).alias(c) for c, e in out.items())


def _io_kv(chunk: st.Chunk, rows: pl.DataFrame, tok: pl.DataFrame) -> pl.DataFrame:
    """``kv`` of io.stat / io.max rows: the line after the device, as the regexes cut it."""
    io = rows.get_column("io")
    idx = (rows.get_column("line_no").filter(io).cast(pl.Int64) - chunk.first_line).to_numpy()
    text = st.text_lines(chunk, idx).get_column("line")
    kv = text.str.splitn(" ", 4).struct.field("field_3").str.strip_chars_end()
    full = pl.Series("kv", [None] * tok.height, dtype=pl.String).scatter(
        np.flatnonzero(io.to_numpy()), kv
    )
    return tok.with_columns(full)


def _is_int(e: pl.Expr) -> pl.Expr:
    """``-?\\d+`` (a clean chunk has no ``+``, which the cast would accept)."""
    return e.cast(pl.Int64, strict=False).is_not_null()


def _digits(e: pl.Expr) -> pl.Expr:
    """``\\d+``."""
    return _is_int(e) & ~e.str.starts_with("-")
