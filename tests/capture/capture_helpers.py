"""Shared helpers for the capture-script tests: run the real script, read its bundle."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "capture" / "hindsight-capture.sh"
BPF_DIR = REPO / "capture" / "bpftrace"

STATUSES = {"ok", "missing", "failed", "skipped", "timeout"}
COLLECTOR_KEYS = {
    "name",
    "kind",
    "tool",
    "command",
    "output",
    "stderr",
    "status",
    "exit_code",
    "reason",
    "bytes",
}
SYSSTAT_TOOLS = ("vmstat", "iostat", "mpstat", "sar", "pidstat")


def shell_cmd(shell: str) -> list[str]:
    return shell.split()


def have_shell(shell: str) -> bool:
    return shutil.which(shell.split()[0]) is not None


def run_capture(
    out_dir: Path,
    *args: str | bytes,
    shell: str = "sh",
    env: dict[str, str] | None = None,
    preexec: list[str] | None = None,
    timeout: float = 90,
) -> subprocess.CompletedProcess[str]:
    """Run the script to completion in its own session."""
    cmd: list[str | bytes] = [*(preexec or []), *shell_cmd(shell), str(SCRIPT), "-o", str(out_dir)]
    cmd += list(args)
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        errors="replace",
        env=env,
        timeout=timeout,
        start_new_session=True,
        check=False,
    )


def start_capture(out_dir: Path, *args: str, shell: str = "sh") -> subprocess.Popen[bytes]:
    """Start the script in its own session (setsid), like a terminal would.

    Its stderr goes to OUT_DIR/../capture.stderr (pipes would be held open by
    collectors left behind after a SIGKILL).
    """
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir.parent / "capture.stderr", "wb") as err:
        return subprocess.Popen(
            [*shell_cmd(shell), str(SCRIPT), "-o", str(out_dir), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


def bundle_dir(out_dir: Path) -> Path:
    dirs = [p for p in out_dir.iterdir() if p.is_dir() and p.name.startswith("hindsight-")]
    assert len(dirs) == 1, f"expected one bundle directory in {out_dir}: {dirs}"
    return dirs[0]


def wait_for(predicate, timeout: float, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def session_processes(sid: int) -> list[tuple[int, str, str]]:
    """Live (non-zombie) processes whose session id is `sid`: (pid, state, comm)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        rp = text.rfind(")")
        fields = text[rp + 2 :].split()
        comm = text[text.find("(") + 1 : rp]
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            found.append((int(stat.parent.name), state, comm))
    return found


def kill_session(sid: int) -> None:
    """Clean up after a test that SIGKILLed the script: stop what it had started."""
    for pid, _, _ in session_processes(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def load_manifest(bdir: Path) -> dict:
    return json.loads((bdir / "manifest.json").read_text(encoding="utf-8"))


def check_manifest(m: dict, bdir: Path | None = None) -> dict[str, dict]:
    """Validate the manifest schema (docs/bundle-format.md); return collectors by name."""
    assert m["format"] == "hindsight-bundle"
    assert m["format_version"] == 1
    assert isinstance(m["capture_version"], str)
    for key in ("hostname", "kernel", "os", "arch", "cpus"):
        assert key in m["host"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["start_utc"])
    assert isinstance(m["interval_s"], int) and isinstance(m["duration_s"], int)
    clock = m["clock"]
    assert isinstance(clock["start_epoch_s"], float | int)
    assert isinstance(clock["start_uptime_s"], float | int)
    assert abs(clock["boot_epoch_s"] - (clock["start_epoch_s"] - clock["start_uptime_s"])) < 1
    assert clock["ntp"]["source"] in {"chronyc", "timedatectl", "ntpq", "none"}
    assert clock["ntp"]["synchronized"] in {True, False, None}
    assert isinstance(m["user"]["uid"], int) and isinstance(m["user"]["root"], bool)
    assert isinstance(m["interrupted"], bool) and isinstance(m["complete"], bool)
    assert isinstance(m["args"], list)
    by_name: dict[str, dict] = {}
    for c in m["collectors"]:
        assert set(c) == COLLECTOR_KEYS, c
        assert c["kind"] in {"series", "snapshot", "history"}
        allowed = STATUSES | ({"running"} if not m["complete"] else set())
        assert c["status"] in allowed, c
        if c["status"] != "ok" and c["status"] != "running":
            assert c["reason"], c
        assert c["name"] not in by_name, f"duplicate collector {c['name']}"
        by_name[c["name"]] = c
        if (
            bdir is not None
            and c["output"]
            and c["status"] == "ok"
            and not c["output"].endswith("/")
        ):
            assert (bdir / c["output"]).is_file(), c
            if m["complete"]:
                assert (bdir / c["output"]).stat().st_size == c["bytes"], c
    if m["complete"]:
        assert m["end_utc"] and m["stop_reason"]
        assert clock["end_epoch_s"] >= clock["start_epoch_s"]
    return by_name


def extract_tarball(out_dir: Path, dest: Path) -> Path:
    tgzs = list(out_dir.glob("hindsight-*.tgz"))
    assert len(tgzs) == 1, tgzs
    with tarfile.open(tgzs[0]) as tf:
        names = tf.getnames()
        top = {n.split("/")[0] for n in names}
        assert top == {tgzs[0].name[: -len(".tgz")]}, top
        for member in tf.getmembers():
            assert member.isfile() or member.isdir(), member.name
        files = [m.name.split("/", 1)[1] for m in tf.getmembers() if m.isfile()]
        # analyze parses files as they come out of the archive once it has the manifest
        assert files[0] == "manifest.json", files[:3]
        assert len(files) == len(set(files)), "a member is archived twice"
        tf.extractall(dest, filter="data")
    return dest / tgzs[0].name[: -len(".tgz")]


# ------------------------------------------------------------------ timestamps
ISO_T = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)")


def _utc(date: str, clock: str) -> float:
    return datetime.fromisoformat(f"{date}T{clock}").replace(tzinfo=UTC).timestamp()


def timestamps(tool: str, path: Path) -> list[float]:
    """Wall-clock times (epoch seconds) found in a series file, per its format."""
    text = path.read_text(errors="replace")
    lines = text.splitlines()
    out: list[float] = []
    if tool in {"psi", "cgroup", "meminfo", "proc_vmstat", "infiniband"}:
        out = [float(ln.split(" ", 1)[0]) for ln in lines if ln.strip()]
    elif tool == "vmstat":
        for ln in lines:
            f = ln.split()
            if len(f) > 2 and f[0].isdigit():
                out.append(_utc(f[-2], f[-1]))
    elif tool == "iostat":
        out = [_utc(*m.groups()) for m in map(ISO_T.search, lines) if m and "T" in m.group(0)]
    elif tool == "iostat_json":
        doc = json.loads(text)
        for st in doc["sysstat"]["hosts"][0]["statistics"]:
            m = ISO_T.search(st["timestamp"])
            assert m
            out.append(_utc(*m.groups()))
    elif tool in {"mpstat", "mpstat_irq", "sar"}:
        date = re.search(r"\t(\d{4}-\d\d-\d\d) \t", lines[0]).group(1)
        out = [_utc(date, ln[:8]) for ln in lines if re.match(r"\d\d:\d\d:\d\d ", ln)]
    elif tool == "pidstat":
        out = [float(ln.split()[0]) for ln in lines if re.match(r"\s*\d{9,}\s", ln)]
    elif tool == "dmesg":
        out = [_utc(*m.groups()) for m in map(ISO_T.match, lines) if m]
    else:
        raise AssertionError(f"no timestamp reader for {tool}")
    return out


def restricted_path(tmp: Path, drop: set[str], first: tuple[str, ...] = ()) -> str:
    """A PATH with every command of the host except `drop` (symlinks in one folder);
    `first`: folders whose commands win (e.g. the venv's bin, for py-spy)."""
    bindir = tmp / "bin"
    bindir.mkdir()
    for d in (*first, "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name in drop or (bindir / name).exists():
                continue
            (bindir / name).symlink_to(os.path.join(d, name))
    return str(bindir)
