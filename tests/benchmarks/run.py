"""The benchmark: parsers and the whole `analyze` on generated bundles (docs/performance.md).

    python -m tests.benchmarks.run --size 1h 24h --shape small big     # the full table
    python -m tests.benchmarks.run --quick                              # ~10 s smoke run
    python -m tests.benchmarks.run --curve --size 1h 6h 24h 72h         # time/RSS vs length

For each bundle (``hindsight synth``, cached under ``--cache``) and each series file, the
parser runs in a fresh process (``tests.benchmarks.child``) interleaved with ``wc -l`` on
the same file; medians of ``--repeats`` runs give seconds, MB/s, lines/s, peak RSS and the
ratio to ``wc -l`` (ratios survive a noisy machine, seconds do not). Where jc has the
format it runs on the same (first 16 MiB) input for a speed ratio. End to end is
``analyze BUNDLE --db FILE -o FILE --quiet`` in a child process (wall, peak RSS), plus one
in-process run for the time per stage. Results are printed as Markdown tables and saved
as JSON (``--json``). Not part of the test suite (pytest collects ``test_*.py`` only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from tests.benchmarks import bundles, jc, measure

MIN_FILE_BYTES = 1 << 20  # smaller files are measured only as part of the whole run


def series_files(top: Path) -> list[tuple[str, Path, str]]:
    """(relative name, path, parser) of the bundle's series files worth timing."""
    from analyzer.bundle import BundleFile
    from analyzer.manifest import load_manifest
    from analyzer.sniff import identify_all

    files = [
        BundleFile(p.relative_to(top).as_posix(), p, p.stat().st_size)
        for p in sorted(top.rglob("*"))
        if p.is_file()
    ]
    manifest = load_manifest(top / "manifest.json" if (top / "manifest.json").exists() else None)
    out = []
    for item in identify_all(files, manifest):
        if item.role == "data" and item.tool and item.file.size >= MIN_FILE_BYTES:
            out.append((item.file.rel, item.file.path, item.tool))
    return sorted(out, key=lambda x: -x[1].stat().st_size)


def bench_parsers(top: Path, repeats: int, jc_exe: Path | None, work: Path) -> list[dict]:
    rows = []
    for rel, path, tool in series_files(top):
        size = path.stat().st_size
        wc, wc_cpu, secs, cpus, rss = [], [], [], [], []
        info: dict[str, object] = {}
        for _ in range(repeats):
            w, wcpu = measure.wc_seconds(path)
            wc.append(w)
            wc_cpu.append(wcpu)
            info, _ = measure.parse_child(tool, path)
            secs.append(float(info["seconds"]))  # type: ignore[arg-type]
            cpus.append(float(info["cpu_seconds"]))  # type: ignore[arg-type]
            rss.append(float(info["peak_rss_mb"]))  # type: ignore[arg-type]
        s = measure.med(secs)
        row = {
            "file": rel,
            "tool": tool,
            "mb": size / 1e6,
            "lines": info["lines"],
            "rows": info["rows"],
            "seconds": s,
            "mb_s": size / 1e6 / s,
            "lines_s": float(info["lines"]) / s,  # type: ignore[arg-type]
            "rss_mb": measure.med(rss),
            "wc_seconds": measure.med(wc),
            "x_wc": s / measure.med(wc),
            "cpu_seconds": measure.med(cpus),
            "wc_cpu_seconds": measure.med(wc_cpu),
        }
        with open(path, "rb") as f:
            is_json = f.read(1) == b"{"
        if jc_exe is not None and tool in jc.JC_FORMATS and not is_json:
            row |= bench_jc(jc_exe, tool, path, repeats, work)
        rows.append(row)
    return rows


def bench_jc(exe: Path, tool: str, path: Path, repeats: int, work: Path) -> dict[str, object]:
    piece = jc.slice_of(path, work)
    ours, theirs = [], []
    for _ in range(max(1, min(repeats, 3))):
        info, _r = measure.parse_child(tool, piece)
        ours.append(float(info["seconds"]))  # type: ignore[arg-type]
        r = measure.run([str(exe), jc.JC_FORMATS[tool]], stdin=piece)
        if r.rc:
            return {"jc_note": f"jc {jc.JC_FORMATS[tool]} failed (rc={r.rc})"}
        theirs.append(r.wall)
    return {
        "jc_input_mb": piece.stat().st_size / 1e6,
        "jc_seconds": measure.med(theirs),
        "ours_on_jc_input": measure.med(ours),
        "x_faster_than_jc": measure.med(theirs) / measure.med(ours),
    }


def bench_e2e(tgz: Path, repeats: int, work: Path, stages: bool = True) -> dict:
    db, html = work / "bench.duckdb", work / "bench.report.html"
    cmd = [sys.executable, "-m", "tests.benchmarks.child", "analyze", str(tgz), "--db", str(db)]
    cmd += ["-o", str(html), "--quiet"]
    runs = [measure.run(cmd) for _ in range(repeats)]
    if any(r.rc not in (0, 3) for r in runs):
        raise RuntimeError(f"analyze failed on {tgz}")
    rss = [float(r.err.rsplit("peak_rss_mb=", 1)[1].split()[0]) for r in runs]
    out = {
        "bundle": tgz.name,
        "tgz_mb": tgz.stat().st_size / 1e6,
        "seconds": measure.med([r.wall for r in runs]),
        "rss_mb": measure.med(rss),
        "cpu_seconds": measure.med([r.cpu for r in runs]),
        "runs": [round(r.wall, 2) for r in runs],
    }
    if stages:
        r = measure.run(
            [sys.executable, "-m", "tests.benchmarks.child", "stages", str(tgz), str(db), str(html)]
        )
        if r.rc == 0:
            out["stages"] = json.loads(r.out.strip().splitlines()[-1])
    return out


def _md_parsers(rows: list[dict]) -> str:
    head = (
        "| file | parser | MB | lines | s | CPU s | MB/s | lines/s | peak RSS MB | × wc -l "
        "| jc × slower |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    body = ""
    for r in rows:
        jcx = f"{r['x_faster_than_jc']:.0f}" if "x_faster_than_jc" in r else r.get("jc_note", "")
        body += (
            f"| {r['file']} | {r['tool']} | {r['mb']:.0f} | {r['lines']:,} | {r['seconds']:.2f} "
            f"| {r['cpu_seconds']:.2f} "
            f"| {r['mb_s']:.0f} | {r['lines_s'] / 1e6:.2f} M | {r['rss_mb']:.0f} "
            f"| {r['x_wc']:.0f} | {jcx} |\n"
        )
    return head + body


def _md_e2e(rows: list[dict]) -> str:
    head = (
        "| bundle | .tgz MB | analyze s (median) | CPU s | peak RSS MB | runs |\n"
        "|---|---:|---:|---:|---:|---|\n"
    )
    body = "".join(
        f"| {r['bundle']} | {r['tgz_mb']:.0f} | {r['seconds']:.2f} | {r['cpu_seconds']:.1f} "
        f"| {r['rss_mb']:.0f} "
        f"| {', '.join(map(str, r['runs']))} |\n"
        for r in rows
    )
    for r in rows:
        if "stages" in r:
            st = ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items())
            body += f"\nstages of {r['bundle']} (s): {st}\n"
    return head + body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks.run", description=__doc__)
    ap.add_argument("--size", nargs="+", default=["1h"], choices=list(bundles.SIZES))
    ap.add_argument("--shape", nargs="+", default=["big"], choices=list(bundles.SHAPES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--generator", default="synth", choices=["synth", "scaled"])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "hindsight-bench")
    ap.add_argument("--no-jc", action="store_true", help="skip the jc comparison")
    ap.add_argument("--no-parsers", action="store_true", help="end to end only")
    ap.add_argument("--curve", action="store_true", help="end to end only, no stage split")
    ap.add_argument("--quick", action="store_true", help="small bundle, one run, no jc")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args(argv)
    if a.quick:
        a.size, a.shape, a.repeats, a.no_jc = ["small"], ["small"], 1, True
    if a.curve:
        a.no_parsers = True
    report: dict = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_before": measure.load(),
        "repeats": a.repeats,
        "generator": a.generator,
        "results": [],
    }
    print(f"# Hindsight benchmark {report['date']} on {report['machine']}")
    print(f"load average before: {report['load_before']}; medians of {a.repeats} run(s)\n")
    jc_exe, why = (None, "skipped") if a.no_jc or a.no_parsers else jc.ensure(a.cache)
    if why and not a.no_jc and not a.no_parsers:
        print(f"jc: {why}\n")
    for shape_name in a.shape:
        shape = bundles.SHAPES[shape_name]
        for size in a.size:
            tgz = bundles.bundle(a.cache, size, shape, a.generator)
            title = f"{size}, {shape.cpus} CPU / {shape.gpus} GPU / {shape.disks} disks"
            entry: dict = {"size": size, "shape": shape_name, "title": title}
            with tempfile.TemporaryDirectory(dir=a.cache) as work:
                if not a.no_parsers:
                    top = bundles.extract(tgz, Path(work) / "x")
                    entry["parsers"] = bench_parsers(top, a.repeats, jc_exe, Path(work))
                    print(f"## Parsers, {title}\n\n{_md_parsers(entry['parsers'])}")
                    for p in sorted(Path(work, "x").rglob("*"), reverse=True):
                        p.unlink() if p.is_file() else p.rmdir()
                entry["e2e"] = bench_e2e(tgz, a.repeats, Path(work), stages=not a.curve)
            print(f"## End to end, {title}\n\n{_md_e2e([entry['e2e']])}")
            report["results"].append(entry)
    report["load_after"] = measure.load()
    print(f"load average after: {report['load_after']}")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
