"""What redaction masks and how: the token table and the one combined regex.

Kinds and their tokens (the same original always gets the same token; see
docs/redaction.md):

| kind | token | matched by |
|---|---|---|
| ``pattern`` | ``pat-N`` | each ``--redact-pattern`` regex (whole match), first |
| ``user`` | ``user-N`` | ``/home/NAME``, ``/Users/NAME``, ``/export/home/NAME`` (the NAME part), the local part of ``NAME@domain``, and every known user name (`Identifiers`) as a word |
| ``mac`` | ``mac-N`` | 6 to 20 two-hex-digit groups joined by ``:`` or ``-`` (Ethernet, EUI-64, IPoIB) |
| ``hostname`` | ``host-N`` | dotted names ending in a common TLD or ``.local``/``.internal``/``.lan``…, and every known host name as a word (any case) |
| ``ipv6`` | ``ip6-N`` | hex groups with ``::`` or 8 groups, checked by `ipaddress` |
| ``ipv4`` | ``ip-N`` | dotted quads with octets <= 255 |

Not masked on purpose (not personal, needed for diagnosis): loopback, unspecified and
broadcast addresses, the all-zero and all-ones MACs, PCI bus IDs, GPU UUIDs, device,
interface and cgroup names, numbers.

"As a word" means not preceded or followed by a letter or digit (``-``, ``_``, ``.`` and
``/`` separate words). A known host name that is also a common word of tool output
(``vm``, ``kernel``…) or is at most 3 characters long is masked only where it is not
followed by ``.``, so that ``vm.dirty_ratio`` stays a sysctl key.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

PREFIX = {
    "pattern": "pat",
    "user": "user",
    "mac": "mac",
    "hostname": "host",
    "ipv6": "ip6",
    "ipv4": "ip",
}

# Words that appear as structure in tool output: never masked as a user name (that would
# break headers such as iostat's "%user"), masked as a host name only in strict mode.
_STRUCTURAL = """user users system kernel root all data host hosts ip mac pat cpu cpus gpu gpus nvidia
    vm fs net dev debug abi crypto sunrpc proc sys mem memory io irq disk file anon node
    test default none unknown local localhost total some full avg idle steal guest nice
    usr soft iowait time date name id pid uid gid"""
STRUCTURAL_WORDS = frozenset(_STRUCTURAL.split())
_SYSTEM = """root daemon bin sys sync games man lp mail news uucp proxy www-data backup list irc
    gnats nobody nogroup messagebus syslog sshd ntp chrony polkitd tss uuidd dnsmasq avahi
    colord rtkit postfix usbmux pollinate landscape lxd dbus nscd rpc rpcuser nfsnobody halt
    shutdown operator ftp adm statd tcpdump libvirt-qemu nvidia-persistenced geoclue
    whoopsie kernoops saned pulse speech-dispatcher hplip gdm lightdm sddm cups-pk-helper
    fwupd-refresh dhcpcd _apt _chrony _rpc"""
SYSTEM_USERS = frozenset(_SYSTEM.split())
SKIP_HOSTS = frozenset({"localhost", "localhost.localdomain", "(none)", "unknown", "none"})
MIN_NAME_LEN = 2

TLDS = (
    "com|net|org|edu|gov|mil|int|io|ai|co|us|uk|de|fr|jp|cn|eu|ch|nl|se|in|ca|au|"
    "local|lan|internal|intranet|corp|localdomain|home\\.arpa"
)
_WORD_L = rb"(?<![A-Za-z0-9])"
_WORD_R = rb"(?![A-Za-z0-9])"


@dataclass
class Identifiers:
    """Names found before redaction (discovery), in the order found."""

    hostnames: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    not_masked: dict[str, str] = field(default_factory=dict)  # value -> why

    def add_host(self, name: str) -> None:
        name = name.strip().rstrip(".")
        if not name or name.lower() in SKIP_HOSTS or _is_ip(name):
            return
        if len(name) < MIN_NAME_LEN or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            self.not_masked.setdefault(name, "not a plausible host name")
            return
        if name.lower() not in (h.lower() for h in self.hostnames):
            self.hostnames.append(name)

    def add_user(self, name: str, *, personal: bool = False) -> None:
        """A user name; ``personal`` when known to be a login (uid >= 1000, a home)."""
        name = name.strip()
        if not name or name.isdigit() or name in self.users:
            return
        low = name.lower()
        if not personal and (
            low in SYSTEM_USERS
            or low.startswith(("systemd-", "_"))
            or (name.endswith("+") and any(s.startswith(low[:-1]) for s in _SYSTEMISH))
        ):
            return
        if low in STRUCTURAL_WORDS:
            self.not_masked.setdefault(
                name, "user name is also a word of tool output; give --redact-pattern to mask it"
            )
            return
        allowed = r"[\w .'@$+-]+" if personal else r"[A-Za-z0-9_.@$+-]+"  # real names: spaces
        if len(name) < MIN_NAME_LEN or not re.fullmatch(allowed, name):
            self.not_masked.setdefault(name, "not a plausible user name")
            return
        self.users.append(name)


_SYSTEMISH = SYSTEM_USERS | {"systemd-", "message", "nvidia-persistenced"}


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class TokenTable:
    """Original value -> token, per kind. ``values[token]`` keeps every spelling seen."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = dict.fromkeys(PREFIX, 0)
        self.values: dict[str, dict[str, object]] = {}

    def token(self, kind: str, original: str, key: str | None = None) -> str:
        key = original if key is None else key
        tok = self._tokens.get((kind, key))
        if tok is None:
            self._count[kind] += 1
            tok = f"{PREFIX[kind]}-{self._count[kind]}"
            self._tokens[(kind, key)] = tok
            self.values[tok] = {"kind": kind, "values": []}
        seen = self.values[tok]["values"]
        assert isinstance(seen, list)
        if original not in seen and len(seen) < 100:
            seen.append(original)
        return tok

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in self._count.items() if v}


def _alt(names: list[str]) -> bytes:
    ordered = sorted({n.encode("utf-8", "surrogateescape") for n in names}, key=len, reverse=True)
    return b"|".join(re.escape(n) for n in ordered)


def _scoped(pattern: str) -> str:
    """Turn leading global inline flags ``(?i)rest`` into ``(?i:rest)`` (combinable)."""
    m = re.match(r"\(\?([aiLmsux]+)\)", pattern)
    return f"(?{m.group(1)}:{pattern[m.end() :]})" if m else pattern


@dataclass
class Redactor:
    """The combined regex for one bundle plus its token table."""

    ids: Identifiers
    patterns: list[str]
    table: TokenTable = field(default_factory=TokenTable)

    def __post_init__(self) -> None:
        parts: list[bytes] = []
        gate: list[str] = []
        self.slow_reason: str | None = None
        for i, p in enumerate(self.patterns):
            re.compile(p.encode("utf-8"))  # raises re.error with the user's own pattern
            parts.append(b"(?P<p%d>%s)" % (i, _scoped(p).encode("utf-8")))
            if _re2_ok(_scoped(p)):
                gate.append(_scoped(p))
            else:
                self.slow_reason = (
                    f"--redact-pattern {p!r} is not RE2 syntax: every line is checked in Python"
                )
        parts.append(
            rb"(?P<home>(?<![A-Za-z0-9_.-])/(?:home|Users|export/home|usr/home)/)"
            rb"(?P<homeuser>[A-Za-z0-9_][A-Za-z0-9_.@$-]*)"
        )
        parts.append(
            rb"(?P<email>(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64})(?=@[A-Za-z0-9-]+\.[A-Za-z])"
        )
        parts.append(
            rb"(?P<mac>(?<![0-9A-Za-z:-])[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5,19}(?![0-9A-Za-z:-]))"
        )
        strict = [h for h in self.ids.hostnames if _strict(h)]
        loose = [h for h in self.ids.hostnames if not _strict(h)]
        if loose:  # a known name, with its domain when one follows: one token for both
            parts.append(
                rb"(?P<host>(?i:" + _WORD_L + rb"(?P<hostname>" + _alt(loose) + rb")"
                rb"(?:(?:\.[A-Za-z0-9-]+)*\.(?:" + TLDS.encode() + rb"))?" + _WORD_R + rb"))"
            )
        parts.append(
            rb"(?P<fqdn>(?i:(?<![A-Za-z0-9.-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
            rb"(?:" + TLDS.encode() + rb"))(?![A-Za-z0-9-]|\.[A-Za-z0-9]))"
        )
        if strict:
            parts.append(
                rb"(?P<hoststrict>(?i:(?<![A-Za-z0-9.])(?:" + _alt(strict) + rb"))(?![A-Za-z0-9.]))"
            )
        if self.ids.users:
            parts.append(
                rb"(?P<user>" + _WORD_L + rb"(?:" + _alt(self.ids.users) + rb")" + _WORD_R + rb")"
            )
        parts.append(
            rb"(?P<ip6>(?<![0-9A-Za-z:.])(?=[0-9A-Fa-f:]*::|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f])"
            rb"(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?(?![0-9A-Za-z:]))"
        )
        parts.append(rb"(?P<ip4>(?<![0-9.])(?:\d{1,3}\.){3}\d{1,3}(?![0-9]|\.[0-9]))")
        self.regex = re.compile(b"|".join(parts), re.M)
        gate += [
            r"/(?:home|Users|export/home|usr/home)/",
            r"@[A-Za-z0-9-]+\.[A-Za-z]",
            r"[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}",
            r"(?i:\.(?:" + TLDS + r"))",
            r"::|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]",
            r"\d\.\d{1,3}\.\d{1,3}\.\d",
        ]
        if loose:
            gate.append("(?i:" + "|".join(re.escape(h) for h in loose) + ")")
        if strict:
            names = "|".join(re.escape(h) for h in strict)
            gate.append(f"(?i:(?:^|[^A-Za-z0-9.])(?:{names})(?:[^A-Za-z0-9.]|$))")
        if self.ids.users:
            gate.append("|".join(re.escape(u) for u in self.ids.users))
        self.gate = None if self.slow_reason else "|".join(gate)
        self._npat = len(self.patterns)
        self._hosts = {h.lower() for h in self.ids.hostnames}

    def sub(self, data: bytes) -> bytes:
        """Redact text (whole lines) with the Python regex alone."""
        return self.regex.sub(self._replace, data)

    def sub_block(self, block: bytes) -> bytes:
        """Redact a block of whole lines; same result as `sub`, much faster.

        RE2 (pyarrow, C++) first picks the lines that could hold something to mask (the
        gate is a superset of the Python regex); only those runs of lines go through the
        Python regex. Numeric tool output rarely passes the gate.
        """
        if self.gate is None or len(block) < 4096:
            return self.sub(block)
        lines = pc.split_pattern(pa.array([block], pa.large_binary()), b"\n").flatten()
        flagged = pc.indices_nonzero(pc.match_substring_regex(lines, self.gate))
        if len(flagged) == 0:
            return block
        if len(flagged) > len(lines) // 4:
            return self.sub(block)
        length = pc.binary_length(lines)
        ends = pc.take(pc.cumulative_sum(pc.add(length, 1)), flagged).to_pylist()
        sizes = pc.take(length, flagged).to_pylist()
        out: list[bytes] = []
        pos = run_start = run_end = 0
        for end, size in zip(ends, sizes, strict=True):
            start = end - size - 1
            if start != run_end or run_end == 0:
                if run_end:
                    out += [block[pos:run_start], self.sub(block[run_start:run_end])]
                    pos = run_end
                run_start = start
            run_end = end
        out += [block[pos:run_start], self.sub(block[run_start:run_end]), block[run_end:]]
        return b"".join(out)

    def _replace(self, m: re.Match[bytes]) -> bytes:
        kind = m.lastgroup
        text = m.group(0).decode("utf-8", "surrogateescape")
        t = self.table
        if kind is None:
            return m.group(0)
        if kind.startswith("p") and kind[1:].isdigit():
            return t.token("pattern", text).encode()
        if kind == "homeuser":
            user = m.group("homeuser").decode("utf-8", "surrogateescape")
            return m.group("home") + t.token("user", user).encode()
        if kind == "email":
            return t.token("user", text).encode()
        if kind == "mac":
            norm = text.lower().replace("-", ":")
            if set(norm) <= {"0", ":"} or set(norm) <= {"f", ":"}:
                return m.group(0)
            return t.token("mac", text, norm).encode()
        if kind == "host":
            name = m.group("hostname").decode("utf-8", "surrogateescape")
            return t.token("hostname", text, name.lower()).encode()
        if kind in ("hoststrict", "fqdn"):
            return t.token("hostname", text, text.lower()).encode()
        if kind == "user":
            return t.token("user", text).encode()
        if kind == "ip6":
            try:
                addr = ipaddress.IPv6Address(text)
            except ValueError:
                return m.group(0)
            if addr.is_loopback or addr.is_unspecified:
                return m.group(0)
            return t.token("ipv6", text, addr.compressed).encode()
        if kind == "ip4":
            octets = text.split(".")
            if (
                any(int(o) > 255 for o in octets)
                or octets[0] in ("0", "127")
                or text.startswith("255.255.")
            ):
                return m.group(0)
            return t.token("ipv4", text).encode()
        return m.group(0)  # pragma: no cover - every group is handled above


def _re2_ok(pattern: str) -> bool:
    try:
        pc.match_substring_regex(pa.array([b""], pa.large_binary()), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _strict(host: str) -> bool:
    return len(host) <= 3 or host.lower() in STRUCTURAL_WORDS
