"""Tokenizer for ``nvidia-smi -q`` text output (private helper of ``nvidia_smi_q``).

The text form is ``Key : value`` with the colon in a fixed column and nesting by 4-space
indentation; section names stand alone. Each line gets its full path (section names of
the enclosing levels plus its own key) with vectorized forward fills, one column per
nesting level, so no Python loop runs per line.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analyzer.parsers import _read
from analyzer.parsers.base import Coverage

GPU_RE = r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$"
BANNER_RE = r"^=+\s*NVSMI LOG\s*=+\s*$"
KV_RE = r"^(\s*)(\S(?:.*?\S)?)\s+: ?(.*)$"
PROMPT_RE = r"^\S*[$#>] (sudo )?nvidia-smi\b"
MAX_LEVEL = 8


def tokenize(path: Path, cov: Coverage) -> tuple[list[dict[str, str]], dict[str, str]]:
    """-> (one ``{path: value}`` dict per GPU section, the top-level ``{key: value}``).

    GPU dicts carry ``"@bus_id"`` from the ``GPU <bus id>`` line and ``"@index"`` (its
    position); both are absent for a fragment whose GPU line was not captured. Coverage is filled for every line.
    """
    df = _read.read_lines(path).collect()
    cov.total += df.height
    line = pl.col("line")
    body = line.str.strip_chars_start(" \t")
    kv = line.str.extract_groups(KV_RE)
    df = df.with_columns(
        level=((line.str.len_chars() - body.str.len_chars()) // 4).cast(pl.Int32),
        key=pl.coalesce(kv.struct.field("2"), line.str.strip_chars()),
        value=kv.struct.field("3").str.strip_chars(),
        kind=pl.when(line.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(line.str.contains(BANNER_RE))
        .then(pl.lit("banner"))
        .when(line.str.contains(GPU_RE))
        .then(pl.lit("gpu"))
        .when(line.str.contains(PROMPT_RE))
        .then(pl.lit("prompt"))
        .when(kv.struct.field("2").is_not_null())
        .then(pl.lit("kv"))
        .otherwise(pl.lit("section")),
    )
    nonblank = pl.col("kind") != "blank"
    section = pl.col("kind") == "section"
    levels = [
        pl.when(section & (pl.col("level") == k))
        .then(pl.col("key"))
        .when(nonblank & (pl.col("level") <= k))
        .then(pl.lit(""))
        .forward_fill()
        .alias(f"s{k}")
        for k in range(MAX_LEVEL)
    ]
    df = df.with_columns(levels).with_columns(
        gpu_seq=(pl.col("kind") == "gpu").cast(pl.Int32).cum_sum(),
        bus_id=pl.when(pl.col("kind") == "gpu")
        .then(line.str.strip_chars().str.slice(4))
        .forward_fill(),
    )
    # path = enclosing sections (levels 1 .. level-1) + own key, '/'-joined
    parents = [
        pl.when((pl.col("level") > k) & (pl.col(f"s{k}") != "")).then(pl.col(f"s{k}"))
        for k in range(1, MAX_LEVEL)
    ]
    df = df.with_columns(
        path=pl.concat_list([*parents, pl.col("key")]).list.drop_nulls().list.join("/")
    )
    counts = dict(df.group_by("kind").len().iter_rows())
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("banner", counts.get("banner", 0))
    cov.add_skipped("shell prompt, not nvidia-smi output", counts.get("prompt", 0))
    top_junk = df.filter((pl.col("kind") == "section") & (pl.col("level") == 0))
    cov.add_skipped("unrecognized line", top_junk.height)
    cov.parsed += counts.get("gpu", 0) + counts.get("kv", 0) + counts.get("section", 0)
    cov.parsed -= top_junk.height

    kvs = df.filter(pl.col("kind") == "kv")
    top = {
        k: v
        for k, v in kvs.filter(pl.col("level") == 0).select("key", "value").iter_rows()
        if k not in ("Attached GPUs",)
    }
    gpus: list[dict[str, str]] = []
    inner = kvs.filter(pl.col("level") > 0)
    for (seq,), grp in inner.group_by(["gpu_seq"], maintain_order=True):
        d: dict[str, str] = {}
        for p, v, bus in grp.select("path", "value", "bus_id").iter_rows():
            d.setdefault(p, v)
            if bus is not None and seq:
                d["@bus_id"] = bus
                d["@index"] = str(seq - 1)
        gpus.append(d)
    return gpus, top
