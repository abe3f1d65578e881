"""HTML/JS payloads in every string of a bundle that reaches the report: host, kernel and
other manifest fields, file names, refused member names, collectors' stderr, dmesg
messages, process names, cgroup paths, device names. Each payload carries its own number
so the test first proves that the string reached the report, then that it stayed text:
escaped in the HTML source, and inert in a real headless Chromium (the report browser
harness: playwright driving Debian's /usr/bin/chromium)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hostile import FIX, VMSTAT, Member, analyze, write_tgz

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
IOSTAT = FIX / "iostat" / "local-debian12-sysstat12.6.1__iostat-xt-ISO-1-3.txt"
PIDSTAT = FIX / "pidstat" / "local-debian12-sysstat12.6.1__pidstat-hud-C-1-3.txt"
DMESG = FIX / "dmesg" / "local-debian12-utillinux2.38.1-kernel6.18__memcg-oom__dmesg-iso.txt"


def p(n: int, kind: int = 0) -> str:
    """Payload number ``n``: calls ``alert(n)`` if it ever runs. No spaces for kind 1
    (fields that end at whitespace: device names, cgroup paths, process names)."""
    forms = [
        f'"><img src=x onerror=alert({n})>',
        f"<svg/onload=alert({n})>",
        f"</script><script>alert({n})</script>",
        f'<a href="javascript:alert({n})">x</a>',
        f"<iframe srcdoc='<script>parent.alert({n})</script>'>",
    ]
    return forms[kind]


SITES = {
    101: "manifest host.hostname",
    102: "manifest host.kernel",
    103: "manifest host.os",
    104: "manifest capture_version",
    105: "manifest timezone",
    106: "manifest collector reason",
    201: "file name",
    202: "refused member name",
    203: "collector stderr tail",
    301: "dmesg message",
    302: "dmesg process name",
    303: "dmesg cgroup path",
    401: "iostat device name",
    402: "pidstat process name",  # stored; the report has no pidstat panel yet
    501: "cgroup path (sampler series)",
}


def hostile_bundle(path: Path) -> Path:
    manifest = {
        "format": "hindsight-bundle",
        "format_version": 1,
        "capture_version": p(104, 3),
        "host": {"hostname": p(101), "kernel": p(102, 2), "os": p(103, 4), "arch": "x86_64"},
        "start_utc": "2026-11-29T17:23:30Z",
        "end_utc": "2026-11-29T17:26:00Z",
        "timezone": p(105),
        "collectors": [
            {"name": "gpu", "tool": "nvidia_dmon", "status": "missing", "reason": p(106, 2)}
        ],
    }
    dmesg = DMESG.read_bytes().decode()
    dmesg = dmesg.replace("(python3)", f"({p(302, 1)})").replace(
        "task=python3", f"task={p(302, 1)}"
    )
    dmesg = dmesg.replace("/corpus_oom", "/" + p(303, 1))
    dmesg += f"2026-11-29T17:26:00,000000+00:00 INFO: task {p(301)}:4242 blocked for more than 120 seconds.\n"
    iostat = IOSTAT.read_bytes().decode().replace("\nvda ", f"\n{p(401, 1)} ")
    pidstat = PIDSTAT.read_bytes().decode().replace("  yes\n", f"  {p(402, 1)}\n")
    cg = f"/sys/fs/cgroup/{p(501, 1)}"
    cgroup = "".join(
        f"{1795800211 + i}.010 {cg}/cpu.stat {k} {v}\n"
        for i in range(3)
        for k, v in (("usage_usec", 1000 * i), ("nr_periods", 10 * i), ("nr_throttled", i))
    )
    members = [
        Member("b/manifest.json", json.dumps(manifest).encode()),
        Member("b/series/vmstat.out", VMSTAT),
        Member("b/series/vmstat.err", f"vmstat: {p(203, 2)}\n".encode()),
        Member("b/series/dmesg.out", dmesg.encode()),
        Member("b/series/iostat.out", iostat.encode()),
        Member("b/series/pidstat.out", pidstat.encode()),
        Member("b/series/cgroup.out", cgroup.encode()),
        Member(f"b/{p(201)}.txt", b"not any tool's output\n"),
        Member(f"b/{p(202, 1)}", type=b"6"),  # a FIFO: refused, listed by name
    ]
    return write_tgz(path, members)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("injection")
    outcome = analyze(hostile_bundle(root / "evil.tgz"), root / "out")
    outcome.assert_ok()
    return outcome.report


def test_every_payload_reaches_the_report_escaped(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    not_shown_yet = {402}
    missing = {
        n: s for n, s in SITES.items() if f"alert({n})" not in html and n not in not_shown_yet
    }
    assert not missing, (
        f"payloads that never reached the report (test would prove nothing): {missing}"
    )
    for raw in ("<img src=x", "<svg/onload", "<script>alert", "<iframe", 'href="javascript:'):
        assert raw not in html, f"unescaped {raw!r} in the report"
    assert html.count("</script>") == html.count("<script")  # no early close


def probe(page_file: Path, charts: bool = True) -> tuple[list[str], list[str], int, str]:
    """Open ``page_file`` in headless Chromium, hover the charts, and return what ran
    (alerts, dialogs), inline handlers / javascript: URLs in the DOM, frames, and text."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("no system chromium (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            fired: list[str] = []
            page.on("dialog", lambda d: (fired.append(d.message), d.dismiss()))
            page.add_init_script(
                "window.alert = (m) => { window.__fired = (window.__fired || []).concat([String(m)]); };"
            )
            page.goto(page_file.as_uri())
            if charts:
                page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
            for box in page.locator(".js-plotly-plot").all()[:12]:  # hover labels, legends
                box.scroll_into_view_if_needed()
                b = box.bounding_box()
                for fx in (0.3, 0.5, 0.7) if b else ():
                    page.mouse.move(b["x"] + b["width"] * fx, b["y"] + b["height"] * 0.5)
            page.wait_for_timeout(300)
            fired += page.evaluate("window.__fired || []")
            handlers = page.evaluate(
                """[...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
                     .filter(a => /^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value))
                     .map(a => e.tagName + ' ' + a.name + '=' + a.value))"""
            )
            frames = page.evaluate("document.querySelectorAll('iframe, embed, object').length")
            text = page.evaluate("document.body.innerText")
        finally:
            browser.close()
    return fired, handlers, frames, text


def test_the_browser_probe_catches_a_live_payload(tmp_path: Path) -> None:
    """Control: the same probe on a page with one unescaped payload sees it run."""
    page = tmp_path / "live.html"
    page.write_text(f"<html><body><p>{p(9)}</p></body></html>")
    fired, handlers, _, _ = probe(page, charts=False)
    assert fired == ["9"] and handlers and "onerror" in handlers[0]


def test_payloads_are_inert_in_a_real_browser(report: Path) -> None:
    fired, handlers, frames, text = probe(report)
    assert fired == [], f"a payload ran: alert({fired})"
    assert handlers == [] and frames == 0, handlers
    shown = set(map(int, re.findall(r"alert\((\d+)\)", text)))
    assert {101, 201, 202, 301} <= shown, shown  # shown to the reader as plain text
