"""Human-readable times for the report: UTC always, host local time when the zone is known.

Times arrive as epoch milliseconds (UTC), which is how :mod:`reports.queries` returns every
timestamp column.

>>> tf = TimeFormatter("Europe/Berlin")
>>> tf.utc(1714564800000), tf.local(1714564800000)
('2024-05-01 12:00:00 UTC', '2024-05-01 14:00:00 CEST')
>>> TimeFormatter("+05:30").local(1714564800000)
'2024-05-01 17:30:00 UTC+05:30'
>>> TimeFormatter("Mars/Olympus").local(0) is None
True
>>> duration(3_725_000)
'1 h 2 min 5 s'
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC_NAMES = {"UTC", "GMT", "Z", "ETC/UTC", "UTC0", "GMT0", "ETC/GMT", "UCT", "ETC/UCT"}
# Only the ``date +%z`` form: "UTC+2" is ambiguous (POSIX TZ reads it as two hours *behind*).
_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})?$")


def parse_zone(name: Any) -> tzinfo | None:
    """An IANA zone name or a ``±HH[:MM]`` offset; None when unknown or UTC itself.

    >>> parse_zone("UTC0") is None, parse_zone("UTC+2") is None, str(parse_zone("-0300"))
    (True, True, 'UTC-03:00')
    """
    if not name or not isinstance(name, str):
        return None
    name = name.strip()
    if name.upper() in UTC_NAMES:
        return None
    m = _OFFSET.match(name)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
        return timezone(sign * delta, f"UTC{m.group(1)}{int(m.group(2)):02d}:{m.group(3) or '00'}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def duration(ms: int | float) -> str:
    """``3725000`` → ``'1 h 2 min 5 s'``."""
    s = round(ms / 1000)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (s, "s")]
    out = [f"{v} {u}" for v, u in parts if v]
    return " ".join(out) if out else "0 s"


class TimeFormatter:
    """Formats epoch-ms times in UTC and, when the host's zone is known, in local time."""

    def __init__(self, zone_name: Any) -> None:
        self.zone_name = zone_name if isinstance(zone_name, str) else None
        self.zone = parse_zone(zone_name)

    @staticmethod
    def _dt(ms: Any) -> datetime | None:
        if ms is None or isinstance(ms, bool):
            return None
        if isinstance(ms, datetime):
            return ms.astimezone(UTC)
        try:
            return datetime.fromtimestamp(float(ms) / 1000, UTC)
        except (TypeError, ValueError, OverflowError, OSError):
            return None

    def utc(self, ms: Any) -> str:
        dt = self._dt(ms)
        return dt.strftime("%Y-%m-%d %H:%M:%S UTC") if dt else ""

    def local(self, ms: Any) -> str | None:
        dt = self._dt(ms)
        if dt is None or self.zone is None:
            return None
        return dt.astimezone(self.zone).strftime("%Y-%m-%d %H:%M:%S %Z")

    def window(self, start: Any, end: Any) -> str:
        """``'2024-05-01 12:00:00 → 12:05:00 UTC (5 min)'``."""
        a, b = self._dt(start), self._dt(end)
        if a is None:
            return ""
        if b is None or b <= a:
            return self.utc(start)
        fmt = "%H:%M:%S" if a.date() == b.date() else "%Y-%m-%d %H:%M:%S"
        return (
            f"{a:%Y-%m-%d %H:%M:%S} → {b.strftime(fmt)} UTC "
            f"({duration((b - a).total_seconds() * 1000)})"
        )

    def header(self, meta: dict[str, Any], x_range: tuple[int, int] | None) -> dict[str, Any]:
        """Capture span lines for the report header."""
        start, end = meta.get("start_utc"), meta.get("end_utc")
        if (start is None or end is None) and x_range is not None:
            start, end = x_range
        out: dict[str, Any] = {"span_utc": "", "span_local": None, "duration": ""}
        if start is None:
            return out
        out["span_utc"] = self.window(start, end)
        if end is not None and self.zone is not None:
            out["span_local"] = f"{self.local(start)} → {self.local(end)} ({self.zone_name})"
        elif (
            self.zone_name and self.zone is None and self.zone_name.strip().upper() not in UTC_NAMES
        ):
            out["span_local"] = f"host zone {self.zone_name!r} not recognised; times in UTC"
        return out
