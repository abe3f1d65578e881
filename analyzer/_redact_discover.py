"""Discovery pass of redaction: which host and user names this bundle holds.

Read before anything is rewritten, so that a name first seen at the end of the bundle
(an end snapshot) is masked in every file. Sources, all optional:

- ``manifest.json``: ``host.hostname``; the bundle's own name ``hindsight-<host>-<UTC>``;
- any ``uname -a`` line (``Linux <node> <release> …``);
- ``ps`` output (the ``USER`` column) and ``snap/pids`` environments
  (``USER=``, ``LOGNAME=``, ``SUDO_USER=``, ``HOSTNAME=``, ``MASTER_ADDR=``…);
- ``/etc/passwd``-like lines: logins with uid >= 1000 (and not 65534) and their
  real names (GECOS);
- home directories (``/home/NAME``…);
- network file systems in ``mounts``/``df``/``mountstats`` (``server:/export``, ``//server/share``);
- the host field of ``journalctl -o short-iso-precise`` kernel lines.

Only files outside ``series/`` and at most `MAX_SCAN_BYTES` are read here (snapshots,
manifest, log, the files of a hand-made bundle); they are read in blocks, never whole.
System accounts (uid < 1000, ``root``, ``daemon``…) are not personal and stay.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from analyzer._redact_rules import Identifiers
from analyzer.bundle import BundleFile

MAX_SCAN_BYTES = 64 << 20
BLOCK = 4 << 20

_UNAME = re.compile(rb"^Linux (\S+) \d", re.M)
_ENV_USER = re.compile(
    rb"(?:^|[\s\"'])(?:USER|LOGNAME|USERNAME|SUDO_USER)=([A-Za-z_][A-Za-z0-9_.-]*\$?)"
)
_ENV_HOST = re.compile(
    rb"(?:^|[\s\"'])(?:HOSTNAME|HOST|NODENAME|SLURMD_NODENAME|MASTER_ADDR|NODE_NAME)=([A-Za-z0-9][A-Za-z0-9.-]*)"
)
_PASSWD = re.compile(
    rb"^([A-Za-z_][A-Za-z0-9_.-]*\$?):[^:\n]*:(\d+):(\d+):([^:\n]*):([^:\n]*):[^:\n]*$", re.M
)
_HOME = re.compile(
    rb"(?<![A-Za-z0-9_.-])/(?:home|Users|export/home|usr/home)/([A-Za-z0-9_][A-Za-z0-9_.@$-]*)"
)
_NETFS = re.compile(
    rb"^(?:device )?([A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9]):/\S*\s+(?:\d|mounted on|\S+\s+(?:nfs4?|ceph|lustre|glusterfs|fuse\.sshfs)\b)",
    re.M,
)
_CIFS = re.compile(rb"^(?:device )?//([A-Za-z0-9][A-Za-z0-9.-]*)/\S*\s", re.M)
_JOURNAL = re.compile(rb"^\d{4}-\d\d-\d\dT[0-9:.,+-]+\s+(\S+)\s+kernel:", re.M)
_BUNDLE = re.compile(r"^hindsight-(.+)-\d{8}T\d{6}Z(?:-\d+)?$")


def discover(files: list[BundleFile], bundle_name: str) -> Identifiers:
    """Host and user names of a bundle, in the order found (deterministic)."""
    ids = Identifiers()
    manifest = next((f for f in files if f.rel == "manifest.json"), None)
    if manifest is not None and manifest.size <= MAX_SCAN_BYTES:
        _from_manifest(manifest.path, ids)
    m = _BUNDLE.match(bundle_name)
    if m:
        ids.add_host(m.group(1))
    for f in sorted(files, key=lambda f: f.rel):
        if f.rel.startswith("series/") or f.size > MAX_SCAN_BYTES:
            continue
        _scan(f.path, ids)
    return ids


def _from_manifest(path: Path, ids: Identifiers) -> None:
    try:
        doc = json.loads(path.read_bytes().decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        return
    host = doc.get("host") if isinstance(doc, dict) else None
    name = host.get("hostname") if isinstance(host, dict) else host
    if isinstance(name, str):
        ids.add_host(name)
        ids.add_host(re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64])


def _blocks(path: Path) -> Iterator[bytes]:
    """Whole-line blocks of about `BLOCK` bytes."""
    try:
        f = open(path, "rb")
    except OSError:
        return
    with f:
        while block := f.read(BLOCK):
            if not block.endswith(b"\n"):
                block += f.readline(1 << 20)
            yield block


def _scan(path: Path, ids: Identifiers) -> None:
    ps_user_col: int | None = None
    for block in _blocks(path):
        if b"\0" in block[:65536]:
            return  # binary: redaction withholds it anyway
        for m in _UNAME.finditer(block):
            ids.add_host(_s(m.group(1)))
        for m in _JOURNAL.finditer(block):
            ids.add_host(_s(m.group(1)))
        for m in _ENV_HOST.finditer(block):
            ids.add_host(_s(m.group(1)))
        for rx in (_NETFS, _CIFS):
            for m in rx.finditer(block):
                ids.add_host(_s(m.group(1)))
        for m in _PASSWD.finditer(block):
            uid = int(m.group(2)[:9])
            if uid >= 1000 and uid != 65534:
                ids.add_user(_s(m.group(1)), personal=True)
                gecos = _s(m.group(4)).split(",", 1)[0].strip()
                if gecos:
                    ids.add_user(gecos, personal=True)
        for m in _HOME.finditer(block):
            ids.add_user(_s(m.group(1)), personal=True)
        for m in _ENV_USER.finditer(block):
            ids.add_user(_s(m.group(1)))
        ps_user_col = _ps_users(block, ids, ps_user_col)


def _ps_users(block: bytes, ids: Identifiers, col: int | None) -> int | None:
    """The USER column of ``ps`` output (a header with PID and USER starts a table)."""
    if col is None and b"USER" not in block:
        return None
    for line in block.split(b"\n"):
        fields = line.split()
        if b"PID" in fields and b"USER" in fields:
            col = fields.index(b"USER")
        elif col is not None and len(fields) > max(col, 1):
            pid = fields[1] if col == 0 else fields[0]  # `ps aux`: USER PID …; `ps -eo`: PID … USER
            if pid.isdigit():
                ids.add_user(_s(fields[col]))
            else:
                col = None  # the table ended
    return col


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")
