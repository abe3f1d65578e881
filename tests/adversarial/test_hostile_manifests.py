"""Hostile manifests: a missing, broken or lying manifest.json never stops the analysis.
Each bad field is dropped with a note (bundle.notes) and the data files still load."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import Jail
from hostile import VMSTAT, analyze

GOOD: dict[str, Any] = {
    "format": "hindsight-bundle",
    "format_version": 1,
    "capture_version": "0.1.0",
    "host": {"hostname": "gpu01", "kernel": "6.1.0", "os": "Debian", "arch": "x86_64", "cpus": 8},
    "start_utc": "2026-11-29T17:23:30Z",
    "end_utc": "2026-11-29T17:23:40Z",
    "interval_s": 1,
    "timezone": "UTC",
    "clock": {"boot_epoch_s": 1795900000.0},
    "collectors": [
        {"name": "vmstat", "tool": "vmstat", "output": "series/vmstat.out", "status": "ok"}
    ],
}


def with_(**changes: Any) -> bytes:
    return json.dumps(GOOD | changes).encode()


# name -> (manifest bytes or None for absent, expected note substring or "", check)
CASES: dict[str, tuple[bytes | None, str, Callable[[dict[str, Any]], bool]]] = {
    "missing": (None, "no manifest.json", lambda b: b["manifest_present"] is False),
    "empty": (b"", "not valid JSON", lambda b: b["manifest_present"] is False),
    "invalid-json": (b'{"format_version": 1,', "not valid JSON", lambda b: b["host"] is None),
    "not-an-object": (b"[1, 2, 3]", "not a JSON object", lambda b: b["manifest_present"] is False),
    "binary": (b"\x00\xff\xfe" * 100, "not valid JSON", lambda b: True),
    "utf8-bom": (b"\xef\xbb\xbf" + with_(), "", lambda b: b["host"] == "gpu01"),
    "deep-nesting": (b"[" * 100_000 + b"]" * 100_000, "not valid JSON", lambda b: True),
    "over-4-mib": (
        with_(pad="x" * (5 << 20)),
        "larger than",
        lambda b: b["manifest_present"] is False,
    ),
    "wrong-types": (
        with_(host=42, start_utc=1795900000, interval_s="1", collectors={"a": 1}, timezone=[]),
        "interval_s",
        lambda b: b["start_utc"] != 1795900000 and b["interval_s"] is None,
    ),
    "huge-values": (
        with_(
            format_version=2**31,
            interval_s=1e308,
            host={"hostname": "h" * 100_000, "cpus": 10**30},
            clock={"boot_epoch_s": 1e300},
            collectors=[
                {
                    "name": "vmstat",
                    "output": "series/vmstat.out",
                    "exit_code": 2**52,
                    "status": "x" * 10**5,
                }
            ],
        ),
        "cpus",
        lambda b: b["cpus"] is None and len(b["host"]) <= 1000 and b["format_version"] is None,
    ),
    "nan-and-infinity": (
        b'{"format_version": 1, "interval_s": NaN, "host": {"cpus": Infinity}}',
        "interval_s",
        lambda b: b["interval_s"] is None and b["cpus"] is None,
    ),
    "future-times": (
        with_(start_utc="2999-01-01T00:00:00Z", end_utc="2999-01-02T00:00:00Z"),
        "implausible",
        lambda b: b["start_utc"] is None or b["start_utc"] < "2999",
    ),
    "negative-and-pre-2000-times": (
        with_(start_utc="-0001-01-01T00:00:00Z", end_utc="1970-01-01T00:00:00Z"),
        "end_utc",
        lambda b: b["start_utc"] is None or b["start_utc"] >= "2000",
    ),
    "end-before-start": (
        with_(start_utc="2026-11-29T18:00:00Z", end_utc="2026-11-29T17:00:00Z"),
        "before start_utc",
        lambda b: True,
    ),
    "span-of-25-years": (
        with_(start_utc="2001-01-01T00:00:00Z", end_utc="2026-01-01T00:00:00Z"),
        "spans more than",
        lambda b: b["start_utc"] is None or b["start_utc"] >= "2026",
    ),
    "unknown-format-version": (
        with_(format_version=99),
        "format_version 99 is unknown",
        lambda b: b["host"] == "gpu01",
    ),
    "hostile-timezone": (
        with_(timezone="../../../../etc/passwd"),
        "",
        lambda b: b["host"] == "gpu01",
    ),
    "collector-output-traversal": (
        with_(
            collectors=[
                {"name": "x", "tool": "vmstat", "output": "../../../../etc/passwd", "status": "ok"},
                {"name": "y", "tool": "dmesg", "output": "/etc/shadow", "status": "missing"},
            ]
        ),
        "",
        lambda b: True,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_manifest_is_noted_and_the_data_still_loads(name: str, jail: Jail) -> None:
    manifest, note, check = CASES[name]
    d = jail.root / "bundle"
    (d / "series").mkdir(parents=True)
    (d / "series" / "vmstat.out").write_bytes(VMSTAT)
    if manifest is not None:
        (d / "manifest.json").write_bytes(manifest)
    outcome = analyze(d, jail.root / "out")
    outcome.assert_ok()
    bundle = outcome.doc["bundle"]
    assert note in (bundle["notes"] or ""), bundle["notes"]
    assert check(bundle), bundle
    vm = outcome.by_file()["series/vmstat.out"]
    assert vm["status"] == "parsed" and vm["lines_parsed"] == 3, vm
    if name == "collector-output-traversal":  # listed, never read
        files = {r["file"] for r in outcome.rows}
        assert {"../../../../etc/passwd", "/etc/shadow"} <= files


def test_manifest_times_place_the_data_and_its_notes_reach_the_report(jail: Jail) -> None:
    d = jail.root / "bundle"
    (d / "series").mkdir(parents=True)
    (d / "series" / "vmstat.out").write_bytes(VMSTAT)
    (d / "manifest.json").write_bytes(with_(format_version=7))
    outcome = analyze(d, jail.root / "out")
    outcome.assert_ok()
    assert outcome.doc["bundle"]["start_utc"] == "2026-11-29T17:23:30Z"
    assert "format_version 7 is unknown" in outcome.report.read_text(encoding="utf-8")


def test_manifest_that_is_a_directory_or_a_symlink_is_not_followed(jail: Jail) -> None:
    d = jail.root / "bundle"
    (d / "manifest.json").mkdir(parents=True)
    (d / "vmstat.out").write_bytes(VMSTAT)
    outcome = analyze(d, jail.root / "out")
    outcome.assert_ok()
    assert outcome.doc["bundle"]["manifest_present"] is False
    (d / "manifest.json").rmdir()
    secret = jail.root / "secret.json"
    secret.write_text(json.dumps(GOOD))
    (d / "manifest.json").symlink_to(secret)
    outcome = analyze(d, jail.root / "out")
    outcome.assert_ok()
    assert outcome.doc["bundle"]["host"] is None
    assert "symbolic link" in outcome.refused()["manifest.json"]
