"""The kernel log against hostile bundles, through the real `analyze`: one bad line costs
only itself (an absurd stamp is skipped and counted, the Xid beside it is still found),
files are read as they are named (no globbing), memory does not grow with the file, and a
storm of OOM kills, Xid errors or hung tasks is one finding, not thousands."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import Jail
from hostile import FIX, VMSTAT, Outcome, analyze

from analyzer.parsers import _blocks, _dmesg_events, base, dmesg

# The capture: 17:00-18:10 UTC, booted at 17:00:00 (raw uptimes go on the wall clock).
MANIFEST = {
    "format_version": 1,
    "start_utc": "2026-11-29T17:00:00Z",
    "end_utc": "2026-11-29T18:10:00Z",
    "clock": {"boot_epoch_s": 1795971600.0},
}
RANGE = "timestamp out of range"
UNSTAMPED = "unstamped line in a timestamped log (not kernel output)"


def xid(bus: int) -> str:
    return f"NVRM: Xid (PCI:0000:{bus:02x}:00): 79, pid=1234, name=python3, GPU has fallen off the bus."


def bundle(jail: Jail, files: dict[str, bytes | str], name: str = "bundle") -> Path:
    d = jail.root / name
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps(MANIFEST))
    for fname, data in files.items():
        (d / fname).write_bytes(data.encode() if isinstance(data, str) else data)
    return d


def run(jail: Jail, d: Path) -> tuple[Outcome, duckdb.DuckDBPyConnection]:
    db = jail.root / f"{d.name}.duckdb"
    outcome = analyze(d, jail.root / f"{d.name}-out", "--db", str(db))
    outcome.assert_ok()
    return outcome, duckdb.connect(str(db), read_only=True)


# -- 1. one absurd stamp costs its own line -------------------------------------------------
# file -> (text with the Xid of bus N, lines parsed, skipped by reason, messages kept)
VARIANTS: dict[str, tuple[str, int, dict[str, int], list[str]]] = {
    "raw.txt": (
        "[  100.000000] eth0: link up\n[1000000000000000.000000] absurd\n"
        "[99999999999999999999.000000] overflows\n[nan] nan\n[inf] inf\n[-5.0] reltime offset\n"
        "[  101.000000] {xid}\n",
        3,
        {RANGE: 2, UNSTAMPED: 2},
        ["eth0: link up", "reltime offset", "{xid}"],
    ),
    "r.txt": (
        "<6>[  100.000000] eth0: link up\n<4>[1000000000000000.000000] absurd\n"
        "<3>[  101.000000] {xid}\n",
        2,
        {RANGE: 1},
        ["eth0: link up", "{xid}"],
    ),
    "x.txt": (
        "kern  :info  : [  100.000000] eth0: link up\n"
        "kern  :warn  : [1000000000000000.000000] absurd\nkern  :err   : [  101.000000] {xid}\n",
        2,
        {RANGE: 1},
        ["eth0: link up", "{xid}"],
    ),
    "ctime.txt": (
        "[Sun Nov 29 17:25:08 2026] eth0: link up\n[Fri Dec 31 23:59:59 9999] year 9999\n"
        "[Sat Jan  1 00:00:00 0000] year 0\n[Mon Feb 30 10:00:00 2026] feb 30\n"
        "[Sun Nov 29 25:61:61 2026] hour 25\n[Sun Nov 29 17:25:09 2026] {xid}\n",
        2,
        {RANGE: 4},
        ["eth0: link up", "{xid}"],
    ),
    "iso.txt": (
        "2026-11-29T17:25:08,000000+00:00 eth0: link up\n"
        "9999-12-31T23:59:59,999999-14:00 year 10000 in UTC\n"
        "0000-01-01T00:00:00,000000+00:00 year 0\n2026-13-01T00:00:00,000000+00:00 month 13\n"
        "2026-02-30T00:00:00,000000+00:00 feb 30\n2026-11-29T17:25:09,000000+99:99 offset\n"
        "2026-11-29T17:25:09,000000+00:00 {xid}\n",
        2,
        {RANGE: 5},
        ["eth0: link up", "{xid}"],
    ),
    "kmsg.txt": (
        "6,1,100000000,-;eth0: link up\n4,2,99999999999999999999999,-;absurd\n"
        "3,3,101000000,-;{xid}\n",
        2,
        {RANGE: 1},
        ["eth0: link up", "{xid}"],
    ),
    "journal.txt": (
        "2026-11-29T17:25:08+0000 gpu01 kernel: eth0: link up\n"
        "9999-12-31T23:59:59+0000 gpu01 kernel: year 9999\n"
        "2026-02-30T10:00:00+0000 gpu01 kernel: feb 30\n"
        "2026-11-29T17:25:09+0000 gpu01 kernel: {xid}\n",
        2,
        {RANGE: 2},
        ["eth0: link up", "{xid}"],
    ),
    "syslog.txt": (
        "Nov 29 17:25:08 gpu01 kernel: [  100.000000] eth0: link up\n"
        "Feb 30 10:00:00 gpu01 kernel: feb 30\n"
        "Nov 29 17:25:09 gpu01 kernel: [1000000000000000.000000] absurd uptime\n"
        "Nov 29 17:25:09 gpu01 kernel: {xid}\n",
        2,
        {RANGE: 2},
        ["eth0: link up", "{xid}"],
    ),
    "json.json": (
        '{{\n   "dmesg": [\n'
        '      {{\n         "pri": 6,\n         "time":   100.000000,\n         "msg": "eth0: link up"\n'
        '      }},{{\n         "pri": 4,\n         "time": 1e300,\n         "msg": "absurd"\n'
        '      }},{{\n         "pri": 4,\n         "time": -5.0,\n         "msg": "negative"\n'
        '      }},{{\n         "pri": 4,\n         "time": NaN,\n         "msg": "nan"\n'
        '      }},{{\n         "pri": 4,\n         "time": "9999-12-31T23:59:59,000000-14:00",\n'
        '         "msg": "year 10000 in UTC"\n'
        '      }},{{\n         "pri": 3,\n         "time":   101.000000,\n         "msg": "{xid}"\n'
        "      }}\n   ]\n}}\n",
        6,
        {RANGE: 12},
        ["eth0: link up", "{xid}"],
    ),
}


def test_an_absurd_stamp_is_skipped_and_the_xid_beside_it_is_found_in_every_format(
    jail: Jail,
) -> None:
    buses = {name: 0x10 + i for i, name in enumerate(VARIANTS)}
    files = {n: text.format(xid=xid(buses[n])) for n, (text, *_) in VARIANTS.items()}
    outcome, con = run(jail, bundle(jail, files))
    rows = outcome.by_file()
    found = {
        f["title"].rsplit(" on ", 1)[-1]: f
        for f in outcome.doc["findings"]
        if f["key"] == "GPU_XID"
    }
    for name, (_, parsed, skipped, messages) in VARIANTS.items():
        row = rows[name]
        assert row["tool"] == "dmesg" and row["status"] == "partial", (name, row)
        assert row["lines_parsed"] == parsed, (name, row)
        reasons = json.loads(row["skip_reasons"])
        assert {k: n for k, n in reasons.items() if k.startswith("skipped: ")} == {
            f"skipped: {k}": n for k, n in skipped.items()
        }, name
        kept = con.sql(
            "SELECT message FROM dmesg WHERE source_file = ? ORDER BY line_no", params=[name]
        ).fetchall()
        assert [m for (m,) in kept] == [m.format(xid=xid(buses[name])) for m in messages], name
        bus = f"0000:{buses[name]:02x}:00"
        assert found[bus]["severity"] == "critical", (name, sorted(found))
    assert len(found) == len(VARIANTS)
    years = con.sql("SELECT min(year(ts)), max(year(ts)) FROM dmesg").fetchall()
    assert years == [(2026, 2026)]


def test_an_absurd_blocked_time_is_not_believed(jail: Jail) -> None:
    text = "[  100.000000] INFO: task python3:42 blocked for more than 99999999999999 seconds.\n"
    outcome, con = run(jail, bundle(jail, {"dmesg.out": text}))
    assert con.sql("SELECT kind, blocked_s FROM dmesg").fetchall() == [("hung_task", None)]
    (hung,) = [f for f in outcome.doc["findings"] if f["key"] == "HUNG_TASK"]
    assert hung["title"] == "Task python3 (pid 42) blocked > 120 s"  # the default, not 3 Myears


# -- 2. a file is read as it is named ---------------------------------------------------------
def test_names_that_look_like_glob_patterns_are_read_as_named(jail: Jail) -> None:
    vm = VMSTAT.splitlines(keepends=True)
    files = {
        "dmesg*": "[  1.000000] a\n[  2.000000] b\n",
        "dmesg1": "[  1.000000] c\n[  2.000000] d\n[  3.000000] e\n",
        "x[1].log": "[  1.000000] f\n[  2.000000] g\n[  3.000000] h\n[  4.000000] i\n",
        "x1.log": "[  1.000000] j\n",
        "v?.out": b"".join(vm),  # 2 header lines and 3 rows
        "vA.out": b"".join(vm[:3]),  # what `v?.out` would also match: 1 row
    }
    outcome, con = run(jail, bundle(jail, files))
    rows = outcome.by_file()
    for name, want in {"dmesg*": 2, "dmesg1": 3, "x[1].log": 4, "x1.log": 1}.items():
        assert (rows[name]["status"], rows[name]["lines_total"]) == ("parsed", want), rows[name]
        assert rows[name]["lines_parsed"] == want
        n = con.sql("SELECT count(*) FROM dmesg WHERE source_file = ?", params=[name]).fetchall()
        assert n == [(want,)], name
    for name, total, parsed in (("v?.out", 5, 3), ("vA.out", 3, 1)):
        assert (rows[name]["tool"], rows[name]["lines_total"]) == ("vmstat", total), rows[name]
        assert rows[name]["lines_parsed"] == parsed
        n = con.sql("SELECT count(*) FROM vmstat WHERE source_file = ?", params=[name]).fetchall()
        assert n == [(parsed,)], name


# -- 3. memory does not grow with the file ----------------------------------------------------
LINE = "[ 1234.567890] mlx5_core 0000:3b:00.0: mlx5_pcie_event:301: PCIe slot advertised power.\n"


def _parse_in_blocks(
    path: Path, chunk: int, mp: pytest.MonkeyPatch
) -> tuple[list, base.ParseResult]:
    sent: list[pl.DataFrame] = []
    with mp.context() as m:
        m.setattr(_blocks, "CHUNK_BYTES", chunk)
        ctx = base.ParseContext(file_name=path.name, sink=lambda _name, f: sent.append(f))
        return sent, dmesg.parse(path, ctx)


def _json_log(n: int) -> str:
    """``n`` records: 1000 with one stamp (one long event), then 3-line OOM-like reports."""
    msgs = ("python3 invoked oom-killer: gfp_mask=0xcc0", "Call Trace:", " dump_stack+0x1/0x2")
    recs = [
        f'      {{\n         "pri": 4,\n         "time": {50 if i < 1000 else 100 + i // 7}.000000,\n'
        f'         "msg": "{"same line" if i < 1000 else msgs[i % 3]} {i}"\n      }}'
        for i in range(n)
    ]
    recs[5] = recs[5].replace('"pri": 4,', '"pri": 4,\n' + '"x": 1,\n' * 20)  # a long record
    return '{\n   "dmesg": [\n' + ",".join(recs) + "\n   ]\n}\n"


@pytest.mark.parametrize("kind", ["text", "json"])
def test_a_long_kernel_log_streams_in_blocks_with_the_one_block_result(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small bounds so that a small file has events cut by MAX_EVENT_LINES, records cut by
    # MAX_CONT_LINES, blocks that split OOM reports: the rows must not depend on the blocks.
    monkeypatch.setattr(_dmesg_events, "MAX_EVENT_LINES", 300)
    monkeypatch.setattr(dmesg, "MAX_CONT_LINES", 40)
    oom = (
        FIX / "dmesg" / "local-debian12-utillinux2.38.1-kernel6.18__memcg-oom__dmesg-raw.txt"
    ).read_text()
    long_record = "[  10.000000] first\n" + "  continued\n" * 100
    if kind == "text":
        text = LINE * 2000 + oom * 30 + long_record + LINE * 700 + "\n" + oom
        skipped = {"continuation line beyond 1000 lines of one record": 60}
    else:
        text = _json_log(3000)
        skipped = {"json record longer than 16 lines": 8, "json record without msg": 15}
    path = tmp_path / "dmesg.out"
    path.write_text(text)
    whole = dmesg.parse(path, base.ParseContext(file_name=path.name))
    want = whole.tables["dmesg"]
    assert isinstance(want, pl.DataFrame)
    assert want.group_by("event_id").len()["len"].max() <= 300
    assert whole.coverage.skipped == skipped
    for chunk in (3_000, 40_000):
        sent, res = _parse_in_blocks(path, chunk, monkeypatch)
        assert res.tables == {} and len(sent) >= 5  # streamed, block by block
        # each hand-over: at most a block's lines (>= 12 bytes each here) and the carry
        assert max(f.height for f in sent) <= chunk // 12 + 300 + 40
        got = pl.concat([dmesg.TABLES["dmesg"].conform(f).collect() for f in sent])
        assert got.equals(want, null_equal=True), chunk
        c, w = res.coverage, whole.coverage
        assert (c.total, c.parsed, c.structure, c.skipped, c.notes) == (
            w.total,
            w.parsed,
            w.structure,
            w.skipped,
            w.notes,
        )


def test_the_last_block_is_flagged_when_the_file_ends_at_a_cut(tmp_path: Path) -> None:
    path = tmp_path / "dmesg.out"
    path.write_text(LINE * 10)
    blocks = list(_blocks.Blocks(path, chunk_bytes=len(LINE)))
    assert [(b.first_line, b.n_lines, b.last) for b in blocks][-2:] == [
        (9, 1, False),
        (10, 1, True),
    ]


_PEAK = """
import resource, sys
from pathlib import Path
from analyzer.parsers import base, dmesg
n = [0]
ctx = base.ParseContext(file_name="dmesg.out", sink=lambda _t, f: n.__setitem__(0, n[0] + f.height))
res = dmesg.parse(Path(sys.argv[1]), ctx)
print(n[0], res.coverage.parsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.slow
def test_parsing_a_million_lines_takes_the_memory_of_a_few_blocks(tmp_path: Path) -> None:
    def cap_memory() -> None:  # never let the failure take the machine down with it
        resource.setrlimit(resource.RLIMIT_AS, (12 << 30, 12 << 30))

    peaks = {}
    for n in (250_000, 1_000_000):
        path = tmp_path / f"dmesg-{n}.out"
        path.write_text(LINE * n)
        r = subprocess.run(
            [sys.executable, "-c", _PEAK, str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=cap_memory,
            check=True,
        )
        rows, parsed, peak_kb = map(int, r.stdout.split())
        assert rows == parsed == n
        peaks[n] = peak_kb >> 10
        path.unlink()
    assert peaks[1_000_000] < 600, peaks  # MB; one frame of every line took ~1250 MB
    assert peaks[1_000_000] - peaks[250_000] < 80, peaks  # does not grow with the file


# -- 4. storms are one finding ----------------------------------------------------------------
def oom_kills(n: int) -> str:
    out = []
    for i in range(n):
        t, pid, comm, cg = 100 + i * 0.25, 10_000 + i, ("python3", "dataloader")[i % 2], i % 7
        out.append(
            f"[{t:12.6f}] {comm} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n"
            f"[{t:12.6f}] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
            f"oom_memcg=/pod{cg},task_memcg=/pod{cg},task={comm},pid={pid},uid=1000\n"
            f"[{t:12.6f}] Memory cgroup out of memory: Killed process {pid} ({comm}) total-vm:8546kB, "
            f"anon-rss:6528kB, file-rss:1000kB, shmem-rss:0kB, UID:1000 pgtables:100kB oom_score_adj:0\n"
        )
    return "".join(out)


def test_sixteen_thousand_oom_kills_are_one_finding_in_a_small_report(jail: Jail) -> None:
    t0 = time.monotonic()
    outcome, con = run(jail, bundle(jail, {"dmesg.out": oom_kills(16_000)}))
    elapsed = time.monotonic() - t0
    (kill,) = [f for f in outcome.doc["findings"] if f["key"] == "OOM_KILL"]
    assert kill["title"] == "16,000 OOM kills of dataloader, python3"
    assert kill["severity"] == "critical" and kill["impact"]["processes_killed"] == 16_000
    assert "top victims dataloader 8,000, python3 8,000" in kill["summary"]
    assert "/pod0 2,286" in kill["summary"] and "(2 others: 4,570)" in kill["summary"]
    assert "first python3 (pid 10000) at 17:01:40, last dataloader (pid 25999)" in kill["summary"]
    victims = {e["note"]: e["value"] for e in kill["evidence"] if e["signal"] == "victim_kills"}
    assert victims == {"dataloader": 8000.0, "python3": 8000.0}
    lines = kill["log_lines"]
    assert len(lines) == 20 and all("Killed process" in ln["text"] for ln in lines)
    assert [ln["line_no"] for ln in lines[:2]] == [3, 6] and lines[-1]["line_no"] == 48_000
    n = con.sql("SELECT count(*) FROM dmesg WHERE kind = 'oom_kill'").fetchall()
    assert n == [(16_000,)]  # every kill stays in the database
    assert outcome.report.stat().st_size <= 5 << 20
    assert elapsed < 60, elapsed  # it took 74 s with one finding per kill


def test_twenty_kills_are_twenty_findings_and_twenty_one_a_storm(jail: Jail) -> None:
    outcome, _ = run(jail, bundle(jail, {"dmesg.out": oom_kills(20)}, "twenty"))
    titles = [f["title"] for f in outcome.doc["findings"] if f["key"] == "OOM_KILL"]
    assert titles == [
        f"OOM killer killed {('python3', 'dataloader')[i % 2]} (pid {10_000 + i})"
        for i in range(20)
    ]
    outcome, _ = run(jail, bundle(jail, {"dmesg.out": oom_kills(21)}, "twenty-one"))
    titles = [f["title"] for f in outcome.doc["findings"] if f["key"] == "OOM_KILL"]
    assert titles == ["21 OOM kills of python3, dataloader"]


def test_an_xid_storm_on_eight_gpus_is_one_finding(jail: Jail) -> None:
    text = "".join(
        f"[{100 + i * 61.5:12.6f}] NVRM: Xid (PCI:0000:{0x10 + i % 8:02x}:00): "
        f"{(13, 31, 48)[i % 3]}, pid={1000 + i}, name=python3, Ch 00000008\n"
        for i in range(3000)
    )
    outcome, con = run(jail, bundle(jail, {"dmesg.out": text}))
    (x,) = [f for f in outcome.doc["findings"] if f["key"] == "GPU_XID"]
    assert x["title"] == "3,000 GPU Xid errors on 8 GPU(s), worst Xid 48 (double-bit ECC error)"
    assert x["severity"] == "critical" and x["impact"]["xid_events"] == 3000
    assert (
        "in 3,000 incident(s)" in x["summary"]
        and "per code 13 1,000, 31 1,000, 48 1,000" in x["summary"]
    )
    assert "per GPU 0000:10:00 375" in x["summary"] and "(3 others: 1,125)" in x["summary"]
    assert len(x["log_lines"]) == 20
    assert con.sql("SELECT count(*) FROM dmesg WHERE kind = 'xid'").fetchall() == [(3000,)]


def test_a_hung_task_storm_is_one_finding(jail: Jail) -> None:
    text = "".join(
        f"[{100 + i * 0.5:12.6f}] INFO: task kworker/{i % 4}:1:{2000 + i} blocked for more than "
        f"{(120, 720)[i % 2]} seconds.\n[{100 + i * 0.5:12.6f}] Call Trace:\n"
        f"[{100 + i * 0.5:12.6f}]  io_schedule+0x46/0x70\n"
        for i in range(2000)
    )
    outcome, con = run(jail, bundle(jail, {"dmesg.out": text}))
    (h,) = [f for f in outcome.doc["findings"] if f["key"] == "HUNG_TASK"]
    assert h["title"] == (
        "2,000 hung task reports of kworker/0:1, kworker/1:1, kworker/2:1 and 1 other"
        " (blocked up to > 720 s)"
    )
    assert h["severity"] == "critical" and h["impact"]["reports"] == 2000
    assert (
        "per task kworker/0:1 500, kworker/1:1 500, kworker/2:1 500, kworker/3:1 500"
        in h["summary"]
    )
    assert len(h["log_lines"]) == 20
    assert con.sql("SELECT count(*) FROM dmesg WHERE kind = 'hung_task'").fetchall() == [(2000,)]
