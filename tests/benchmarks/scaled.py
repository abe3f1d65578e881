"""Big bundles for benchmarks, made by tiling the real H200 capture (benchmark-private).

`hindsight synth` is the generator of record; this helper is the fallback the harness
uses when ``analyzer.synth`` is not installed, and a second, independent source of
realistic input: every line it writes is a line the real tools printed on the H200 host
(samples/h200-checkpoint-stall.tgz), with only the time stamps and the CPU / disk / GPU
ids rewritten.

How: each series file of the sample is cut into a prologue (banner, first headers), one
*block* per sampling tick and an epilogue (``Average:`` tables). The first ``K`` blocks
are repeated for as many ticks as asked, each repetition shifted by the time they span.
Per-CPU rows (mpstat), device rows (iostat) and GPU rows (dmon) are replicated to the
requested host shape; replica ``j`` of a row takes its values from a block ``7·j`` ticks
away so that CPUs, disks and GPUs do not all carry the same numbers. Text is produced
with polars, a few thousand ticks at a time (no Python loop per output line).

``iostat_json`` is not tiled (its JSON does not split into lines); the manifest marks it
``skipped``. Snapshots are copied unchanged.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "h200-checkpoint-stall.tgz"
K = 120  # source ticks per repetition
CHUNK = 1800  # output ticks generated per polars batch


@dataclass(frozen=True)
class Shape:
    """Host shape: logical CPUs, GPUs, block devices."""

    cpus: int
    gpus: int
    disks: int


@dataclass(frozen=True)
class Fmt:
    """How to find and rewrite the time stamp of a line, and where blocks start."""

    token: str  # regex with groups (pre, token, post)
    strftime: str | None  # None: the token is integer epoch seconds
    block_start: Callable[[str], bool] | None  # None: a block starts when the token changes


_HMS = Fmt(r"^()(\d\d:\d\d:\d\d)(.*)$", "%H:%M:%S", None)
FORMATS: dict[str, Fmt] = {
    "mpstat": Fmt(_HMS.token, _HMS.strftime, lambda s: bool(re.match(r"^\S+\s+CPU\s+%usr", s))),
    "mpstat_irq": Fmt(
        _HMS.token, _HMS.strftime, lambda s: bool(re.match(r"^\S+\s+CPU\s+intr/s", s))
    ),
    "sar": Fmt(_HMS.token, _HMS.strftime, lambda s: bool(re.match(r"^\S+\s+proc/s", s))),
    "iostat": Fmt(
        r"^()(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\+0000)$",
        "%Y-%m-%dT%H:%M:%S",
        lambda s: bool(re.match(r"^\d{4}-\d\d-\d\dT", s)),
    ),
    "pidstat": Fmt(r"^()(\d{10})(\s.*)$", None, lambda s: s.startswith("# Time")),
    "vmstat": Fmt(
        r"^(.*\s)(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)()$", "%Y-%m-%d %H:%M:%S", lambda s: True
    ),
    "nvidia_dmon": Fmt(r"^( )(\d{8}    \d\d:\d\d:\d\d)(.*)$", "%Y%m%d    %H:%M:%S", lambda s: True),
    "psi": Fmt(r"^()(\d{10})(\..*)$", None, None),
    "cgroup": Fmt(r"^()(\d{10})(\..*)$", None, None),
    "meminfo": Fmt(r"^()(\d{10})(\..*)$", None, None),
    "proc_vmstat": Fmt(r"^()(\d{10})(\..*)$", None, None),
}


def _split(name: str, lines: list[str]) -> tuple[list[str], list[list[str]], list[str]]:
    """(prologue, blocks, epilogue) of a sample file."""
    fmt = FORMATS[name]
    tok = re.compile(fmt.token)
    if name == "vmstat":  # 2 header lines and the since-boot row
        return lines[:3], [[x] for x in lines[3:]], []
    if name == "nvidia_dmon":  # keep the first header pair, drop the periodic repeats
        rows = [x for x in lines if not x.startswith("#")]
        return lines[:2], [[x] for x in rows], []
    epi_at = next((i for i, x in enumerate(lines) if x.startswith("Average:")), len(lines))
    body, epilogue = lines[:epi_at], lines[epi_at:]
    blocks: list[list[str]] = []
    prologue: list[str] = []
    prev = None
    for x in body:
        m = tok.match(x)
        if fmt.block_start is None:
            start = m is not None and m.group(2) != prev
            prev = m.group(2) if m else prev
        else:
            start = fmt.block_start(x)
        if start:
            blocks.append([x])
        elif blocks:
            blocks[-1].append(x)
        else:
            prologue.append(x)
    return prologue, blocks, epilogue


def _replicate(
    blocks: list[list[str]],
    n: int,
    is_row: Callable[[str], bool],
    rename: Callable[[str, str, int], str],
) -> list[list[str]]:
    """Replace each run of id rows by ``n`` rows; replica j takes values from block i+7j."""

    def runs(block: list[str]) -> list[list[str]]:
        out: list[list[str]] = []
        for i, x in enumerate(block):
            if is_row(x):
                if i and is_row(block[i - 1]):
                    out[-1].append(x)
                else:
                    out.append([x])
        return out

    k = len(blocks)
    all_runs = [runs(b) for b in blocks]
    out = []
    for i, block in enumerate(blocks):
        new: list[str] = []
        r = -1
        for j, x in enumerate(block):
            if not is_row(x):
                new.append(x)
                continue
            if j and is_row(block[j - 1]):
                continue
            r += 1
            src_n = len(all_runs[i][r])
            for c in range(n):
                src_runs = all_runs[(i + 7 * (c // src_n)) % k]
                run = src_runs[r] if r < len(src_runs) else all_runs[i][r]
                new.append(rename(run[c % len(run)], x, c))
        out.append(new)
    return out


def _cpu_row(x: str) -> bool:
    return len(x) > 16 and x[8:16].strip().isdigit() and x[:8] != "Average:"


def _cpu_name(src: str, cur: str, c: int) -> str:
    """Row of CPU ``c``: time of ``cur``, values of ``src``."""
    return cur[:8] + f"{c:>8}" + src[16:]


def _disk_row(x: str) -> bool:
    return bool(re.match(r"^vd[a-z] {8}", x))


def _gpu_row(x: str) -> bool:
    return bool(re.match(r"^ \d{8} ", x))


def _scale(name: str, blocks: list[list[str]], shape: Shape) -> list[list[str]]:
    if name in ("mpstat", "mpstat_irq"):
        return _replicate(blocks, shape.cpus, _cpu_row, _cpu_name)
    if name == "iostat":
        return _replicate(
            blocks, shape.disks, _disk_row, lambda x, _cur, c: f"nvme{c}n1".ljust(10) + x[10:]
        )
    if name == "nvidia_dmon":
        return _replicate(
            blocks, shape.gpus, _gpu_row, lambda x, cur, c: cur[:21] + f"{c:>8}" + x[29:]
        )
    return blocks


def _fix_static(name: str, lines: list[str], shape: Shape) -> list[str]:
    """Banner CPU count; ``Average:`` per-CPU runs replicated to the host's CPUs."""
    out = [re.sub(r"\(\d+ CPU\)", f"({shape.cpus} CPU)", x) for x in lines]
    if name not in ("mpstat", "mpstat_irq"):
        return out

    def avg_cpu(x: str) -> bool:
        return x.startswith("Average:") and x[8:16].strip().isdigit()

    res: list[str] = []
    i = 0
    while i < len(out):
        if not avg_cpu(out[i]):
            res.append(out[i])
            i += 1
            continue
        j = i
        while j < len(out) and avg_cpu(out[j]):
            j += 1
        run = out[i:j]
        res += [_cpu_name(run[c % len(run)], run[0], c) for c in range(shape.cpus)]
        i = j
    return res


def _write_series(name: str, lines: list[str], shape: Shape, seconds: int, dest: Path) -> None:
    fmt = FORMATS[name]
    prologue, blocks, epilogue = _split(name, lines)
    if len(blocks) <= K:
        raise ValueError(f"{name}: sample has only {len(blocks)} blocks")
    tok = re.compile(fmt.token)

    def block_time(block: list[str]) -> datetime:
        for x in block:
            m = tok.match(x)
            if m:
                return _to_dt(m.group(2), fmt)
        raise ValueError(f"{name}: block without a time stamp")

    shift = int((block_time(blocks[K]) - block_time(blocks[0])).total_seconds())
    src = _scale(name, blocks[:K], shape)
    rows = [(b, s, x) for b, block in enumerate(src) for s, x in enumerate(block)]
    frame = pl.DataFrame(rows, schema=["blk", "seq", "line"], orient="row").with_columns(
        pl.col("line").str.extract_groups(fmt.token).alias("g")
    )
    frame = frame.with_columns(
        pl.col("g").struct.field("1").alias("pre"),
        pl.col("g").struct.field("2").alias("tok"),
        pl.col("g").struct.field("3").alias("post"),
    ).drop("g")
    if fmt.strftime is None:
        frame = frame.with_columns(pl.col("tok").cast(pl.Int64).alias("t"))
    else:
        fmt_in = fmt.strftime
        frame = frame.with_columns(pl.col("tok").str.to_datetime(fmt_in, time_unit="us").alias("t"))
    with open(dest, "w", encoding="utf-8", newline="\n") as out:
        out.write("".join(x + "\n" for x in _fix_static(name, prologue, shape)))
        for lo in range(0, seconds, CHUNK):
            ticks = pl.DataFrame({"j": pl.arange(lo, min(seconds, lo + CHUNK), eager=True)})
            part = (
                ticks.with_columns((pl.col("j") % K).alias("blk"), (pl.col("j") // K).alias("cyc"))
                .join(frame, on="blk", how="left", maintain_order="left_right")
                .sort(["j", "seq"])
            )
            if fmt.strftime is None:
                new_tok = (pl.col("t") + pl.col("cyc") * shift).cast(pl.String)
            else:
                new_tok = (pl.col("t") + pl.duration(seconds=pl.col("cyc") * shift)).dt.strftime(
                    fmt.strftime
                )
            text = part.select(
                pl.when(pl.col("tok").is_null())
                .then(pl.col("line"))
                .otherwise(pl.concat_str(pl.col("pre"), new_tok, pl.col("post")))
                .alias("line")
            )
            text.write_csv(out, include_header=False, quote_style="never")
        out.write("".join(x + "\n" for x in _fix_static(name, epilogue, shape)))


def _to_dt(token: str, fmt: Fmt) -> datetime:
    if fmt.strftime is None:
        return datetime.fromtimestamp(int(token), UTC)
    return datetime.strptime(token, fmt.strftime).replace(tzinfo=UTC)


def build(out_dir: Path, seconds: int, shape: Shape, *, compresslevel: int = 6) -> Path:
    """Write ``hindsight-bench-<shape>-<seconds>s.tgz`` into ``out_dir``; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="scaled-", dir=out_dir))
    try:
        with tarfile.open(SAMPLE) as tar:
            tar.extractall(work, filter="data")
        (top,) = [p for p in work.iterdir() if p.is_dir()]
        manifest = json.loads((top / "manifest.json").read_text())
        start = datetime.fromisoformat(manifest["start_utc"].replace("Z", "+00:00"))
        for f in sorted((top / "series").glob("*.out")):
            name = f.stem
            if name in FORMATS:
                lines = f.read_text(encoding="utf-8").split("\n")
                if lines and lines[-1] == "":
                    lines.pop()
                _write_series(name, lines, shape, seconds, f.with_suffix(".new"))
                f.with_suffix(".new").replace(f)
        (top / "series" / "iostat_json.out").unlink(missing_ok=True)
        for ext in ("status", "err"):
            (top / "series" / f"iostat_json.{ext}").unlink(missing_ok=True)
        _fix_manifest(manifest, top, start, seconds, shape)
        (top / "manifest.json").write_text(json.dumps(manifest, indent=1))
        name = f"hindsight-bench-{shape.cpus}c{shape.gpus}g{shape.disks}d-{seconds}s"
        root = work / name
        top.rename(root)
        target = out_dir / f"{name}.tgz"
        _tar(root, target, compresslevel)
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fix_manifest(manifest: dict, top: Path, start: datetime, seconds: int, shape: Shape) -> None:
    end = start + timedelta(seconds=seconds + 1)
    manifest["end_utc"] = manifest["updated_utc"] = end.strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest["duration_s"] = seconds
    manifest["host"]["cpus"] = shape.cpus
    for c in manifest["collectors"]:
        if c["name"] == "iostat_json":
            c.update(status="skipped", output=None, exit_code=None, bytes=0)
            c["reason"] = "not generated by the benchmark's scaled bundle"
        elif c.get("output") and (top / c["output"]).is_file():
            c["bytes"] = (top / c["output"]).stat().st_size


def _tar(root: Path, target: Path, level: int) -> None:
    """Stream the directory into a gzip tar (ISA-L when available: much faster)."""
    try:
        from isal import igzip as gz

        level = min(level, 3)
    except ImportError:  # pragma: no cover
        import gzip as gz
    with (
        open(target, "wb") as raw,
        gz.GzipFile(fileobj=raw, mode="wb", compresslevel=level) as z,
        tarfile.open(fileobj=z, mode="w|") as tar,
    ):
        tar.add(root, arcname=root.name, recursive=True)
