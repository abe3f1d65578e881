"""What to generate: the host shape, the time window and the incidents (`Spec`, `Incident`).

Times of incidents are seconds from the capture start (``start_s``) and a duration
(``dur_s``); `parse_incident` reads the CLI form ``KIND@START+DUR[:key=value,...]`` where
START and DUR are seconds or ``90s`` / ``5m`` / ``1h30m``. An incident with
``control=True`` is a *negative control*: the same kind of disturbance kept just below the
detectors' thresholds, which must not be reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from analyzer.errors import HindsightError

DEFAULT_START = datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC)
_DUR = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")
_HOST_OK = re.compile(r"[^A-Za-z0-9._-]")


class SpecError(HindsightError):
    """An impossible or malformed synth request (bad incident syntax, zero CPUs...)."""


@dataclass
class Incident:
    """One injected disturbance: ``kind`` (see `analyzer.synth.incidents.KINDS`), window
    ``[start_s, start_s + dur_s)`` in seconds from the capture start, kind-specific
    ``params`` (defaults filled in by the kind), ``control`` for a negative control."""

    kind: str
    start_s: float
    dur_s: float
    params: dict[str, object] = field(default_factory=dict)
    control: bool = False

    @property
    def end_s(self) -> float:
        return self.start_s + self.dur_s


@dataclass
class Spec:
    """A synthetic host and capture. ``seconds`` is the capture duration (``hours`` sets
    it too), ``interval`` the sampling interval in seconds, ``noise`` scales every
    random jitter (0 = flat lines, 1 = realistic). ``bpf`` adds the root-only bpftrace
    histograms; ``iostat_json`` the opt-in JSON twin of iostat (the capture's
    ``--iostat-json``; off by default, like the capture). ``irq_interval`` is the capture's
    ``--irq-interval`` (seconds between ``mpstat -I`` reports, a multiple of ``interval``);
    None = the capture's default, see `irq_interval_s`."""

    cpus: int = 8
    gpus: int = 1
    disks: int = 2
    nics: int = 1
    seconds: int = 600
    interval: int = 1
    seed: int = 1
    start: datetime = DEFAULT_START
    hostname: str = "gpu01"
    incidents: list[Incident] = field(default_factory=list)
    noise: float = 1.0
    bpf: bool = True
    iostat_json: bool = False
    irq_interval: int | None = None
    hours: float | None = None

    def __post_init__(self) -> None:
        if self.hours is not None:
            self.seconds = round(self.hours * 3600)
            self.hours = None
        if self.start.tzinfo is None:
            self.start = self.start.replace(tzinfo=UTC)
        self.start = self.start.astimezone(UTC).replace(microsecond=0)
        self.validate()

    def validate(self) -> None:
        checks = [
            (1 <= self.cpus <= 1024, "cpus must be 1..1024"),
            (0 <= self.gpus <= 16, "gpus must be 0..16"),
            (1 <= self.disks <= 64, "disks must be 1..64"),
            (0 <= self.nics <= 16, "nics must be 0..16"),
            (1 <= self.interval <= 3600, "interval must be 1..3600 s"),
            (self.interval * 3 <= self.seconds <= 7 * 86400, "seconds must be 3 intervals..7 days"),
            (0 <= self.noise <= 5, "noise must be 0..5"),
            (bool(self.hostname) and len(self.hostname) <= 64, "hostname must be 1..64 chars"),
            (
                self.irq_interval is None
                or (self.irq_interval >= 1 and self.irq_interval % self.interval == 0),
                "irq_interval must be a multiple of interval",
            ),
        ]
        for ok, msg in checks:
            if not ok:
                raise SpecError(msg)
        for inc in self.incidents:
            if inc.start_s < 0 or inc.dur_s <= 0 or inc.end_s > self.seconds:
                raise SpecError(
                    f"incident {inc.kind}@{inc.start_s:g}+{inc.dur_s:g} is not inside the "
                    f"{self.seconds} s capture"
                )

    @property
    def samples(self) -> int:
        """N: interval samples of the counted collectors (``duration / interval``)."""
        return self.seconds // self.interval

    @property
    def irq_interval_s(self) -> int:
        """Seconds between ``mpstat -I`` reports, as the capture script picks them:
        ``irq_interval``, else the smallest multiple of the interval that is >= 10 s;
        never more than the N intervals of the capture."""
        iv = self.interval
        irq = self.irq_interval if self.irq_interval is not None else -(-10 // iv) * iv
        return min(irq, self.samples * iv)

    @property
    def irq_samples(self) -> int:
        """Reports ``mpstat -I`` is asked for (its count argument)."""
        return self.samples * self.interval // self.irq_interval_s

    @property
    def safe_host(self) -> str:
        return _HOST_OK.sub("_", self.hostname)[:64]

    @property
    def bundle_name(self) -> str:
        return f"hindsight-{self.safe_host}-{self.start:%Y%m%dT%H%M%SZ}"

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds)


def parse_duration(text: str) -> float:
    """``90`` / ``90s`` / ``5m`` / ``1h30m`` / ``1.5h`` -> seconds."""
    m = _DUR.match(text.strip())
    if not text.strip() or m is None or not any(m.groups()):
        raise SpecError(f"not a duration: {text!r} (use 90, 90s, 5m or 1h30m)")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def _value(text: str) -> object:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def parse_incident(text: str, *, control: bool = False) -> Incident:
    """``KIND@START+DUR[:key=value,...]`` -> `Incident` (kind not checked here)."""
    head, _, opts = text.partition(":")
    kind, at, window = head.partition("@")
    kind = kind.strip().replace("-", "_")
    if not kind or not at or "+" not in window:
        raise SpecError(f"not an incident: {text!r} (use KIND@START+DUR, e.g. oom_kill@5m+90s)")
    start, _, dur = window.partition("+")
    params: dict[str, object] = {}
    for item in filter(None, opts.split(",")):
        key, eq, val = item.partition("=")
        if not eq or not key.strip():
            raise SpecError(f"incident option {item!r} is not key=value")
        params[key.strip()] = _value(val.strip())
    return Incident(kind, parse_duration(start), parse_duration(dur), params, control)
