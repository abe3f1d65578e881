"""The application's own log lines: the lines of a training or serving log that matched
``--app-pattern`` while the capture followed it (``--app-log FILE``,
``series/app_log_<n>.out``), each stamped with its arrival time, so that step time
becomes a series.

Input format (docs/bundle-format.md "Application series")::

    # hindsight-app-log begin pattern=<the ERE>
    <epoch_s> <path> <the log line, at most 4096 bytes>
    # hindsight-app-log dropped <n> matching lines (more than 50 in second <epoch>)

``epoch_s`` is when the capture read the line (``tail -F`` then ``awk``: as soon as the
program wrote it with GNU tail's inotify, else within tail's 1 s poll); ``path`` is
escaped like the sampler paths (``\\040`` space, ``\\011`` tab, ``\\012`` newline,
``\\134`` backslash).

Table ``app_log_line`` (types and units in ``TABLES``): the line and the numbers it
prints in a common form (PyTorch, DeepSpeed, Megatron-LM, HF Trainer, Lightning/tqdm,
nanoGPT, torchtitan; the forms are the regexes below). ``arrival_step_time_ms``: between
two lines of a file that print a step number, Δts / Δstep (NULL when the step did not
grow: a restart, or every rank printing the same step); in a file where no line prints a
step, every matched line is one step (Δts to the previous line).

Sample input::

    # hindsight-app-log begin pattern=iteration +[0-9]+
    1796175726.290014197 /var/log/train.log  iteration      120/    1000 | elapsed time per iteration (ms): 812.3 | lm loss: 2.310000E+00 |
    1796175727.102611897 /var/log/train.log  iteration      121/    1000 | elapsed time per iteration (ms): 809.9 | lm loss: 2.301000E+00 |
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers._read import read_lines
from analyzer.parsers._sampler import tally
from analyzer.parsers._snap_common import unescape
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, table

TABLES = {
    "app_log_line": table(
        "one row per matched line of an --app-log file",
        ("ts", TS, "", "arrival time of the line (UTC)"),
        ("file", pl.String(), "", "the log file followed"),
        ("pattern", pl.String(), "", "the --app-pattern ERE it matched (NULL when not recorded)"),
        ("line", pl.String(), "", "the log line as written (at most 4096 bytes)"),
        ("step", pl.Int64(), "", "step / iteration number printed in the line"),
        ("steps_total", pl.Int64(), "", "total steps when printed as N/M"),
        ("loss", pl.Float64(), "", "training loss printed in the line"),
        ("printed_step_time_ms", pl.Float64(), "ms", "step time printed (or 1000 / it/s)"),
        ("it_per_s", pl.Float64(), "1/s", "iterations per second printed (it/s, or 1 / s/it)"),
        ("samples_per_s", pl.Float64(), "1/s", "samples per second printed"),
        ("tokens_per_s", pl.Float64(), "1/s", "tokens per second printed"),
        (
            "arrival_step_time_ms",
            pl.Float64(),
            "ms",
            "Δarrival / Δstep to the previous line with a step",
        ),
        ("step_time_ms", pl.Float64(), "ms", "printed_step_time_ms, else arrival_step_time_ms"),
    )
}

_NUM = r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
_POS = r"([0-9]+(?:\.[0-9]+)?)"
_END = r"(?:[^0-9a-z.]|$)"  # after a step number: not a decimal, not a unit

STEP = (
    rf"(?i)(?:^|[^a-z0-9_])(?:global[_ ]?step|step|iteration|iter)\s*[:=#]?\s*\[?\s*([0-9]+)(?:\s*/\s*([0-9]+))?{_END}",
    r"\[\s*([0-9]+)\s*/\s*([0-9]+)\s*\]",
    r"(?:^|[|\s])([0-9]+)/([0-9]+)\s*\[[0-9]",
)
LOSS = (rf"(?i)(?:^|[^a-z0-9_])(?:lm[ _])?loss['\"]?\s*[:=]?\s*{_NUM}",)
TIME_MS = (r"(?i)elapsed time per iteration \(ms\):\s*" + _POS,)
TIME_UNIT = (
    rf"(?i)(?:step[_ ]?time|time[_ ]per[_ ]step|time/step|iter[_ ]?time|batch[_ ]?time|time)['\"]?\s*[:=]?\s*{_POS}\s*(ms|s)\b",
)
TIME_S = (r"(?i)\btime\s+" + _POS + r"\s+\(", _POS + r"\s*s/it\b")
IT_S = (_POS + r"\s*it/s\b",)
SAMPLES = (
    r"(?i)CurrSamplesPerSec\s*=\s*" + _POS,
    r"(?i)samples?[_ ]?per[_ ]?sec(?:ond)?['\"]?\s*[:=]\s*" + _POS,
    r"(?i)" + _POS + r"\s*samples?/s(?:ec)?\b",
)
TOKENS = (
    r"(?i)tokens?[_ ]?per[_ ]?sec(?:ond)?['\"]?\s*[:=]\s*([0-9][0-9.,]*)",
    r"(?i)([0-9][0-9.,]*)\s*tok(?:en)?s?/s(?:ec)?\b",
    r"(?i)(?:^|[^a-z0-9_])tps\s*[:=]\s*([0-9][0-9.,]*)",
)


def _first(text: pl.Expr, forms: tuple[str, ...], group: int = 1) -> pl.Expr:
    """Group ``group`` of the first of ``forms`` that matches ``text`` (String): NULL
    when that form has no such group in the line, even if a later form has."""
    out = pl.lit(None, pl.String)
    for f in reversed(forms):
        out = pl.when(text.str.contains(f)).then(text.str.extract(f, group)).otherwise(out)
    return out


def _float(e: pl.Expr) -> pl.Expr:
    return e.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)


def _numbers(text: pl.Expr) -> list[pl.Expr]:
    """The extracted columns: step, steps_total, loss, printed_step_time_ms, it_per_s,
    samples_per_s, tokens_per_s."""
    unit = _first(text, TIME_UNIT, 2).str.to_lowercase()
    t_unit = _float(_first(text, TIME_UNIT)) * pl.when(unit == "s").then(1000.0).otherwise(1.0)
    t_s = _float(_first(text, TIME_S))
    it_s = _float(_first(text, IT_S))
    printed = pl.coalesce(_float(_first(text, TIME_MS)), t_unit, t_s * 1000.0, 1000.0 / it_s)
    s_it = _float(text.str.extract(TIME_S[1], 1))
    return [
        _first(text, STEP).cast(pl.Int64, strict=False).alias("step"),
        _first(text, STEP, 2).cast(pl.Int64, strict=False).alias("steps_total"),
        _float(_first(text, LOSS)).alias("loss"),
        printed.alias("printed_step_time_ms"),
        pl.coalesce(it_s, 1.0 / s_it).alias("it_per_s"),
        _float(_first(text, SAMPLES)).alias("samples_per_s"),
        _float(_first(text, TOKENS)).alias("tokens_per_s"),
    ]


_DATA = r"^([0-9]{1,12}(?:\.[0-9]{1,9})?) (\S+) (.*)$"
_BEGIN = r"^# hindsight-app-log begin pattern=(.*)$"
_REMARK = "# hindsight-app-log "


def sniff(head: str, name: str) -> float:
    """Certain with the capture's header; likely for stamped lines of a non-kernel path."""
    if _REMARK in head:
        return 0.99
    lines = [ln for ln in head.splitlines()[:100] if ln.strip()]
    hits = [m for ln in lines if (m := re.match(_DATA, ln))]
    user_paths = all(
        m.group(2).startswith("/") and not m.group(2).startswith(("/proc/", "/sys/")) for m in hits
    )
    return 0.6 if lines and len(hits) * 2 >= len(lines) and user_paths else 0.0


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one app-log file into ``app_log_line`` (see the module docstring)."""
    df = read_lines(path).collect()
    line = pl.col("line")
    g = line.str.extract_groups(_DATA)
    df = df.with_columns(
        pattern=line.str.extract(_BEGIN, 1).forward_fill(),
        why=pl.when(line.str.starts_with(_REMARK))
        .then(pl.lit("structure:capture remark (# hindsight-app-log ...)"))
        .when(line.str.strip_chars() == "")
        .then(pl.lit("structure:blank"))
        .when(g.struct.field("1").is_null())
        .then(pl.lit("skipped:not a stamped log line")),
        epoch=g.struct.field("1"),
        file=unescape(g.struct.field("2")),
        text=g.struct.field("3"),
    )
    cov = Coverage()
    tally(cov, df)
    rows = df.filter(pl.col("why").is_null())
    if rows.height == 0 and cov.n_skipped:
        raise ParseError(f"{path.name}: no stamped log line")
    dropped = df.filter(line.str.starts_with(_REMARK + "dropped "))
    if dropped.height:
        n = dropped.get_column("line").str.extract(r"dropped ([0-9]+)", 1).cast(pl.Int64).sum()
        cov.notes.append(f"{n} matching lines were dropped by the capture (more than 50 a second)")
    if rows.height and rows.get_column("pattern").null_count() == rows.height:
        cov.notes.append(
            "the pattern header is not in the file (flight-recorder cut): pattern NULL"
        )
    return ParseResult(tables={"app_log_line": _typed(rows)}, coverage=cov)


def _epoch_us(e: pl.Expr) -> pl.Expr:
    whole = e.str.extract(r"^([0-9]+)", 1).cast(pl.Int64)
    frac = e.str.extract(r"\.([0-9]+)$", 1).fill_null("0").str.slice(0, 6).str.pad_end(6, "0")
    return whole * 1_000_000 + frac.cast(pl.Int64)


def _typed(rows: pl.DataFrame) -> pl.DataFrame:
    """Typed rows with the extracted numbers and the arrival-derived step time."""
    ts = pl.from_epoch(_epoch_us(pl.col("epoch")), time_unit="us").dt.replace_time_zone("UTC")
    out = rows.select(
        "line_no", ts.alias("ts"), "file", "pattern", pl.col("text").alias("line")
    ).with_columns(_numbers(pl.col("line")))
    stepped = out.filter(pl.col("step").is_not_null())
    dt = pl.col("ts").diff().over("file").dt.total_microseconds() / 1000.0
    if stepped.height:  # Δts / Δstep between consecutive lines with a step, per file
        ds = pl.col("step").diff().over("file")
        arrival = stepped.select("line_no", arrival=pl.when(ds > 0).then(dt / ds))
    else:  # no step numbers: each matched line is one step
        arrival = out.select("line_no", arrival=dt)
    out = out.join(arrival, on="line_no", how="left", maintain_order="left")
    return out.select(
        pl.exclude("line_no", "arrival"),
        arrival_step_time_ms=pl.col("arrival"),
        step_time_ms=pl.coalesce("printed_step_time_ms", "arrival"),
    )
