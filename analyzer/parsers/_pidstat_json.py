"""``pidstat -o JSON`` (sysstat 12.7) -> the same row frame as the text path of ``pidstat.py``.

sysstat writes one task record per line inside per-report arrays::

    {"sysstat": {
        "hosts": [
            {
                "nodename": "SYSSTAT.TEST",
                ...
                "date": "06/01/20",
                "statistics": [
                    {
                        "timestamp": "12:53:22",
                        "task-cpu-load": [
                            {"UID": "1000", "TGID": "7900", "TID": "", "usr": 359.42, ..., "cmd": "gnome-shell"},

so the file is read lazily line by line: each known key of a record line is cut out with
a regex (robust to truncated records), ``timestamp``/``date`` lines are forward
filled onto them, everything else is JSON structure. Values are locale-independent.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.parsers import _sysstat as ss
from analyzer.parsers._read import read_lines
from analyzer.parsers._sampler import reason, tally
from analyzer.parsers.base import Coverage, ParseContext

RECORD_RE = r'^\s*\{"(UID|USER|PID|TGID)"'

#: JSON key -> column, per report section
JSON_KEYS = {
    **{"UID": "uid", "USER": "user", "PID": "pid", "TGID": "tgid", "TID": "tid"},
    **{"usr": "usr_pct", "system": "system_pct", "guest": "guest_pct", "wait": "wait_pct"},
    **{"cpu": "cpu_pct", "cpu_nr": "cpu", "usr_ms": "usr_ms", "system_ms": "system_ms"},
    **{"guest_ms": "guest_ms", "minflt/s": "minflt_s", "majflt/s": "majflt_s"},
    **{"minflt_nr": "minflt_nr", "majflt_nr": "majflt_nr", "VSZ": "vsz_kb", "RSS": "rss_kb"},
    **{"MEM": "mem_pct", "StkSize": "stk_size_kb", "StkRef": "stk_ref_kb"},
    **{"kB_rd/s": "kb_rd_s", "kB_wr/s": "kb_wr_s", "kB_ccwr/s": "kb_ccwr_s"},
    **{"iodelay": "iodelay_ticks", "cswch/s": "cswch_s", "nvcswch/s": "nvcswch_s"},
    **{"threads": "threads", "fd-nr": "fd_nr", "prio": "prio", "policy": "policy"},
    "cmd": "command",
}


def _field(key: str) -> pl.Expr:
    """The value of ``key`` in a record line, as text ("" for an empty string)."""
    g = pl.col("rec").str.extract_groups(rf'"{re.escape(key)}":\s*(?:"([^"]*)"|([-+\d.eE]+))')
    return pl.coalesce(g.struct.field("1"), g.struct.field("2"))


def looks_like(head: str) -> bool:
    """True for sysstat JSON carrying pidstat task records."""
    return head.lstrip().startswith('{"sysstat"') and '"task-' in head


def rows(path: Path, ctx: ParseContext, cov: Coverage) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """(row frame of strings/numbers, seg -> date frame, meta) for a pidstat JSON file."""
    line = pl.col("line")
    is_rec = line.str.contains(RECORD_RE)
    is_host = line.str.contains(r'^\s*"nodename":')
    stamp = line.str.extract(r'^\s*"timestamp":\s*"([^"]*)"', 1)
    date_txt = line.str.extract(r'^\s*"date":\s*"([^"]*)"', 1)
    lf = (
        read_lines(path)
        .with_columns(
            seg=is_host.cum_sum(),
            time_tok=stamp,
            date_txt=date_txt,
            host=line.str.extract(r'^\s*"nodename":\s*"([^"]*)"', 1),
            rec=pl.when(is_rec).then(line.str.strip_chars().str.strip_suffix(",")),
        )
        .with_columns(
            time_tok=pl.col("time_tok").forward_fill(),
            date_txt=pl.col("date_txt").forward_fill().over("seg"),
            why=pl.when(line.str.len_bytes() > ctx.max_line_bytes)
            .then(pl.lit(reason("skipped", "line too long")))
            .when(is_rec)
            .then(None)
            .when(line.str.contains(r'^\s*[\[\]{}",:\w-]'))
            .then(pl.lit(reason("structure", "json")))
            .when(line.str.strip_chars() == "")
            .then(pl.lit(reason("structure", "blank")))
            .otherwise(pl.lit(reason("skipped", "not pidstat JSON"))),
        )
    )
    df = lf.collect(engine="streaming")
    tally(cov, df)
    recs = df.filter(pl.col("why").is_null())
    fields = {c: _field(k) for k, c in JSON_KEYS.items()}
    out = (
        recs.select("line_no", "seg", "time_tok", "rec")
        .with_columns(
            **{c: e for c, e in fields.items() if c not in ("pid", "tgid", "tid")},
            pid=pl.coalesce(fields["pid"], fields["tgid"].replace("", None)),
            tid=fields["tid"].replace("", None),
            hdr_tok=pl.lit(None, pl.Utf8),
            block=pl.lit(0, pl.UInt32),
        )
        .drop("rec")
    )
    out = out.with_columns(
        pl.col(c).cast(pl.Utf8) for c in out.columns if c not in ("line_no", "seg", "block")
    ).with_columns(pl.col("seg").cast(pl.UInt32))
    segs = (
        df.filter(pl.col("date_txt").is_not_null()).group_by("seg").agg(pl.col("date_txt").first())
    )
    dates = pl.DataFrame(
        {
            "seg": segs["seg"].cast(pl.UInt32),
            "date": [ss.parse_date(t) for t in segs["date_txt"].to_list()],
        },
        schema={"seg": pl.UInt32, "date": pl.Date},
    )
    hosts = df["host"].drop_nulls()
    meta = {"host": hosts[0]} if hosts.len() else {}
    return out, dates, meta
