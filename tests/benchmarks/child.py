"""Child processes of the benchmark (each measurement runs in a fresh interpreter).

``python -m tests.benchmarks.child parse TOOL FILE`` parses one file the way the pipeline
does (rows streamed to a sink that only counts them, returned frames collected) and prints
JSON: ``seconds`` (parse only, imports excluded), ``rows``, ``lines``, ``parsed``.

``python -m tests.benchmarks.child stages BUNDLE DB HTML`` runs the whole analysis in
process and prints the seconds spent in each progress stage.

``python -m tests.benchmarks.child analyze ARGS...`` is ``analyze ARGS...`` followed by
its own peak RSS on stderr (``peak_rss_mb=...``).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path


def parse(tool: str, path: Path) -> dict[str, object]:
    import polars as pl

    from analyzer.malloc_tune import keep_big_blocks
    from analyzer.parsers import PARSERS
    from analyzer.parsers.base import ParseContext

    keep_big_blocks()  # as `analyze` runs its parsers
    rows = 0

    def sink(_name: str, frame: pl.DataFrame) -> None:
        nonlocal rows
        rows += frame.height

    ctx = ParseContext(file_name=path.name, tz="UTC", sink=sink)
    c0 = _cpu()
    t0 = time.perf_counter()
    result = PARSERS[tool].parse(path, ctx)
    for frame in result.tables.values():
        rows += (frame.collect() if isinstance(frame, pl.LazyFrame) else frame).height
    seconds = time.perf_counter() - t0
    cpu = _cpu() - c0
    cov = result.coverage
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "rows": rows,
        "lines": cov.total,
        "parsed": cov.parsed,
        "peak_rss_mb": peak_rss_mb(),
    }


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM) in MiB. Unlike the ``ru_maxrss`` a parent gets from
    ``wait4``, it does not include the parent's memory the child was forked from."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def analyze(argv: list[str]) -> None:
    """``analyze ARGS``, then the peak RSS on stderr's last line (``peak_rss_mb=...``)."""
    from analyzer.cli import analyze_app

    rc = 0
    try:
        rc = analyze_app(argv, standalone_mode=False)
    finally:
        sys.stderr.write(f"\npeak_rss_mb={peak_rss_mb():.1f}\n")
    raise SystemExit(rc if isinstance(rc, int) else 0)


def stages(bundle: Path, db: Path, html: Path) -> dict[str, float]:
    from analyzer.pipeline import Options, run
    from reports.render import HOST

    marks: list[tuple[str, float]] = []

    def say(msg: str) -> None:
        marks.append((msg, time.perf_counter()))

    t0 = time.perf_counter()
    run(bundle, Options(report=html, db=db, progress=say), HOST)
    marks.append(("end", time.perf_counter()))
    out: dict[str, float] = {"total": marks[-1][1] - t0}
    for (msg, t), (_, t_next) in itertools.pairwise(marks):
        key = msg.split(" (")[0]
        out[key] = out.get(key, 0.0) + (t_next - t)
    return out


def main(argv: list[str]) -> None:
    if argv[0] == "parse":
        print(json.dumps(parse(argv[1], Path(argv[2]))))
    elif argv[0] == "analyze":
        analyze(argv[1:])
    elif argv[0] == "stages":
        print(json.dumps(stages(Path(argv[1]), Path(argv[2]), Path(argv[3]))))
    else:
        raise SystemExit(f"unknown child command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
