"""Property: every registered parser, given a mutation of any real file it recognises
(from tests/fixtures), returns a ParseResult whose coverage adds up and whose tables
conform to the declared schema, or raises ParseError. Never anything else.

Mutations mimic what broken hosts and hand-made bundles do to files: CRLF line ends,
truncation mid-line, NUL bytes, invalid UTF-8, flipped bytes, duplicated / dropped /
swapped lines, lines from another tool spliced in, absurd numbers. Longer sessions:
``HINDSIGHT_FUZZ_EXAMPLES=2000 pytest tests/adversarial/test_fuzz_parsers.py``, or atheris
(docs/fuzzing.md).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from hostile import FIX
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import PARSERS
from analyzer.parsers._read import read_head
from analyzer.parsers.base import ParseContext, ParseResult

EXAMPLES = int(os.environ.get("HINDSIGHT_FUZZ_EXAMPLES", "25"))  # per parser
MAX_FIXTURE_BYTES = 256 * 1024


@cache
def corpus() -> dict[str, list[bytes]]:
    """Fixture contents grouped by the tool whose sniffer claims them most strongly."""
    out: dict[str, list[bytes]] = {t: [] for t in PARSERS}
    for path in sorted(FIX.rglob("*")):
        if (
            not path.is_file()
            or path.name == "PROVENANCE.md"
            or path.name.endswith(".golden.json")  # expected outputs, not tool outputs
            or path.stat().st_size > MAX_FIXTURE_BYTES
        ):
            continue
        head = read_head(path)
        scores = {t: _sniff(m, head, path.name) for t, m in PARSERS.items()}
        best = max(scores, key=scores.__getitem__)
        if scores[best] >= 0.5:
            out[best].append(path.read_bytes())
    return out


def _sniff(module: object, head: str, name: str) -> float:
    try:
        return float(module.sniff(head, name))  # type: ignore[attr-defined]
    except Exception:
        return 0.0


def mutate(data: st.DataObject, raw: bytes, others: list[bytes]) -> bytes:
    lines = raw.splitlines(keepends=True) or [b""]
    for op in data.draw(st.lists(st.sampled_from(OPS), max_size=5), label="ops"):
        lines = lines or [b""]
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        if op == "crlf":
            lines = [ln.replace(b"\n", b"\r\n") for ln in lines]
        elif op == "truncate":
            cut = data.draw(st.integers(0, len(lines[i])), label="cut")
            lines = [*lines[:i], lines[i][:cut]]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "drop" and len(lines) > 1:
            lines.pop(i)
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1), label="other line")
            lines[i], lines[j] = lines[j], lines[i]
        elif op in ("nul", "bad_utf8", "flip"):
            ln = bytearray(lines[i])
            at = data.draw(st.integers(0, len(ln)), label="at")
            junk = {"nul": b"\x00", "bad_utf8": b"\xff\xc3(\xed\xa0\x80"}.get(op)
            if junk is None and ln:
                ln[min(at, len(ln) - 1)] ^= data.draw(st.integers(1, 255), label="mask")
            else:
                ln[at:at] = junk or b""
            lines[i] = bytes(ln)
        elif op == "splice" and others:
            donor = data.draw(st.sampled_from(others), label="donor").splitlines(keepends=True)
            if donor:
                lines.insert(i, data.draw(st.sampled_from(donor), label="donor line"))
        elif op == "number":
            big = data.draw(st.sampled_from(NUMBERS), label="number")
            lines[i] = bytes(_replace_first_number(lines[i], big))
        elif op == "empty":
            lines = []
    return b"".join(lines)


OPS = [
    "crlf",
    "truncate",
    "dup",
    "drop",
    "swap",
    "nul",
    "bad_utf8",
    "flip",
    "splice",
    "number",
    "empty",
]
NUMBERS = [b"99999999999999999999999", b"-1", b"NaN", b"inf", b"1e309", b"0x10", b"-0", b"3,14"]


def _replace_first_number(line: bytes, number: bytes) -> bytes:
    import re

    return re.sub(rb"\d+(\.\d+)?", lambda _: number, line, count=1)


def check_result(tool: str, result: ParseResult) -> None:
    result.coverage.check()
    declared = PARSERS[tool].TABLES
    for name, frame in result.tables.items():
        assert name in declared, f"{tool} produced undeclared table {name}"
        df = declared[name].conform(frame).collect()
        assert isinstance(df, pl.DataFrame)


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_every_parser_survives_mutated_real_files(
    tool: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    files = corpus()[tool]
    if not files:
        pytest.skip(f"no fixture of {tool} in tests/fixtures")
    others = [b for t, fs in corpus().items() if t != tool for b in fs[:3]]
    work = tmp_path_factory.mktemp(f"fuzz-{tool}")

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        raw = data.draw(st.sampled_from(files), label="fixture")
        path = work / "input"
        path.write_bytes(mutate(data, raw, others))
        ctx = ParseContext(file_name=data.draw(st.sampled_from(["input", "x.out", "cpu.stat"])))
        try:
            result = PARSERS[tool].parse(path, ctx)
        except ParseError:
            return
        check_result(tool, result)

    run()


FOUND_BY_FUZZING = {
    "buddyinfo-tab-and-overflow": (
        "buddyinfo",
        b"Node 0, zone   Normal\t454 272\t104\nNode 99999999999, zone DMA 1 99999999999999999999999\n",
    ),
    "df-human-size-overflow": (
        "df",
        b"Filesystem Size Used Avail Use% Mounted on\n/dev/vda 99999999999999999999999G 17G 64G 21% /\n",
    ),
    "bpftrace-json-huge-and-string-ints": (
        "bpftrace",
        b'{"type": "map", "data": {"@x": {"a": ' + b"9" * 400 + b', "b": 5}}}\n'
        b'{"type": "hist", "data": {"@h": [{"min": 0, "max": '
        + b"9" * 30
        + b', "count": "x"}]}}\n',
    ),
}


FOUND_DIR = Path(__file__).parent / "found"  # crash artifacts of fuzzing sessions: TOOL__what.txt
FOUND_BY_FUZZING |= {
    p.stem: (p.name.split("__")[0], p.read_bytes()) for p in FOUND_DIR.glob("*__*")
}


@pytest.mark.parametrize("case", sorted(FOUND_BY_FUZZING))
def test_inputs_that_once_crashed_a_parser_now_parse(case: str, tmp_path: Path) -> None:
    tool, raw = FOUND_BY_FUZZING[case]
    path = tmp_path / "input"
    path.write_bytes(raw)
    result = PARSERS[tool].parse(path, ParseContext(file_name="input"))
    check_result(tool, result)
    if not (FOUND_DIR / f"{case}.txt").exists():  # hand-written cases keep their good lines
        assert result.coverage.parsed > 0
