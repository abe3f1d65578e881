"""Regenerate docs/img/report.png, the README's screenshot: ``python -m tests.tools.screenshot``.

Analyses the real H200 sample (samples/h200-checkpoint-stall.tgz) with the pipeline, opens
the report in headless Chromium (:mod:`reports.browser`) and captures the top of the page:
header and verdict, the ranked incidents, the findings timeline and the first panels. Run it
whenever the report changes; the PNG stays small (< 400 KB) for the repository.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"
OUT = ROOT / "docs" / "img" / "report.png"
WIDTH, HEIGHT = 1280, 1500


def screenshot(
    bundle: Path = SAMPLE, out: Path = OUT, *, width: int = WIDTH, height: int = HEIGHT
) -> Path:
    """Analyse ``bundle``, render its report and write a PNG of its first ``height`` pixels."""
    from analyzer.pipeline import Options, run
    from reports.browser import open_report
    from reports.render import HOST

    with tempfile.TemporaryDirectory(prefix="hs-shot-") as tmp:
        report = Path(tmp) / "report.html"
        run(bundle, Options(report=report), HOST)
        with open_report(report, width=width, height=height) as (page, load):
            if not load.rendered or load.errors:
                raise RuntimeError(f"report did not render cleanly: {load.errors[:3]}")
            page.mouse.move(0, 0)  # no hover label in the picture
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": height})
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the screenshot; print its path and size."""
    ap = argparse.ArgumentParser(
        prog="python -m tests.tools.screenshot", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--bundle", type=Path, default=SAMPLE)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    path = screenshot(args.bundle, args.out)
    print(f"{path} ({path.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
