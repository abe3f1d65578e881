"""`analyze` progress: nothing for quick runs, one escaped line per stage for long ones."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from analyzer.cli import one_line
from analyzer.progress import Progress

ROOT = Path(__file__).resolve().parents[1]


def test_quick_runs_print_nothing() -> None:
    out = io.StringIO()
    p = Progress(out, delay_s=3600)
    p("opening bundle")
    p("parsing small files")
    p.close()
    assert out.getvalue() == ""


def test_long_runs_print_each_stage_with_elapsed_time_and_a_total() -> None:
    out = io.StringIO()
    p = Progress(out, delay_s=0)
    p("opening bundle")
    p("parsing series/mpstat.out (mpstat, 1090 MB)")
    p.close()
    lines = out.getvalue().splitlines()
    assert [x.split("] ", 1)[1] for x in lines] == [
        "opening bundle",
        "parsing series/mpstat.out (mpstat, 1090 MB)",
        "done",
    ]
    assert all(x.startswith("  [") and " s] " in x for x in lines)


def test_file_names_from_the_bundle_are_escaped() -> None:
    out = io.StringIO()
    p = Progress(out, delay_s=0, clean=one_line)
    p("parsing series/\x1b[31mred\n.out (mpstat, 9 MB)")
    p.close()
    assert "\x1b" not in out.getvalue()
    assert len(out.getvalue().splitlines()) == 2


def test_analyze_in_a_pipe_prints_no_progress(tmp_path: Path) -> None:
    sample = ROOT / "samples" / "h200-checkpoint-stall.tgz"
    r = subprocess.run(
        [sys.executable, "-m", "analyzer", "analyze", str(sample), "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert r.returncode in (0, 3), r.stderr
    assert " s] " not in r.stderr
