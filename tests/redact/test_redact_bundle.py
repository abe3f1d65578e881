"""End to end: a real bundle seeded with identifiers in every file, redacted by the CLI,
then analysed. Nothing original survives (searched byte-wise), tokens are consistent,
and the findings are those of the unredacted bundle."""

from __future__ import annotations

import json
import stat
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from seed import (
    FQDN,
    HOST,
    IPS,
    KEPT,
    MACS,
    ORIGINALS,
    PATTERN,
    USERS,
    seeded_bundle,
)

from analyzer.cli import app
from analyzer.pipeline import Options, run


def _members(tgz: Path) -> dict[str, bytes]:
    out = {}
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            assert m.isfile() or m.isdir(), m.name
            assert m.uname == "" and m.gname == "", "tar headers must not name a user"
            if m.isfile():
                f = tf.extractfile(m)
                assert f is not None
                out[m.name] = f.read()
    return out


def _leaks(blobs: dict[str, bytes]) -> list[tuple[str, str]]:
    found = []
    for name, data in blobs.items():
        hay = (name.encode() + b"\n" + data).lower()
        for value in ORIGINALS:
            if value.lower().encode() in hay:
                found.append((name, value))
    return found


def _findings(json_path: Path) -> list[tuple]:
    doc = json.loads(json_path.read_text())
    return sorted(
        (f["key"], f["start"], f["end"], json.dumps(f.get("impact"), sort_keys=True))
        for f in doc["findings"]
    )


@pytest.fixture(scope="module")
def redacted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("redact")
    bdir = seeded_bundle(tmp / "in")
    out = tmp / "out"
    out.mkdir()
    clean = out / "clean.tgz"
    r = CliRunner().invoke(
        app, ["redact", str(bdir), "-o", str(clean), "--redact-pattern", PATTERN]
    )
    assert r.exit_code == 0, r.output
    return {"tmp": tmp, "bundle": bdir, "clean": clean, "members": _members(clean)}


def test_no_original_value_survives_anywhere_in_the_redacted_bundle(redacted: dict) -> None:
    members = redacted["members"]
    assert len(members) > 150
    seeded = {p for p in redacted["bundle"].rglob("*") if p.is_file()}
    assert len(members) == len(seeded), "every file is copied (none is binary)"
    assert _leaks(members) == []


def test_diagnostic_identifiers_stay_intact(redacted: dict) -> None:
    text = b"\n".join(redacted["members"].values())
    for value in KEPT:
        assert value.encode() in text, value
    manifest = next(v for k, v in redacted["members"].items() if k.endswith("/manifest.json"))
    assert json.loads(manifest)["format"] == "hindsight-bundle"  # still valid JSON


def test_same_original_maps_to_the_same_token_everywhere(redacted: dict) -> None:
    mapping_path = redacted["clean"].with_name("clean.tgz.redaction-map.json")
    assert mapping_path.is_file()
    assert stat.S_IMODE(mapping_path.stat().st_mode) == 0o600
    assert mapping_path.name not in {Path(n).name for n in redacted["members"]}
    tokens = json.loads(mapping_path.read_text())["tokens"]
    by_value = {v: tok for tok, e in tokens.items() for v in e["values"]}
    host, ip, mac, user = by_value[HOST], by_value[IPS[0]], by_value[MACS[0]], by_value[USERS[0]]
    assert by_value[FQDN] == host, "a known host with its domain is the same host"
    members = redacted["members"]
    top = next(iter(members)).split("/")[0]
    assert top == f"hindsight-{host}-20261129T184504Z"
    manifest = json.loads(members[f"{top}/manifest.json"])
    assert manifest["host"]["hostname"] == host
    assert f"Linux {host} ".encode() in members[f"{top}/snap/uname.start.out"]
    assert f"({host})".encode() in members[f"{top}/series/sar.out"]
    for name in ("series/vmstat.out", "snap/df.start.out", "capture.log"):
        assert f"seed {host} {host} {ip} ".encode() in members[f"{top}/{name}"], name
        assert (
            f" {mac} {user} /home/{by_value[USERS[1]]}/run pat-1".encode()
            in members[f"{top}/{name}"]
        )
    assert by_value["proj-falcon-42"] == "pat-1"


def test_redacted_analysis_has_the_same_findings_and_no_original(redacted: dict) -> None:
    tmp = redacted["tmp"]
    run(redacted["bundle"], Options(json_path=tmp / "orig.json"))
    report = tmp / "out" / "report.html"
    r = CliRunner().invoke(
        app,
        [
            "analyze",
            str(redacted["bundle"]),
            "--redact",
            "--redact-pattern",
            PATTERN,
            "-q",
            "-o",
            str(report),
            "--json",
            str(tmp / "out" / "red.json"),
            "--md",
            str(tmp / "out" / "red.md"),
        ],
    )
    assert r.exit_code in (0, 3), r.output
    original = _findings(tmp / "orig.json")
    assert original, "the sample has findings to compare"
    assert HOST in (tmp / "orig.json").read_text(), "unredacted output names the host"
    assert _findings(tmp / "out" / "red.json") == original
    outputs = {
        p.name: p.read_bytes()
        for p in (tmp / "out").iterdir()
        if p.suffix in {".html", ".json", ".md"} and "redaction-map" not in p.name
    }
    assert {"report.html", "red.json", "red.md"} <= set(outputs)
    assert _leaks(outputs) == []
    assert (tmp / "out" / "report.html.redaction-map.json").is_file()
