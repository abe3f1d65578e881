"""``nvidia-smi -q -x`` XML reader (private helper of ``nvidia_smi_q``).

A snapshot is small (tens of kB per GPU), so it is read with ``xml.etree``'s pull
parser rather than tokenized with polars.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from analyzer.parsers import _read
from analyzer.parsers.base import Coverage


def _flatten(elem: ET.Element, prefix: str, out: dict[str, str]) -> None:
    for child in elem:
        path = f"{prefix}{child.tag}"
        if len(child):
            _flatten(child, path + "/", out)
        else:
            out.setdefault(path, (child.text or "").strip())


def parse_xml(path: Path, cov: Coverage) -> tuple[list[dict[str, str]], dict[str, str]]:
    """-> (one ``{tag/path: text}`` dict per complete ``<gpu>``, the root's leaf elements).

    Refuses ``<!ENTITY`` / internal DTD subsets (entity bombs) and does not feed the
    DOCTYPE line. Lines are fed one at a time so a syntax error or a truncated ``<gpu>``
    is attributed to lines; complete GPUs before it are kept. Fills ``cov``.
    """
    df = _read.read_lines(path).collect()
    cov.total = df.height
    lines = df.get_column("line").to_list()
    if any("<!ENTITY" in ln or re.search(r"<!DOCTYPE[^>]*\[", ln) for ln in lines):
        cov.add_skipped("XML with entity declarations / internal DTD refused", len(lines))
        cov.notes.append("XML entity declarations are refused (entity-expansion guard)")
        return [], {}
    parser = ET.XMLPullParser(events=("start", "end"))
    depth, gpus, top, gpu_start = 0, [], {}, None
    status = ["structure"] * len(lines)
    error_at = None
    for i, ln in enumerate(lines):
        stripped = ln.strip()
        if not stripped or stripped.startswith(("<?xml", "<!DOCTYPE")):
            continue
        status[i] = "parsed"
        try:
            parser.feed(ln + "\n")
            for event, elem in parser.read_events():
                if event == "start":
                    depth += 1
                    if depth == 2 and elem.tag == "gpu":
                        gpu_start = i
                    continue
                depth -= 1
                if depth == 1 and elem.tag == "gpu":
                    d: dict[str, str] = {}
                    _flatten(elem, "", d)
                    if elem.get("id"):
                        d["@bus_id"] = elem.get("id", "")
                    d["@index"] = str(len(gpus))
                    gpus.append(d)
                    gpu_start = None
                elif depth == 1 and not len(elem):
                    top[elem.tag] = (elem.text or "").strip()
        except ET.ParseError:
            error_at = i
            break
    end = error_at if error_at is not None else len(lines)
    if error_at is not None:
        cov.add_skipped("XML syntax error (truncated or corrupt) and after", len(lines) - error_at)
        cov.notes.append(f"XML parsing stopped at line {error_at + 1}")
    if gpu_start is not None:
        n = sum(1 for s in status[gpu_start:end] if s == "parsed")
        cov.add_skipped("incomplete <gpu> element (truncated)", n)
        for k in range(gpu_start, end):
            status[k] = "skipped" if status[k] == "parsed" else status[k]
    cov.parsed += sum(1 for s in status[:end] if s == "parsed")
    cov.add_structure(
        "xml declaration / doctype / blank", sum(1 for s in status[:end] if s == "structure")
    )
    return gpus, top
