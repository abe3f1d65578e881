"""Stage 2, *identify*: which tool produced each file, from its content.

Each registered parser scores the file's first bytes (``sniff(head, name) -> [0, 1]``);
the best score of at least ``MIN_CONFIDENCE`` wins. The manifest's ``tool`` for the
file only breaks near-ties, and the file name is only a hint the parsers may use. So a
renamed ``vmstat -t`` output still loads as vmstat.

Files that are not tool output get a *role* instead of a tool: the manifest, the
capture's own log, and each collector's ``.err``/``.status`` companions (attached to the
collector's output file with the same stem). Anything else unrecognised is listed as
``unrecognised`` with its size — never silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from analyzer.bundle import BundleFile
from analyzer.manifest import Manifest
from analyzer.parsers import PARSERS
from analyzer.parsers._read import read_head

MIN_CONFIDENCE = 0.5
MANIFEST_TOOL_BONUS = 0.15
COMPANION_SUFFIXES = (".err", ".status")
CAPTURE_LOG = "capture.log"
CAPTURE_STATE_DIR = ".state/"


@dataclass(frozen=True)
class Identified:
    """The verdict for one file. ``role``: data | manifest | capture_log | stderr |
    status | capture_state | unrecognised | pending (a known tool whose parser is not written yet)."""

    file: BundleFile
    role: str
    tool: str | None
    confidence: float
    companion_of: str | None = None
    note: str = ""


def identify_all(
    files: list[BundleFile], manifest: Manifest, known: dict[Path, Identified] | None = None
) -> list[Identified]:
    """Identify every file of a bundle; companions point at their output file.

    ``known``: verdicts already reached for some files (by path), reused when the file
    still has the same name (the parse stage identifies files while they are extracted).
    """
    rels = {f.rel for f in files}
    known = known or {}
    out: list[Identified] = []
    for f in files:
        seen = known.get(f.path)
        out.append(seen if seen is not None and seen.file == f else _identify(f, manifest, rels))
    return out


def _identify(f: BundleFile, manifest: Manifest, rels: set[str]) -> Identified:
    p = PurePosixPath(f.rel)
    if f.rel == "manifest.json":
        return Identified(f, "manifest", None, 1.0)
    if f.rel == CAPTURE_LOG:
        return Identified(f, "capture_log", None, 1.0)
    if f.rel.startswith(CAPTURE_STATE_DIR):
        return Identified(
            f, "capture_state", None, 1.0, note="capture's private state (left by a killed capture)"
        )
    if p.suffix in COMPANION_SUFFIXES:
        owner = _companion_owner(p, rels)
        if owner is not None:
            return Identified(f, "stderr" if p.suffix == ".err" else "status", None, 1.0, owner)
    if f.size == 0:
        hint = _manifest_tool(f.rel, manifest)
        return Identified(f, "data", hint if hint in PARSERS else None, 0.0, note="empty file")
    if _looks_binary(f.path):
        return Identified(f, "unrecognised", None, 0.0, note="binary content")
    head = read_head(f.path)
    hint = _manifest_tool(f.rel, manifest)
    if hint in PARSERS:  # shortcut, same verdict: no other sniffer can beat > 1.0
        try:
            s = float(PARSERS[hint].sniff(head, p.name)) + MANIFEST_TOOL_BONUS
        except Exception:
            s = 0.0
        if s > 1.0:
            return Identified(f, "data", hint, 1.0)
    best, score = None, 0.0
    for tool, module in PARSERS.items():
        try:
            s = float(module.sniff(head, p.name))
        except Exception:  # a sniffer must never take the whole analysis down
            s = 0.0
        if tool == hint:
            s += MANIFEST_TOOL_BONUS
        if s > score:
            best, score = tool, s
    if best is not None and score >= MIN_CONFIDENCE:
        return Identified(f, "data", best, min(score, 1.0))
    if hint and hint not in PARSERS:
        return Identified(f, "pending", hint, 0.0, note=f"no parser for {hint} yet")
    return Identified(
        f, "unrecognised", None, score, note="content not recognised as any supported tool"
    )


def _companion_owner(p: PurePosixPath, rels: set[str]) -> str | None:
    stem = p.with_suffix("")
    owner = _owners(frozenset(rels)).get(str(stem))
    if owner is not None:
        return owner
    # A companion whose output file is absent still belongs to that collector.
    return str(stem) + ".out"


@lru_cache(maxsize=4)
def _owners(rels: frozenset[str]) -> dict[str, str]:
    """Output file per stem (first in sorted order), for `_companion_owner` in O(1)."""
    owners: dict[str, str] = {}
    for candidate in sorted(rels):
        c = PurePosixPath(candidate)
        if c.suffix not in COMPANION_SUFFIXES:
            owners.setdefault(str(c.with_suffix("")), candidate)
    return owners


def _manifest_tool(rel: str, manifest: Manifest) -> str | None:
    entry = manifest.collector_for(rel)
    return entry.tool if entry else None


_CONTROL_BYTES = bytes([*range(0, 9), *range(14, 32)])


def _looks_binary(path: Path) -> bool:
    """Text tools may carry a few stray NULs (sysstat 11.5.7, kmsg dumps); binary data
    is full of control bytes."""
    with open(path, "rb") as fh:
        block = fh.read(8192)
    control = len(block) - len(block.translate(None, _CONTROL_BYTES))
    return control > len(block) * 0.10
