"""A bundle full of HTML/JS payloads yields a report where none executes — checked in a real
browser, not only by string search.

The real H200 sample is copied and poisoned: the manifest's host name, kernel log lines (an
OOM kill, an Xid, a plain line), process names in the ps and per-PID snapshots, the GPU
process list, and file names. Then the real pipeline analyses it and Chromium opens the
report. Every payload would set ``window.__xss``, open a dialog or fetch ``x`` (a network
request) if it ran.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from pathlib import Path

import pytest
from conftest import SAMPLE, Analysed, analyse

from reports.browser import Chromium

pytestmark = pytest.mark.slow

P_HOST = "<img src=x onerror=\"window.__xss='host'\">"
P_OOM = "<script>window.__xss='oom'</script>"
P_XID = "<svg/onload=window.__xss='xid'>"
P_LINE = '<a href="javascript:window.__xss=\'link\'">click</a><iframe src="javascript:alert(1)">'
P_PS = "<script>alert('ps')</script>"
P_PID = "<img src=x onerror=alert('pid')>"
P_GPU = "<body onload=alert('gpuapp')>"
P_FILE = "<img src=x onerror=alert('file')>.out"
PAYLOADS = [P_HOST, P_OOM, P_XID, P_LINE, P_PS, P_PID, P_GPU, P_FILE]


def poison(root: Path) -> Path:
    """Poison the extracted sample under ``root``; return the bundle directory."""
    (bundle,) = [p for p in root.iterdir() if p.is_dir()]
    manifest = bundle / "manifest.json"
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    doc["host"]["hostname"] = P_HOST
    manifest.write_text(json.dumps(doc), encoding="utf-8")
    with (bundle / "snap" / "dmesg_full.start.out").open("a", encoding="utf-8") as f:
        f.write(
            f"2026-11-29T18:46:10,000000+00:00 Out of memory: Killed process 4242 ({P_OOM}) "
            "total-vm:1000kB, anon-rss:900kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0\n"
            f"2026-11-29T18:46:20,000000+00:00 NVRM: Xid (PCI:0000:00:06): 79, pid=4242, name={P_XID}, GPU has fallen off the bus.\n"
            f"2026-11-29T18:46:30,000000+00:00 {P_LINE}\n"
        )
    ps = bundle / "snap" / "ps_cpu.start.out"
    ps.write_text(
        ps.read_text(encoding="utf-8").replace("nvidia-smi dmon -o DT -d 1 -s pucvmet", P_PS),
        encoding="utf-8",
    )
    pids = bundle / "snap" / "pids.start.out"
    pids.write_text(
        re.sub(r"Name:\tprocess_api", f"Name:\t{P_PID}", pids.read_text(encoding="utf-8")),
        encoding="utf-8",
    )
    apps = bundle / "snap" / "nvidia_apps.end.out"
    apps.write_text(apps.read_text(encoding="utf-8").replace("python3", P_GPU), encoding="utf-8")
    (bundle / "series" / P_FILE).write_text(f"{P_HOST}\n{P_OOM}\n", encoding="utf-8")
    return bundle


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    root = tmp_path_factory.mktemp("hostile")
    with tarfile.open(SAMPLE) as tar:
        tar.extractall(root / "src", filter="data")
    bundle = poison(root / "src")
    out = root / "out"
    out.mkdir()
    return analyse(bundle, out)


def test_payloads_reach_the_report_only_as_text(hostile: Analysed) -> None:
    page = hostile.report.read_text(encoding="utf-8")
    for payload in PAYLOADS:
        assert payload not in page, payload
    assert page.lower().count("<script") == 3  # the JSON block, plotly.js, report.js
    assert "&lt;img src=x onerror=&#34;window.__xss=&#39;host&#39;&#34;&gt;" in page  # header
    md = hostile.markdown.read_text(encoding="utf-8")
    assert "<img" not in md and "<script" not in md and "&lt;img src=x" in md


def test_no_payload_executes_in_the_browser(chromium: Chromium, hostile: Analysed) -> None:
    with chromium.open(hostile.report) as (page, load):
        assert load.rendered, load.errors
        assert load.dialogs == []
        assert load.requests == []  # an <img src=x> that ran would fetch x
        assert load.errors == []
        assert page.evaluate("window.__xss === undefined")
        for pid in load.plots:  # hover labels and legends are plotly's HTML: exercise them
            box = page.locator(f"#{pid}").bounding_box()
            if box:
                page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
        page.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")
        page.wait_for_timeout(200)
        assert load.dialogs == [] and load.requests == [] and load.errors == []
        assert page.evaluate("window.__xss === undefined")
        text = page.inner_text("body")  # the payloads are visible, as text
        for payload in (P_HOST, P_FILE, P_PID, P_GPU, P_OOM, P_XID):
            assert payload in text, payload


def test_hostile_copy_left_the_sample_untouched() -> None:
    with tarfile.open(SAMPLE) as tar:
        names = tar.getnames()
    assert not any("onerror" in n for n in names)
    assert shutil.which("true")  # the poisoned copy lives only in pytest's tmp dir
