"""``ps`` snapshots -> ``processes``.

Supported: the capture's top-100 lists (procps-ng 3.3/4.x)
``ps -eo pid,ppid,user,pri,ni,psr,stat,pcpu,pmem,rss,vsz,nlwp,etimes,comm,args
--sort=-pcpu|-rss | head -n 101`` (``snap/ps_cpu.*.out``, ``snap/ps_rss.*.out``, args
already masked by the capture), its busybox fallback ``ps -o pid,ppid,user,vsz,rss,stat,
comm,args`` (VSZ/RSS may carry ``m``/``g`` suffixes), and hand-made ``ps aux``,
``ps -ef``, ``ps -e`` or any ``ps -o`` list whose header uses the standard names.

The header decides the columns: every header word but the command column(s) is one
whitespace-free field; the last column (``COMMAND``/``CMD``/``ARGS``) takes the rest of
the line. With two command columns (``comm,args``, both headed ``COMMAND``) the first is
fixed-width (its width is read from the header) and may contain spaces. A lone ``CMD``
in a short header (``ps -e``: PID TTY TIME CMD) is the command name, else the command
line. A file may hold several header blocks (concatenated outputs).

One row per listed process (columns in ``TABLES``); ``ranking`` is 'cpu' | 'rss' from the
capture file name, ``rank`` the position in its block. ``ts`` is the capture start/end
time for ``.start``/``.end`` files, else NULL (noted).

Sample input (``snap/ps_cpu.start.out``)::

      PID  PPID USER     PRI  NI PSR STAT %CPU %MEM   RSS    VSZ NLWP ELAPSED COMMAND         COMMAND
    10711  6015 root      19   0   1 Sl   54.4  1.6 395192 3287528 12      23 python          .venv/bin/python /tmp/perf.py
       77     2 root      19   0   1 I     0.3  0.0     0      0    1    1236 kdamond.0       [kdamond.0]
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _snap_common as snap

S = pl.String
TABLES: dict[str, base.Table] = {
    "processes": base.table(
        "one row per process listed in a ps snapshot",
        *snap.SNAP_COLUMNS,
        ("ranking", S, "", "'cpu' (top by %CPU) or 'rss' (top by RSS) list; NULL if unknown"),
        ("rank", pl.Int32, "", "1-based position in the listing"),
        ("pid", pl.Int64, "", "process id"),
        ("ppid", pl.Int64, "", "parent process id"),
        ("user", pl.String, "", "user name (or uid when ps prints it so)"),
        ("pri", pl.Int32, "", "scheduling priority as ps prints it"),
        ("ni", pl.Int32, "", "nice value (NULL for '-': real-time)"),
        ("psr", pl.Int32, "", "CPU the process last ran on"),
        ("state", pl.String, "", "STAT/S column (R, S, D, Z... plus flags)"),
        ("cpu_pct", pl.Float64, "%", "CPU time / elapsed time since start (ps %CPU, or -f C)"),
        ("mem_pct", pl.Float64, "%", "RSS / physical memory"),
        ("rss_kb", pl.Int64, "kB", "resident set size"),
        ("vsz_kb", pl.Int64, "kB", "virtual size"),
        ("nlwp", pl.Int32, "", "number of threads"),
        ("elapsed_s", pl.Int64, "s", "time since the process started (etimes / etime)"),
        ("cpu_time_s", pl.Int64, "s", "cumulative CPU time (TIME column)"),
        ("tty", pl.String, "", "controlling terminal"),
        ("start", pl.String, "", "start time as printed (START/STIME)"),
        ("comm", pl.String, "", "command name (max 15 chars; may contain spaces)"),
        ("args", pl.String, "", "full command line (secrets masked by the capture)"),
    )
}

_COLS = dict(  # header word -> column
    re.findall(
        r"(\S+)=(\S+)",
        "PID=pid PPID=ppid USER=user UID=user RUSER=user PRI=pri NI=ni PSR=psr STAT=state S=state"
        " %CPU=cpu_pct C=cpu_pct %MEM=mem_pct RSS=rss_kb RSZ=rss_kb VSZ=vsz_kb VSIZE=vsz_kb"
        " NLWP=nlwp ELAPSED=elapsed TTY=tty TT=tty START=start STIME=start STARTED=start"
        " TIME=cpu_time",
    )
)
_CMD = {"COMMAND", "CMD", "ARGS"}
_KB = {"": 1, "k": 1, "m": 1024, "g": 1024**2, "t": 1024**3}  # busybox suffixes
HEADER = r"^\s*(?:PID|USER|UID|RUSER)\s+.*\b(?:COMMAND|CMD|ARGS)\s*$"


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is ``ps`` output."""
    lns = [ln for ln in head.splitlines()[:20] if ln.strip()]
    for i, ln in enumerate(lns[:5]):
        if re.match(HEADER, ln) and "PID" in ln.split():
            data = lns[i + 1 : i + 6]
            if not data or sum(1 for d in data if re.match(r"^\s*\S+\s+\d+\s", d)) >= len(data) / 2:
                return 0.95 if name.startswith("ps") else 0.9
            return 0.5
    return 0.0


def _seconds(expr: pl.Expr) -> pl.Expr:
    """``[[dd-]hh:]mm:ss`` or plain seconds -> seconds (Int64)."""
    g = expr.str.extract_groups(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")
    t = (
        g.struct.field("1").cast(pl.Int64, strict=False).fill_null(0) * 86400
        + g.struct.field("2").cast(pl.Int64, strict=False).fill_null(0) * 3600
        + g.struct.field("3").cast(pl.Int64, strict=False) * 60
        + g.struct.field("4").cast(pl.Int64, strict=False)
    )
    return pl.when(expr.str.contains(":")).then(t).otherwise(expr.cast(pl.Int64, strict=False))


def _kb(expr: pl.Expr) -> pl.Expr:
    """kB value, accepting busybox suffixes (``12m`` = 12 MiB)."""
    g = expr.str.to_lowercase().str.extract_groups(r"^(\d+(?:\.\d+)?)([kmgt]?)$")
    mult = g.struct.field("2").replace_strict(_KB, default=None, return_dtype=pl.Int64)
    value = g.struct.field("1").cast(pl.Float64, strict=False) * mult
    return value.round().cast(pl.Int64, strict=False)  # > 2**63: NULL, not a crash


def _block(block: pl.DataFrame, header: str) -> tuple[pl.DataFrame, pl.Series]:
    """Rows of one header block, and each line's verdict."""
    words = header.split()
    n_cmd = 0
    while n_cmd < len(words) and words[len(words) - 1 - n_cmd] in _CMD:
        n_cmd += 1
    fields = words[: len(words) - n_cmd]
    rx = r"^\s*" + r"(\S+)\s+" * len(fields) + r"(.*?)\s*$"
    g = pl.col("line").str.extract_groups(rx)
    cols = [g.struct.field(str(i + 1)).alias(f"f{i}") for i in range(len(fields))]
    rest = g.struct.field(str(len(fields) + 1))
    if n_cmd >= 2:
        starts = [m.start() for m in re.finditer(r"\S+", header)]
        width = starts[-1] - starts[-2] - 1
        fixed = (rest.str.len_chars() > width) & (rest.str.slice(width, 1) == " ")
        head, tail = rest.str.slice(0, width).str.strip_chars_end(), rest.str.slice(width + 1)
        comm = pl.when(fixed).then(head).otherwise(rest.str.extract(r"^(\S+)", 1))
        args = pl.when(fixed).then(tail).otherwise(rest.str.extract(r"^\S+\s+(.*)$", 1))
    elif words[-1] == "CMD" and len(words) <= 4:
        comm, args = rest, pl.lit(None, pl.String)
    else:
        comm, args = pl.lit(None, pl.String), rest
    out = block.with_columns(*cols, comm.alias("comm"), args.alias("args"), rest.alias("_rest"))
    ok = out["_rest"].is_not_null()
    names: dict[str, str] = {}
    for i, f in enumerate(fields):  # a mangled header may repeat a column: the first one wins
        col = _COLS.get(f.upper(), f"x_{i}")
        names[f"f{i}"] = col if col not in names.values() else f"x_{i}"
    out = out.filter(ok).rename(names).drop("_rest")
    return out, ok


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse ``ps`` output into ``processes``."""
    cov = base.Coverage()
    name = ctx.file_name or path.name
    df = snap.lines(path, cov.notes)
    hdr = pl.col("line").str.contains(HEADER) & pl.col("line").str.contains(r"\bPID\b")
    df = df.with_columns(pl.when(hdr).then(pl.col("line_no")).forward_fill().alias("hdr"))
    if df["line"].str.strip_chars().ne("").any() and df["hdr"].is_null().all():
        raise ParseError(f"{name}: no ps header line (PID ... COMMAND)")
    phase, ts = snap.snapshot_time(path, ctx, cov.notes)
    m = re.search(r"(?:^|_)ps_(cpu|rss)(?:[.-]|$)", name)
    what = snap.classify(
        (pl.col("hdr") == pl.col("line_no"), "header"),
        (pl.col("hdr").is_null(), "before"),
        (snap.truncated(df, path), "truncated"),
        (pl.lit(True), "data"),
    )
    df = df.with_columns(what.alias("what"))
    headers = dict(df.filter(pl.col("what") == "header").select("line_no", "line").iter_rows())
    frames, bad = [], 0
    data = df.filter(pl.col("what") == "data")
    for h, block in data.partition_by("hdr", as_dict=True, maintain_order=True).items():
        rows, ok = _block(block, headers[h[0]])
        bad += int((~ok).sum())
        frames.append(rows.with_columns(pl.int_range(1, rows.height + 1).alias("rank")))
    verdicts = df["what"].replace({"data": "parsed"})
    snap.account(cov, verdicts, snap.REASONS | {"before": ("skipped", "text before the ps header")})
    if bad:
        cov.parsed -= bad
        cov.add_skipped("line does not fit the header's columns", bad)
    rows = pl.DataFrame()
    if frames:
        rows = pl.concat(frames, how="diagonal_relaxed")
        rows = rows.with_columns(  # the columns this header lacks, as NULL
            pl.lit(None, S).alias(c) for c in dict.fromkeys(_COLS.values()) if c not in rows.columns
        ).with_columns(
            *[pl.col(c).cast(pl.Int64, strict=False) for c in ("pid", "ppid")],
            *[pl.col(c).cast(pl.Int32, strict=False) for c in ("pri", "ni", "psr", "nlwp")],
            *[_read.decimal_number(pl.col(c)).alias(c) for c in ("cpu_pct", "mem_pct")],
            *[_kb(pl.col(c)).alias(c) for c in ("rss_kb", "vsz_kb")],
            ranking=pl.lit(m.group(1) if m else None, S),
            elapsed_s=_seconds(pl.col("elapsed")),
            cpu_time_s=_seconds(pl.col("cpu_time")),
        )
    return base.ParseResult(snap.conformed(TABLES, {"processes": rows}, phase, ts), cov)
