"""Reading `manifest.json` (schema: docs/bundle-format.md) without trusting it.

The manifest is optional. Every field is checked for type and range one by one; a bad
field is dropped with a note, never fatal. Times are parsed to UTC datetimes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer.names import display_name

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
SUPPORTED_FORMAT_VERSIONS = (1,)
# Sanity window for capture times: before 2000 or far in the future is not a real capture.
_MIN_EPOCH = 946684800.0
_MAX_FUTURE_S = 366 * 86400
# Longest plausible capture (-d 0 stops at 24 h; 72 h captures exist): the 1 s signals grid
# spans start..end, so a hostile span of years would mean billions of rows.
MAX_SPAN_S = 8 * 86400


@dataclass(frozen=True)
class CollectorEntry:
    """One collector as the manifest describes it."""

    name: str
    tool: str | None
    command: str | None
    output: str | None
    stderr: str | None
    status: str | None
    exit_code: int | None
    reason: str | None


@dataclass
class Manifest:
    """The validated subset of manifest.json. ``notes`` lists what was dropped and why."""

    present: bool = False
    format_version: int | None = None
    capture_version: str | None = None
    hostname: str | None = None
    kernel: str | None = None
    os: str | None = None
    arch: str | None = None
    cpus: int | None = None
    start: datetime | None = None
    end: datetime | None = None
    interval_s: float | None = None
    timezone: str | None = None
    boot_time: datetime | None = None
    interrupted: bool | None = None
    ntp_synchronized: bool | None = None
    ntp_offset_s: float | None = None
    root: bool | None = None
    history_files: list[str] = field(default_factory=list)  # sysstat files from before the capture
    trigger: str | None = None  # what cut a flight-recorder bundle (trigger spec, SIGUSR1, --dump)
    trigger_time: datetime | None = None
    collectors: list[CollectorEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def collector_for(self, rel: str) -> CollectorEntry | None:
        """The collector whose output (path relative to the bundle root) is ``rel``."""
        for c in self.collectors:
            if c.output and bundle_path(c.output) == rel:
                return c
        return None


def bundle_path(output: str) -> str:
    """A manifest ``output`` as a bundle-relative path in its display form (as
    `analyzer.bundle.BundleFile.rel`): leading ``./`` removed, nothing else
    (``lstrip("./")`` would turn ``../../etc/passwd`` into ``etc/passwd``)."""
    while output.startswith("./"):
        output = output[2:]
    return display_name(output)


def load_manifest(path: Path | None) -> Manifest:
    """Read and validate a manifest; a missing or broken one gives an empty `Manifest`."""
    m = Manifest()
    if path is None:
        m.notes.append("no manifest.json: hand-made bundle, metadata inferred from files")
        return m
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            m.notes.append(f"manifest.json larger than {MAX_MANIFEST_BYTES} bytes: ignored")
            return m
        data = json.loads(path.read_bytes().decode("utf-8-sig", "replace"))  # a BOM is harmless
    except (OSError, ValueError, RecursionError) as e:
        m.notes.append(f"manifest.json is not valid JSON ({str(e)[:120]}): ignored")
        return m
    if not isinstance(data, dict):
        m.notes.append("manifest.json is not a JSON object: ignored")
        return m
    m.present = True
    m.raw = data
    _fill(m, data)
    return m


def _fill(m: Manifest, d: dict[str, Any]) -> None:
    m.format_version = _int(m, d, "format_version", hi=1_000_000)
    if m.format_version is not None and m.format_version not in SUPPORTED_FORMAT_VERSIONS:
        m.notes.append(
            f"manifest format_version {m.format_version} is unknown to this analyzer "
            f"(supports {SUPPORTED_FORMAT_VERSIONS}); fields read on a best-effort basis"
        )
    m.capture_version = _str(m, d, "capture_version")
    host = d.get("host")
    if isinstance(host, dict):
        m.hostname = _str(m, host, "hostname", "host.")
        m.kernel = _str(m, host, "kernel", "host.")
        m.os = _str(m, host, "os", "host.")
        m.arch = _str(m, host, "arch", "host.")
        m.cpus = _int(m, host, "cpus", "host.", lo=1, hi=1_000_000)
    elif isinstance(host, str):
        m.hostname = host[:255]
    m.start = _time(m, d, "start_utc")
    m.end = _time(m, d, "end_utc")
    if m.start and m.end and m.end < m.start:
        m.notes.append("manifest end_utc is before start_utc: both ignored")
        m.start = m.end = None
    if m.start and m.end and (m.end - m.start).total_seconds() > MAX_SPAN_S:
        m.notes.append(f"manifest start_utc..end_utc spans more than {MAX_SPAN_S} s: both ignored")
        m.start = m.end = None
    m.interval_s = _float(m, d, "interval_s", lo=0.001, hi=86400)
    m.timezone = _str(m, d, "timezone")
    m.interrupted = _bool(d.get("interrupted"))
    if d.get("complete") is False and not isinstance(d.get("trigger"), dict):
        m.notes.append(
            "manifest is not final (complete: false): the capture was killed or could not "
            "write its last manifest (disk full?); collectors may show as running"
        )
    clock = d.get("clock")
    if isinstance(clock, dict):
        boot = _float(m, clock, "boot_epoch_s", "clock.", lo=0, hi=4e9)
        if boot is not None:
            m.boot_time = datetime.fromtimestamp(boot, UTC)
        ntp = clock.get("ntp")
        if isinstance(ntp, dict):
            m.ntp_synchronized = _bool(ntp.get("synchronized"))
            m.ntp_offset_s = _float(m, ntp, "offset_s", "clock.ntp.", lo=-1e6, hi=1e6)
    user = d.get("user")
    if isinstance(user, dict):
        m.root = _bool(user.get("root"))
    _fill_marks(m, d)
    cols = d.get("collectors")
    if isinstance(cols, list):
        for c in cols[:10_000]:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                m.collectors.append(
                    CollectorEntry(
                        name=c["name"][:200],
                        tool=_opt_str(c.get("tool")),
                        command=_opt_str(c.get("command"), 4000),
                        output=_opt_str(c.get("output"), 1000),
                        stderr=_opt_str(c.get("stderr"), 1000),
                        status=_opt_str(c.get("status")),
                        exit_code=c.get("exit_code") if is_exit_code(c.get("exit_code")) else None,
                        reason=_opt_str(c.get("reason"), 2000),
                    )
                )
    elif cols is not None:
        m.notes.append("manifest collectors is not a list: ignored")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**53


def is_exit_code(v: Any) -> bool:
    """An int that fits the store's 32-bit ``exit_code`` column."""
    return _is_int(v) and -(2**31) <= v < 2**31


def _opt_str(v: Any, limit: int = 200) -> str | None:
    return v[:limit] if isinstance(v, str) else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _str(m: Manifest, d: dict[str, Any], key: str, prefix: str = "") -> str | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        m.notes.append(f"manifest {prefix}{key} is not a string: ignored")
        return None
    return v[:1000]


def _int(
    m: Manifest, d: dict[str, Any], key: str, prefix: str = "", lo: int = 0, hi: int = 2**31
) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if not _is_int(v) or not lo <= v <= hi:
        m.notes.append(
            f"manifest {prefix}{key}={str(v)[:40]!r} is not an integer in [{lo}, {hi}]: ignored"
        )
        return None
    return int(v)


def _float(
    m: Manifest,
    d: dict[str, Any],
    key: str,
    prefix: str = "",
    lo: float = -math.inf,
    hi: float = math.inf,
) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float)
        or not math.isfinite(v)
        or not lo <= v <= hi
    ):
        m.notes.append(
            f"manifest {prefix}{key}={str(v)[:40]!r} is not a number in [{lo:g}, {hi:g}]: ignored"
        )
        return None
    return float(v)


def _time(m: Manifest, d: dict[str, Any], key: str) -> datetime | None:
    v = d.get(key)
    if v is None:
        return None
    try:
        if not isinstance(v, str):
            raise ValueError
        t = datetime.fromisoformat(v.replace("Z", "+00:00"))
        t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    except (ValueError, OverflowError):
        m.notes.append(f"manifest {key}={str(v)[:40]!r} is not an ISO-8601 time: ignored")
        return None
    now = datetime.now(UTC).timestamp()
    if not _MIN_EPOCH <= t.timestamp() <= now + _MAX_FUTURE_S:
        m.notes.append(
            f"manifest {key}={v[:40]!r} is implausible (before 2000 or in the future): ignored"
        )
        return None
    return t


def _fill_marks(m: Manifest, d: dict[str, Any]) -> None:
    """``history.files`` (sysstat daily files) and a flight-recorder dump's ``trigger``."""
    hist = d.get("history")
    if isinstance(hist, dict) and isinstance(hist.get("files"), list):
        m.history_files = [
            bundle_path(f)[:1000] for f in hist["files"][:1000] if isinstance(f, str)
        ]
    trig = d.get("trigger")
    if isinstance(trig, dict):
        m.trigger = _str(m, trig, "name", "trigger.")
        m.trigger_time = _time(m, trig, "utc")
