"""Symptom first on the real captures of the test service (samples/real/svc-*.tgz).

Each ``svc-*`` bundle is a real capture (``--app-metrics``) of samples/real/service.py
under an open-loop load, with causes injected at logged times (its ``truth.json``: per
incident ``symptom_group``, the mechanism group that should explain the latency). This
module runs the real pipeline on each and grades the symptom stage (docs/symptoms.md):

- the primary latency symptom: the ``p99`` of ``demo_request_latency_seconds``;
- per symptom window: the incidents it overlaps (an incident's span, its end widened by
  `DRAIN_S`: the queue built while the cause held drains after it), and its rank-1
  explanation: candidate, role, mechanism group, lead (``lag_s``), score;
- the neighbours' own load there: the machine's other work, outside the capture's
  namespace (truth ``background[0].series``, sampled every 2 s): CPU contention is
  theirs for real where they used ≥ `NEIGHBOURS_CPU_PCT` of a CPU (median over the
  window), disk I/O where they wrote ≥ `NEIGHBOURS_WRITE_MB_S` (peak);
- **ok** for a window that overlaps an incident with a ``symptom_group``: rank 1 is a
  ``cause`` of that group; for every window: no ``cause`` of another group, a group
  being allowed when an overlapping incident names it or the neighbours' load makes it
  real there (outside every incident only the latter).

``python -m tests.real.symptom_score`` prints the table (docs/symptoms.md "Real
captures"); ``tests/real/test_symptom_library.py`` enforces it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from library_score import LIBRARY, NEIGHBOURS_WRITE_MB_S, _foreign  # noqa: E402

#: a window starting this soon after an incident's end is still its own: the open-loop
#: backlog built while the cause held drains at full speed within ~3 s
DRAIN_S = 3.0
#: the neighbours' CPU (median, % of one CPU) that makes CPU contention theirs for real
NEIGHBOURS_CPU_PCT = 50.0
FAMILY = "demo_request_latency_seconds"


@dataclass
class WindowScore:
    bundle: str
    window_id: int
    start: float
    end: float
    level_ms: float
    peak_ms: float
    baseline_ms: float
    incidents: list[str]
    expected: list[str]  # the overlapping incidents' symptom groups
    neighbours: list[str] = field(default_factory=list)  # groups the neighbours make real
    neighbour_cpu_pct: float | None = None
    neighbour_write_mb_s: float | None = None
    rank1: str | None = None
    rank1_role: str | None = None
    rank1_group: str | None = None
    rank1_lag_s: int | None = None
    rank1_score: float | None = None
    rank1_sentence: str | None = None
    other_causes: list[str] = field(default_factory=list)  # "candidate (group)"
    ok: bool = False

    @property
    def why(self) -> str:
        if self.ok:
            return ""
        if self.other_causes:
            return "causes of another group: " + ", ".join(self.other_causes)
        return f"rank 1 is {self.rank1} ({self.rank1_role}, {self.rank1_group})"


def svc_library(directory: Path = LIBRARY) -> list[tuple[Path, dict[str, Any]]]:
    """(bundle, truth) of every svc-* bundle in ``directory``, by name."""
    out = []
    for tp in sorted(directory.glob("svc-*.truth.json")):
        truth = json.loads(tp.read_text(encoding="utf-8"))
        out.append((directory / truth["bundle"], truth))
    return out


def analyse(bundle: Path, db: Path) -> duckdb.DuckDBPyConnection:
    """The real pipeline (no report), its tables kept in ``db``; a read-only connection."""
    from analyzer import pipeline

    pipeline.run(bundle, pipeline.Options(report=None, db=db))
    return duckdb.connect(str(db), read_only=True)


def _epoch(t: datetime) -> float:
    return t.replace(tzinfo=UTC).timestamp() if t.tzinfo is None else t.timestamp()


def _has(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    q = "SELECT count(*) FROM information_schema.tables WHERE table_name = ?"
    return bool(con.sql(q, params=[table]).fetchall()[0][0])


def primary_p99(con: duckdb.DuckDBPyConnection) -> int | None:
    if not _has(con, "symptoms"):
        return None
    row = con.sql(
        f"""SELECT symptom_id FROM symptoms WHERE is_primary AND kind = 'latency'
        AND stat = 'p99' AND family = '{FAMILY}' ORDER BY symptom_id LIMIT 1"""
    ).fetchall()
    return int(row[0][0]) if row else None


def score(name: str, truth: dict[str, Any], con: duckdb.DuckDBPyConnection) -> list[WindowScore]:
    """Every window of the primary p99 symptom, graded (module docstring)."""
    sid = primary_p99(con)
    if sid is None or not _has(con, "symptom_windows"):  # no window: the table is not written
        return []
    wins = con.sql(
        "SELECT window_id, start_ts, end_ts, level, peak, baseline FROM symptom_windows "
        "WHERE symptom_id = ? ORDER BY start_ts",
        params=[sid],
    ).fetchall()
    out = []
    for wid, s, e, level, peak, base in wins:
        a, z = _epoch(s), _epoch(e)
        incs = [
            i for i in truth["incidents"] if a < float(i["end"]) + DRAIN_S and z > float(i["start"])
        ]
        expected = sorted({i["symptom_group"] for i in incs if i.get("symptom_group")})
        w = WindowScore(name, wid, a, z, level, peak, base, [i["id"] for i in incs], expected)
        w.neighbour_cpu_pct = _foreign(truth, "foreign_cpu_pct_of_one_cpu", a - 1, z + 1, "median")
        w.neighbour_write_mb_s = _foreign(truth, "foreign_write_mb_s", a - 1, z + 1, "max")
        if (w.neighbour_cpu_pct or 0) >= NEIGHBOURS_CPU_PCT:
            w.neighbours.append("cpu_contention")
        if (w.neighbour_write_mb_s or 0) >= NEIGHBOURS_WRITE_MB_S:
            w.neighbours.append("io")
        rows = con.sql(
            "SELECT rank, candidate, role, mechanism_group, lag_s, score, sentence "
            "FROM symptom_explanations WHERE window_id = ? ORDER BY rank",
            params=[wid],
        ).fetchall()
        if rows:
            _, w.rank1, w.rank1_role, w.rank1_group, w.rank1_lag_s, sc, w.rank1_sentence = rows[0]
            w.rank1_score = None if sc is None else round(float(sc), 3)
        allowed = {*expected, *w.neighbours}
        w.other_causes = [
            f"{c} ({g})" for _, c, role, g, *_ in rows if role == "cause" and g not in allowed
        ]
        top_ok = not expected or (w.rank1_role == "cause" and w.rank1_group in expected)
        w.ok = top_ok and not w.other_causes
        out.append(w)
    return out


def score_all(tmp: Path, directory: Path = LIBRARY) -> list[WindowScore]:
    out = []
    for bundle, truth in svc_library(directory):
        con = analyse(bundle, tmp / f"{truth['scenario']}.duckdb")
        try:
            out += score(truth["scenario"], truth, con)
        finally:
            con.close()
    return out


def _n(x: float | None) -> str:
    return "–" if x is None else f"{x:.0f}"


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def table(scores: list[WindowScore], truths: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| bundle | window (UTC), offset | P99 level / peak (baseline) | injected cause "
        "| neighbours (CPU, writes) | rank-1 candidate (role, group) | lead | score | ok |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for w in scores:
        cs = truths[w.bundle]["made_with"]["capture_start_epoch"]
        inc = ", ".join(f"{i} ({'/'.join(w.expected) or '–'})" for i in w.incidents) or "none"
        lines.append(
            f"| {w.bundle} | {_clock(w.start)}–{_clock(w.end)}, +{w.start - cs:.0f}..+"
            f"{w.end - cs:.0f} s | {w.level_ms:.0f} / {w.peak_ms:.0f} ms ({w.baseline_ms:.1f}) "
            f"| {inc} | {_n(w.neighbour_cpu_pct)} %, {_n(w.neighbour_write_mb_s)} MB/s | "
            f"{w.rank1} ({w.rank1_role}, {w.rank1_group or '–'}) | "
            f"{'–' if w.rank1_lag_s is None else f'{w.rank1_lag_s} s'} | "
            f"{'–' if w.rank1_score is None else f'{w.rank1_score:.2f}'} | "
            f"{'yes' if w.ok else '**no**: ' + w.why} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.real.symptom_score", description=__doc__)
    p.add_argument("--sentences", action="store_true", help="print each rank-1 sentence")
    p.add_argument("--dir", type=Path, default=LIBRARY, help="where the bundles are")
    args = p.parse_args(argv)
    truths = {t["scenario"]: t for _, t in svc_library(args.dir)}
    with tempfile.TemporaryDirectory() as tmp:
        scores = score_all(Path(tmp), args.dir)
    print(table(scores, truths))
    if args.sentences:
        for w in scores:
            print(f"\n{w.bundle} window {w.window_id}: {w.rank1_sentence}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
