"""Header-name lookups over `_sar_tables`: alias maps, section classification, PSI columns."""

from __future__ import annotations

from analyzer.parsers._sar_tables import COLUMNS, PSI_PREFIX, PSI_SUFFIX, SIGNATURES


def text_alias_map(table: str) -> dict[str, tuple[str, float]]:
    """Header name -> (column, scale) for one table."""
    out: dict[str, tuple[str, float]] = {}
    for col, spec in COLUMNS[table].items():
        for name in spec[3]:
            n, _, sc = name.partition("*")
            out[n] = (col, float(sc) if sc else 1.0)
    return out


def json_alias_list(table: str) -> dict[str, list[tuple[str, float]]]:
    """Column -> [(json key, scale)] in preference order."""
    out: dict[str, list[tuple[str, float]]] = {}
    for col, spec in COLUMNS[table].items():
        out[col] = []
        for name in spec[4]:
            n, _, sc = name.partition("*")
            out[col].append((n, float(sc) if sc else 1.0))
    return out


def classify(names: list[str]) -> str:
    """The table a section with these header names goes to ('sar_psi', a dedicated one, or 'sar_other')."""
    s = set(names)
    if any(n.rstrip("0123456789-") in PSI_PREFIX for n in names if n.startswith("%")) and all(
        _psi_split(n) for n in names
    ):
        return "sar_psi"
    for table, sig in SIGNATURES.items():
        if all(n in s for n in sig):
            amap = text_alias_map(table)
            # every name must be known, else the section is not what we think
            if all(n in amap for n in names):
                return table
    return "sar_other"


def _psi_split(name: str) -> tuple[str, str, str] | None:
    for pre, (res, kind) in PSI_PREFIX.items():
        if name.startswith(pre):
            rest = name[len(pre) :]
            if rest in PSI_SUFFIX:
                return res, kind, PSI_SUFFIX[rest]
    return None


def psi_templates(names: list[str]) -> list[tuple[str, str, dict[str, int]]]:
    """For a PSI header: [(resource, kind, {column: token index})]."""
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for i, n in enumerate(names):
        sp = _psi_split(n)
        if sp:
            groups.setdefault((sp[0], sp[1]), {})[sp[2]] = i
    return [(r, k, idx) for (r, k), idx in groups.items()]
