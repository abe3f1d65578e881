"""The engine's byte typer (:mod:`._sysstat_swar`, behind `_sysstat.right_aligned`).

The SWAR number and clock readers are checked against the regular polars casts on random
text (they accept a narrow form and must give exactly the cast's value or refuse).
"""

from __future__ import annotations

import random
import re

import numpy as np
import polars as pl
import pytest

from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_swar


def _number_cases(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    alphabet = "0123456789 .,-xe+\t"
    out = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.4:
            v = f"{rnd.choice([0, rnd.random() * 10 ** rnd.randint(0, 13)]):.{rnd.randint(0, 3)}f}"
        elif r < 0.75:
            v = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 20)))
        else:
            v = "".join(rnd.choice("0123456789 .") for _ in range(rnd.randint(1, 20)))
        out.append(v)
    return out


@pytest.mark.parametrize("comma", [False, True])
@pytest.mark.parametrize(
    "slot", [(3, 11, 2), (5, 11, 2), (3, 9, 0), (2, 11, 2), (4, 20, 2), (10, 20, 1), (1, 23, 3)]
)
def test_numpy_numbers_are_the_regular_casts_or_refused(slot, comma) -> None:
    start, end, dec = slot
    width = 24
    cases = _number_cases(hash(slot) % 1000 + comma, 20000)
    fields, lines = [], []
    rnd = random.Random(1)
    for v in cases:
        if comma and rnd.random() < 0.5:
            v = v.replace(".", ",")
        fld = v[-(end - start) :].rjust(end - start)
        if rnd.random() < 0.1:
            fld = "x" + fld[1:]
        lines.append(("".join(rnd.choice("ab c1.") for _ in range(start)) + fld).ljust(width, "z"))
        fields.append(fld)
    m = np.frombuffer("".join(lines).encode(), np.uint8).reshape(len(lines), width).copy()
    ok, vals = _sysstat_swar.Numbers([slot], comma)(m)
    ok, vals = ok[0], vals[0]
    ref = pl.DataFrame({"x": [f[1:] for f in fields]}).select(s.number(pl.col("x"), comma=comma))
    ref = ref.to_series().to_numpy()
    point = r"[.,]" if comma else r"\."
    strict = re.compile(r" +\d+" + (point + r"\d{" + str(dec) + "}" if dec else ""))
    assert all(strict.fullmatch(f) for f in np.array(fields)[ok])  # nothing else is accepted
    assert (vals[ok] == ref[ok]).all()  # and it gets the regular path's value
    assert ok.sum() > 500


@pytest.mark.parametrize(
    "narrow", [True, (True, False, True, False, True), (False, True, True, True, False)]
)
@pytest.mark.parametrize("comma", [False, True])
def test_narrow_numbers_give_the_two_word_reading_of_every_row(comma, narrow) -> None:
    """Slots read from one word first (all, or some: `_sysstat.right_aligned` picks them
    by the first row) give what two words give, row for row."""
    slots = [(5, 16, 2), (16, 27, 2), (27, 35, 1), (35, 52, 3), (52, 57, 0)]
    width = 58
    rnd = random.Random(7)
    cases = _number_cases(11 + comma, 40000)
    lines = []
    for i in range(0, len(cases) - len(slots), len(slots)):
        row = "ab c1"
        for (start, end, dec), v in zip(slots, cases[i : i + len(slots)], strict=True):
            if rnd.random() < 0.9:  # mostly well-formed values, some of them long
                v = f"{rnd.random() * 10 ** rnd.randint(0, 10):.{dec}f}"
            v = v.replace(".", ",") if comma and rnd.random() < 0.5 else v
            row += v[-(end - start) :].rjust(end - start)
        lines.append(row.ljust(width, "z"))
    m = np.frombuffer("".join(lines).encode(), np.uint8).reshape(len(lines), width).copy()
    full = _sysstat_swar.Numbers(slots, comma)
    short = _sysstat_swar.Numbers(slots, comma, narrow=narrow)
    ok, vals = full(m)
    ok2, vals2 = short(m)
    for j in range(len(slots)):
        a, b = full.row[j], short.row[j]
        assert (ok[a] == ok2[b]).all()
        assert (vals[a][ok[a]] == vals2[b][ok2[b]]).all()
    assert (ok.sum(axis=1) > 1000).all() and (~ok).sum(axis=1).min() > 500
    assert ok.all(axis=0).sum() > 500


def test_numpy_clock_is_the_regular_clock_or_refused() -> None:
    rnd = random.Random(4)
    times = [
        f"{rnd.randint(0, 30):02d}:{rnd.randint(0, 70):02d}:{rnd.randint(0, 70):02d}"
        for _ in range(20000)
    ] + ["1x:00:00", "12-00:00", "12:00:0 "]
    m = np.frombuffer("".join(times).encode(), np.uint8).reshape(len(times), 8).copy()
    ok, sec = _sysstat_swar.clock(m)
    ref = pl.Series(times).to_frame("t").select(s.clock_seconds(pl.col("t"))).to_series()
    assert ok.sum() > 5000 and not ok[-3:].any()
    assert (sec[ok] == ref.to_numpy()[ok]).all()
