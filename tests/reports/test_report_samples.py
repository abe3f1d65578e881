"""The report and the Markdown of every samples/ bundle contain its expected findings.

Expected findings come from the ground-truth files beside the bundles
(``samples/<name>/ground-truth.json`` for real captures, ``samples/synth-*.ground-truth.json``
for generated ones): each event's ``kind`` maps to a finding key (:data:`KEYS`), and the
report's summary must name that key and its timeline must hold a finding of that key whose
window overlaps the event's.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, Analysed, analyse

pytestmark = pytest.mark.slow

# ground-truth kind -> finding key (analyzer/detectors/*: key=...)
KEYS = {
    "checkpoint_stall": "CHECKPOINT_STALL",
    "gpu_starvation": "GPU_STARVATION",
    "cpu_throttle": "CPU_THROTTLE",
    "cpu_contention": "CPU_CONTENTION",
    "oom_kill": "OOM_KILL",
    "memory_pressure": "MEMORY_PRESSURE",
    "swap_activity": "SWAP_ACTIVITY",
    "io_saturation": "IO_SATURATION",
    "hung_task": "HUNG_TASK",
    "gpu_throttle": "GPU_THROTTLE",
    "gpu_xid": "GPU_XID",
    "xid": "GPU_XID",
    "irq_hotspot": "IRQ_HOTSPOT",
    "net_errors": "NET_ERRORS",
    "sampling_gap": "SAMPLING_GAP",
}
TOLERANCE_MS = 5_000


def cases() -> list[tuple[Path, Path]]:
    """(bundle, ground truth) for every sample that has both."""
    out = []
    for gt in sorted((ROOT / "samples").glob("*/ground-truth.json")):
        out.append((gt.parent.with_suffix(".tgz"), gt))
    for gt in sorted((ROOT / "samples").glob("synth-*.ground-truth.json")):
        out.append((gt.with_name(gt.name.replace(".ground-truth.json", ".tgz")), gt))
    return [(b, g) for b, g in out if b.exists()]


def _ms(value: object) -> int:
    if isinstance(value, int | float):
        return int(float(value) * 1000)
    return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)


def expected(gt: Path) -> list[tuple[str, int, int]]:
    """(finding key, start ms, end ms) per ground-truth event.

    Real captures list ``events`` (kind, start, end in epoch seconds); ``hindsight synth``
    lists ``incidents`` (kind, expected_key, start_utc, end_utc).
    """
    doc = json.loads(gt.read_text(encoding="utf-8"))
    out = []
    for ev in doc.get("events", []) + doc.get("incidents", []):
        kind = str(ev.get("kind") or "")
        key = ev.get("expected_key") or KEYS.get(kind, kind.upper())
        start, end = ev.get("start", ev.get("start_utc")), ev.get("end", ev.get("end_utc"))
        out.append((str(key), _ms(start), _ms(end)))
    return out


def summary_keys(page: str) -> set[str]:
    start = page.index('<section id="summary">')
    summary = page[start : page.index("</section>", start)]
    return set(re.findall(r'<code class="finding-key">([A-Z0-9_]+)</code>', summary))


def timeline(page: str) -> list[tuple[str, int, int]]:
    data = json.loads(re.search(r'id="hs-figures">(.*?)</script>', page, re.S).group(1))
    lanes = data["figures"].get("p-swimlanes", {"data": []})
    return [
        (y, c[0], c[1]) for t in lanes["data"] for y, c in zip(t["y"], t["customdata"], strict=True)
    ]


@pytest.fixture(scope="module", params=cases(), ids=lambda c: c[0].name)
def analysed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sample: Analysed
) -> tuple[Analysed, Path]:
    bundle, gt = request.param
    if bundle.name == "h200-checkpoint-stall.tgz":
        return sample, gt  # already analysed once for the session
    return analyse(bundle, tmp_path_factory.mktemp(bundle.stem)), gt


def test_every_sample_has_ground_truth() -> None:
    assert cases(), "no samples/ bundle with a ground-truth file"


def test_summary_names_every_expected_finding(analysed: tuple[Analysed, Path]) -> None:
    done, gt = analysed
    page = done.report.read_text(encoding="utf-8")
    missing = {key for key, _, _ in expected(gt)} - summary_keys(page)
    assert not missing, f"{gt}: summary lacks {sorted(missing)}"


def test_each_expected_event_has_a_finding_in_its_window(analysed: tuple[Analysed, Path]) -> None:
    done, gt = analysed
    bars = timeline(done.report.read_text(encoding="utf-8"))
    for key, start, end in expected(gt):
        hits = [
            b
            for b in bars
            if b[0] == key and b[1] <= end + TOLERANCE_MS and b[2] >= start - TOLERANCE_MS
        ]
        assert hits, f"{gt}: no {key} finding overlaps {start}..{end}"


def test_markdown_names_every_expected_finding(analysed: tuple[Analysed, Path]) -> None:
    done, gt = analysed
    md = done.markdown.read_text(encoding="utf-8")
    for key, _, _ in expected(gt):
        assert f"`{key}`" in md, f"{gt}: Markdown lacks {key}"
    assert md.startswith("## Hindsight: ") and len(md) < 12_000


def test_every_query_in_the_appendix_runs_on_the_analysed_store(sample: Analysed) -> None:
    page = sample.report.read_text(encoding="utf-8")
    commands = [html.unescape(c) for c in re.findall(r'<code class="cmd">(.*?)</code>', page, re.S)]
    assert len(commands) > 10
    con = duckdb.connect(str(sample.db), read_only=True)
    for command in commands:
        argv = shlex.split(command)
        assert argv[:3] == ["hindsight", "query", "h200-checkpoint-stall.tgz"], argv
        assert con.sql(argv[3]).fetchall() is not None, argv[3]


def test_screenshot_in_the_readme_exists_and_stays_small() -> None:
    png = ROOT / "docs" / "img" / "report.png"
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 400_000
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert (width, height) == (1280, 1500)
    assert "docs/img/report.png" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_a_panel_row_flat_at_zero_is_one_word_not_a_chart(sample: Analysed) -> None:
    """Issue #23: the H200 capture never stalled on memory: its memory-pressure row is
    named flat in the panel's caption instead of drawn as a line at 0; I/O pressure, which
    moved, is still drawn."""
    page = sample.report.read_text(encoding="utf-8")
    box = page[page.index('id="p-psi-box"') :]
    box = box[: box.index("</figure>")]
    assert "flat at 0 over the capture: Memory pressure (% of time stalled)" in box
    m = re.search(r'<script type="application/json" id="hs-figures">(.*?)</script>', page, re.S)
    assert m
    fig = json.loads(m.group(1))["figures"]["p-psi"]
    names = {t.get("name") for t in fig["data"]}
    assert {"io some", "io full"} <= names and not names & {"memory some", "memory full"}
