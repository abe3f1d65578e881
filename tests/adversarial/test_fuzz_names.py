"""Member names are names (hypothesis, through the real `analyze`).

Names are drawn from SQL metacharacters and statements aimed at sentinel files, quotes,
glob characters, bytes that are not UTF-8, control and bidirectional characters. For
every one: `analyze` exits 0; the member is parsed (its rows are in the store under its
display name) or refused by that same name with a reason; the good member beside it is
always parsed; no sentinel file appears anywhere (the `jail` fixture also checks that
nothing named after the token exists, and that no scratch file is left).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

from conftest import Jail
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from analyzer.bundle import safe_member_name
from analyzer.cli import app
from analyzer.names import display_name

VMSTAT = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "vmstat"
    / "local-debian12-procps4.0.2__vmstat-t-1-3.txt"
).read_bytes()
EXAMPLES = int(os.environ.get("HINDSIGHT_FUZZ_NAME_EXAMPLES", "25"))
TOKEN = "sentinel-fuzzname"

PIECES = [
    b"'", b'"', b"`", b";", b"--", b"/*", b"*/", b"(", b")", b",", b" ", b"=", b"%", b"_",
    b"' OR '1'='1", b"'; DROP TABLE collectors; --",
    f"'; COPY (SELECT 1) TO '{TOKEN}-copy.csv'; --".encode(),
    f"' UNION ALL SELECT content FROM read_text('{TOKEN}') --".encode(),
    f"'); ATTACH '{TOKEN}.duckdb' AS x; --".encode(),
    b"$1", b"?", b"*", b"[", b"]", b"[1]", b"{a,b}", b"~", b"\\",
    b"\x80", b"\xff", b"\xc3\x28", b"\xed\xa0\x80",  # invalid UTF-8
    b"\x1b[2J", b"\n", b"\r", b"\t", b"\x07", b"\x7f",
    "\u202e".encode(), "\u2066".encode(), "\u200b".encode(), "\ufeff".encode(),
    "é".encode(), "中文".encode(), b"vmstat", b".out", b".log",
]  # fmt: skip
NAMES = (
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=6)
    .map(b"".join)
    .filter(lambda n: n not in (b".", b"..") and len(n) <= 200)
)


def _tgz(path: Path, raw_name: bytes) -> None:
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape"
    ) as tar:
        for name in (b"b/" + raw_name, b"b/good.out"):
            info = tarfile.TarInfo(name.decode("utf-8", "surrogateescape"))
            info.size = len(VMSTAT)
            tar.addfile(info, io.BytesIO(VMSTAT))
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=NAMES)
def test_any_member_name_is_parsed_or_refused_by_its_own_name(jail: Jail, raw: bytes) -> None:
    bundle, out = jail.root / "b.tgz", jail.root / "out"
    out.mkdir(exist_ok=True)
    _tgz(bundle, raw)
    js = out / "r.json"
    js.unlink(missing_ok=True)
    r = CliRunner().invoke(
        app, ["analyze", str(bundle), "-q", "-o", str(out / "r.html"), "--json", str(js)]
    )
    assert r.exit_code == 0, (raw, r.output)
    doc = json.loads(js.read_text(encoding="utf-8"))
    rows = {c["file"]: c for c in doc["collectors"]}
    assert rows["good.out"]["status"] == "parsed" and rows["good.out"]["lines_parsed"] == 3
    member = "b/" + raw.decode("utf-8", "surrogateescape")
    rel, why = safe_member_name(member)  # '/' makes directories; a backslash is refused
    name = display_name(rel.removeprefix("b/"))
    if why:
        refused = [c for c in doc["collectors"] if c["status"] == "refused"]
        assert [(c["file"], c["reason"]) for c in refused] == [(display_name(member), why)]
    else:
        assert rows[name]["status"] == "parsed" and rows[name]["lines_parsed"] == 3, (name, rows)
        assert doc["tables"]["vmstat"] == 6
    for top in (jail.root, jail.cwd, Path("/tmp")):
        assert not [p for p in os.listdir(top) if TOKEN in p], raw
