"""Values are parameters: no SQL in analyzer/ or reports/ is built from data (tests/sqlcheck.py).

The check reads the code, it does not run it: every SQL-like f-string, ``%``, ``+`` or
``.format`` is judged part by part. These tests show that it passes on the codebase and
that it fails on the mistakes it exists for.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from sqlcheck import REVIEWED, check

REPO = Path(__file__).resolve().parents[1]


def _codebase() -> dict[str, str]:
    return {
        p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8")
        for top in ("analyzer", "reports")
        for p in sorted((REPO / top).rglob("*.py"))
    }


def _flagged(code: str, path: str = "analyzer/detectors/example.py") -> list[str]:
    return [v.part for v in check({path: textwrap.dedent(code)})]


def test_no_sql_in_the_codebase_is_built_from_data() -> None:
    found = check(_codebase())
    assert not found, "\n".join(map(str, found))


def test_a_deliberate_fstring_query_with_a_bundle_value_fails_the_check() -> None:
    # What the detectors used to do: a dmesg file name pasted into the WHERE clause.
    code = """
    def log_lines(ctx, row):
        return ctx.query(f"SELECT * FROM dmesg WHERE source_file = '{row['source_file']}'")
    """
    assert _flagged(code) == ["row['source_file']"]
    # The same inserted into the real codebase is caught there too.
    files = _codebase()
    files["analyzer/detectors/oom_kill.py"] += textwrap.dedent(code)
    assert [v.part for v in check(files)] == ["row['source_file']"]


@pytest.mark.parametrize(
    "code, part",
    [
        # %-formatting and concatenation are the same mistake
        ("def f(con, name):\n    con.sql('DELETE FROM t WHERE f = %s' % name)\n", "name"),
        ("def f(con, x):\n    con.sql(\"SELECT * FROM t WHERE a = '\" + x.dev + \"'\")\n", "x.dev"),
        ("def f(con, x):\n    con.sql('SELECT {} FROM t'.format(x))\n", "x"),
        # a timestamp is a value too: bind it
        ("def f(con, w):\n    con.sql(f\"SELECT 1 FROM t WHERE ts >= '{w[0].isoformat()}'\")\n", "w[0].isoformat()"),
        # a fragment without keywords, assigned to an SQL-ish name, then used
        ("def f(con, dev):\n    cond = f'device = {dev!r}'\n    con.sql(f'SELECT 1 FROM t WHERE {cond}')\n", "dev"),
        # passed as a where= fragment
        ("def f(store, cg):\n    store.frame('t', ['a'], where=f\"cgroup = '{cg}'\")\n", "cg"),
        # appended into a list that becomes SQL
        ("def f(con, rows):\n    parts = []\n    for r in rows:\n        parts.append(f'SELECT {r.name}')\n    con.sql(' UNION ALL '.join(parts) + ' FROM x')\n", "' UNION ALL '.join(parts)"),
        # str() of a value is still the value
        ("def f(con, pid):\n    con.sql(f'SELECT * FROM pidstat WHERE pid = {str(pid)}')\n", "str(pid)"),
    ],
)  # fmt: skip
def test_each_way_of_pasting_data_is_caught(code: str, part: str) -> None:
    assert part in _flagged(code)


def test_parameters_identifiers_and_constants_pass() -> None:
    code = """
    from analyzer.sql import ident

    COLUMNS = ("cpu_pct", "wait_pct")
    LIMIT = 5

    def top(con, table, w, n=3):
        cols = ", ".join(f"avg({ident(c)}) AS {ident(c)}" for c in COLUMNS)
        sql = f"SELECT pid, {cols} FROM {ident(table)} WHERE ts >= $lo LIMIT {int(n)} OFFSET {LIMIT}"
        return con.sql(sql, params={"lo": w[0]})
    """
    assert _flagged(code) == []


def test_a_parameter_is_accepted_only_when_every_caller_passes_a_safe_argument() -> None:
    code = """
    def _p99(pattern):
        return f"SELECT * FROM bpf_hist WHERE source_file ILIKE '{pattern}'"

    def a(con):
        return con.sql(_p99('%runqlat%'))

    def b(con, row):
        return con.sql(_p99(row['file']))
    """
    assert _flagged(code) == ["pattern"]
    assert _flagged(code.replace("_p99(row['file'])", "_p99('%biolat%')")) == []


def test_every_reviewed_fragment_still_exists() -> None:
    files = _codebase()
    for (path, func, name), why in REVIEWED.items():
        assert why, (path, func, name)
        tree = ast.parse(files[path])
        defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func]
        names = {a.arg for d in defs for a in [*d.args.args, *d.args.kwonlyargs]}
        names |= {n.id for d in defs for n in ast.walk(d) if isinstance(n, ast.Name)}
        assert name in names, f"REVIEWED entry {path}:{func}: {name} no longer exists"
