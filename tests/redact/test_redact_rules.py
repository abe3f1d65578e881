"""The masking rules, value by value, and the streaming and safety of `redact_bundle`."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from pathlib import Path

import pytest

from analyzer._redact_discover import discover
from analyzer._redact_rules import Identifiers, Redactor
from analyzer.bundle import BundleFile
from analyzer.errors import HindsightError
from analyzer.redact import _blocks, redact_bundle


def _red(hosts=(), users=(), patterns=()) -> Redactor:
    ids = Identifiers()
    for h in hosts:
        ids.add_host(h)
    for u in users:
        ids.add_user(u, personal=True)
    return Redactor(ids, list(patterns))


def _sub(red: Redactor, text: str) -> str:
    return red.sub(text.encode()).decode()


def test_same_value_gets_the_same_token_and_spellings_are_normalised() -> None:
    red = _red()
    out = _sub(red, "a 10.1.2.3 b 10.1.2.3 c 10.1.2.4 mac 3c:fd:fe:a1:b2:c3 3C-FD-FE-A1-B2-C3\n")
    assert out == "a ip-1 b ip-1 c ip-2 mac mac-1 mac-1\n"
    out = _sub(red, "fe80::1:2 and FE80:0:0:0:0:0:1:2 and 10.1.2.4\n")
    assert out == "ip6-1 and ip6-1 and ip-2\n"


def test_numbers_times_versions_and_device_ids_are_not_addresses() -> None:
    red = _red()
    text = (
        "18:45:04 12.34 1795977904.967891480 0000:3b:00.0 00000000:00:06.0 "
        "GPU-51cb1330-e3cd-8754-4de9-1759daa5809f 6.18.44-fc 999.1.1.1 1.2.3.4.5 "
        "127.0.0.1 0.0.0.0 255.255.255.0 ::1 00:00:00:00:00:00 std::vector 2026-11-29T14:00:01\n"
    )
    assert _sub(red, text) == text


def test_host_names_are_masked_as_words_in_any_case_with_their_domain() -> None:
    red = _red(hosts=["gpu01"])
    out = _sub(red, "gpu01 GPU01 gpu01.corp.example.com hindsight-gpu01-2026 xgpu01 gpu012\n")
    assert out == "host-1 host-1 host-1 hindsight-host-1-2026 xgpu01 gpu012\n"
    assert _sub(red, "nfs.example.com\n") == "host-2\n"


def test_short_host_name_spares_sysctl_keys_and_tool_words() -> None:
    red = _red(hosts=["vm"])
    out = _sub(red, "Linux vm 6.8 (vm) vm.dirty_ratio = 20 /proc/vmstat VmRSS hindsight-vm-1\n")
    assert (
        out
        == "Linux host-1 6.8 (host-1) vm.dirty_ratio = 20 /proc/vmstat VmRSS hindsight-host-1-1\n"
    )


def test_users_homes_and_emails_are_masked_but_system_accounts_and_tool_words_stay() -> None:
    ids = Identifiers()
    for name in ("root", "daemon", "systemd+", "alice", "user"):
        ids.add_user(name)
    assert ids.users == ["alice"]
    assert "user" in ids.not_masked
    red = Redactor(ids, [])
    out = _sub(red, "root alice /home/carol/x /Users/dave bob@example.com %user alice_tmp\n")
    assert out == "root user-1 /home/user-2/x /Users/user-3 user-4@host-1 %user user-1_tmp\n"


def test_user_pattern_is_masked_first_and_flags_work() -> None:
    red = _red(patterns=[r"(?i)proj-[a-z]+-\d+", "secret(?=-)"])
    assert red.gate is None and red.slow_reason  # a lookahead is not RE2: slow but correct
    out = _sub(red, "PROJ-Falcon-42 proj-falcon-42 secret-x secretx\n")
    assert out == "pat-1 pat-2 pat-3-x secretx\n"
    with pytest.raises(re.error):
        _red(patterns=["("])


def test_gated_block_redaction_equals_the_plain_regex() -> None:
    red = _red(hosts=["gpu01", "vm"], users=["alice"])
    lines = [f"{i} 12.5 0.00 18:45:{i % 60:02d} vmstat" for i in range(3000)]
    lines[5] = "alice on gpu01 at 10.0.0.5"
    lines[6] = "also vm and 3c:fd:fe:a1:b2:c3"
    lines[2999] = "last fe80::5"
    block = ("\n".join(lines) + "\n").encode()
    fast = red.sub_block(block)
    red2 = _red(hosts=["gpu01", "vm"], users=["alice"])
    assert fast == red2.sub(block)
    assert b"user-1 on host-1 at ip-1\nalso host-2 and mac-1\n" in fast


def test_very_long_line_is_cut_at_a_blank_so_no_value_is_split(monkeypatch) -> None:
    import analyzer.redact as r

    monkeypatch.setattr(r, "BLOCK", 1000)
    monkeypatch.setattr(r, "MAX_LINE_EXTRA", 500)
    data = (" ".join(["10.20.30.40"] * 400)).encode()  # one 4.8 kB line, no newline
    blocks = list(_blocks(io.BytesIO(data)))
    assert len(blocks) > 1 and b"".join(blocks) == data
    assert all(b.endswith(b" ") for b in blocks[:-1])


def test_discovery_reads_manifest_uname_ps_passwd_mounts_and_journal(tmp_path: Path) -> None:
    files = {
        "manifest.json": json.dumps({"host": {"hostname": "node-7"}}),
        "snap/uname.start.out": "Linux node-7b 6.8.0 #1 SMP x86_64 GNU/Linux\n",
        "snap/ps_cpu.start.out": "  PID  PPID USER     COMMAND\n  1 0 root init\n 42 1 carol python\n",
        "snap/passwd.start.out": "svc:x:999:999::/var/svc:/bin/false\nerin:x:1002:1002:Erin Q,,,:/home/erin:/bin/sh\n",
        "snap/mounts.start.out": "filer9:/vol/a /mnt/a nfs4 rw 0 0\n",
        "snap/journal_prev.start.out": "2026-01-01T00:00:00.000000+0000 oldname kernel: hi\n",
        "series/vmstat.out": "Linux hidden-in-series 1\n",
    }
    bfs = []
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        bfs.append(BundleFile(rel, p, p.stat().st_size))
    ids = discover(bfs, "hindsight-node-7-20260101T000000Z")
    assert ids.hostnames == ["node-7", "oldname", "filer9", "node-7b"]
    assert ids.users == ["erin", "Erin Q", "carol"]


def _tar(path: Path, members: dict[str, bytes], link: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tf.addfile(info)
    return path


def test_binary_members_are_withheld_and_links_refused(tmp_path: Path) -> None:
    src = _tar(
        tmp_path / "b.tgz",
        {
            "b/manifest.json": b'{"host": {"hostname": "box-1"}}',
            "b/snap/pstore/x.enc.z": b"\x00box-1",
        },
        link="b/evil",
    )
    res = redact_bundle(src, tmp_path / "c.tgz", mapping=tmp_path / "m.json")
    assert res.withheld == ["snap/pstore/x.enc.z"] and [n for n, _ in res.refused] == ["b/evil"]
    with tarfile.open(tmp_path / "c.tgz") as tf:
        names = tf.getnames()
        data = b"".join(tf.extractfile(m).read() for m in tf.getmembers() if m.isfile())
    assert names == ["b", "b/manifest.json"] and b"box-1" not in data
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["withheld"] == ["snap/pstore/x.enc.z"] and doc["tokens"]["host-1"]["values"] == [
        "box-1"
    ]


def test_output_inside_the_bundle_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "vmstat.out").write_text("1 2 3\n")
    with pytest.raises(HindsightError):
        redact_bundle(tmp_path / "b", tmp_path / "b" / "c.tgz")
    assert os.listdir(tmp_path / "b") == ["vmstat.out"]
