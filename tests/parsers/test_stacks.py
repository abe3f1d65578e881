"""Tests of analyzer/parsers/stacks.py (fixture: tests/fixtures/stacks, a real capture).

Golden values are read from the file by hand. The edge cases below are written in the
forms bpftrace 0.17 prints (seen in the fixture): keys without a user stack (``, , ``),
without any stack, the exit dump, a key cut off by the end of the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from blockwise import assert_same_as_one_block
from golden import check

from analyzer.parsers import bpftrace, stacks
from analyzer.parsers.base import ParseContext, ParseResult
from analyzer.sniff import MIN_CONFIDENCE

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "stacks"
GOLDEN = sorted(FIX.glob("*.expected.json"))


def _parse(path: Path) -> ParseResult:
    res = stacks.parse(path, ParseContext(file_name=path.name))
    res.coverage.check()
    return res


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_fixture_matches_its_expected_rows_coverage_and_values(golden: Path) -> None:
    path = golden.with_name(golden.name.removesuffix(".expected.json") + ".out")
    head = path.read_text()[:65536]
    assert stacks.sniff(head, path.name) >= MIN_CONFIDENCE
    assert stacks.sniff(head, path.name) > bpftrace.sniff(head, path.name)
    check(_parse(path), golden)


SMALL = (
    "Attaching 4 probes...\n"
    "hindsight stacks: on-CPU stacks at 49 Hz per CPU, top 200 every 10 s\n"
    "2026-12-02T04:13:33Z\n"
    "2026-12-02T04:13:43Z\n"
    "@samples: 12\n"
    "@stacks[kworker/0:1, 32283, , \n"
    "\tffffffff8225a101 do_syscall_64+113\n"
    "]: 1\n"
    "@stacks[idle thing, 7, , ]: 2\n"
    "@stacks[a;b, 9, \n"
    "\t563f02d7d159 hot_c_inner+32 (/tmp/hot_c)\n"
    "\t563f02d7d194 main+14 (/tmp/hot_c)\n"
    ", ]: 3\n"
    "@stacks[a;b, 9, \n"
    "\t563f02d7d15c hot_c_inner+35 (/tmp/hot_c)\n"
    "\t563f02d7d194 main+14 (/tmp/hot_c)\n"
    ", ]: 4\n"
    "\n"
    "@samples: 0\n"
)


def test_keys_fold_offsets_away_and_every_form_is_read(tmp_path: Path) -> None:
    p = tmp_path / "bpf_stacks.out"
    p.write_text(SMALL)
    res = _parse(p)
    rows = {(r["comm"], r["stack"]): r for r in res.tables["stack_samples"].to_dicts()}
    assert rows[("a;b", "main;hot_c_inner")]["samples"] == 7  # two keys, offsets differ
    assert rows[("kworker/0:1", "do_syscall_64_[k]")]["kernel_frames"] == 1
    assert rows[("idle thing", "[no stack]")]["samples"] == 2
    (sl,) = res.tables["stack_slices"].to_dicts()
    assert (sl["samples"], sl["samples_shown"], sl["stacks_shown"], sl["interval_s"]) == (
        12, 10, 4, 10.0,
    )  # fmt: skip
    assert res.coverage.structure["exit dump of the cleared maps"] == 1
    assert not res.coverage.skipped


def test_a_key_cut_off_at_the_end_is_skipped_with_its_reason(tmp_path: Path) -> None:
    p = tmp_path / "bpf_stacks.out"
    p.write_text(SMALL.split("@stacks[a;b")[0] + "@stacks[x, 1, \n\t1 f+1 (/bin/x)\n")
    res = _parse(p)
    assert res.coverage.skipped == {"stack key cut short at the end of the file": 2}
    assert res.tables["stack_samples"].height == 2


def test_keys_before_any_time_line_are_one_untimed_slice(tmp_path: Path) -> None:
    """A hand-cut paste that starts at the keys (no banner, time line or @samples): its
    rows are kept in a slice without time, said in the notes, not a crash."""
    p = tmp_path / "bpf_stacks.out"
    p.write_text(SMALL[SMALL.index("@stacks[") :].replace("\n@samples: 0\n", ""))
    res = _parse(p)
    assert res.tables["stack_samples"]["samples"].sum() == 10
    (sl,) = res.tables["stack_slices"].to_dicts()
    assert (sl["ts"], sl["samples_shown"], sl["stacks_shown"]) == (None, 10, 4)
    assert "1 slice(s) printed without a time line: ts NULL" in res.coverage.notes
    assert not res.coverage.skipped


def test_garbage_lines_are_counted_not_lost(tmp_path: Path) -> None:
    p = tmp_path / "bpf_stacks.out"
    p.write_text(SMALL.replace("@samples: 0\n", "") + "hello\n\tstray 0x1 ([unknown])\n")
    res = _parse(p)
    assert res.coverage.skipped == {"unrecognised line": 1, "stack frame outside a map key": 1}


@pytest.mark.parametrize(
    ("printed", "kernel", "want"),
    [
        ("hot_c_inner+32 (/tmp/stk/hot_c)", False, "hot_c_inner"),
        ("0x958cc0 ([unknown])", False, "[unknown]"),
        ("0x5fcd9c (/usr/bin/python3.11)", False, "[python3.11]"),
        ("do_syscall_64+113", True, "do_syscall_64_[k]"),
        ("std::a<int>::b(x;y)+4 (/lib/libc++.so)", False, "std::a<int>::b(x:y)"),
    ],
)
def test_frame_names(printed: str, kernel: bool, want: str) -> None:
    assert stacks.frame_name(printed, kernel) == want


PERF = (
    "hindsight stacks (perf): on-CPU stacks at 49 Hz per CPU, top 200 every 10 s\n"
    "2026-12-02T05:01:22Z\n"
    "2026-12-02T05:01:32Z\n"
    "@samples: 20\n"
    "hot_c-25343;__libc_start_call_main;hot_c_inner 9\n"
    "hs-svc-2-31741;[unknown];clock_gettime;entry_SYSCALL_64_[k];do_syscall_64_[k] 4\n"
    "kworker/0:1-events-12;ret_from_fork_[k];kthread_[k] 2\n"
    "odd name-7 1\n"
    "hot_c-25343;__libc_start_call_main;hot_c_inner 1\n"
    "2026-12-02T05:01:43Z\n"
    "@samples: 0\n"
)


def test_the_perf_fallback_folded_form_lands_in_the_same_tables(tmp_path: Path) -> None:
    p = tmp_path / "perf_stacks.out"
    p.write_text(PERF)
    res = _parse(p)
    assert res.meta["format"] == "perf folded"
    rows = {(r["comm"], r["pid"]): r for r in res.tables["stack_samples"].to_dicts()}
    hot = rows[("hot_c", 25343)]
    assert (hot["samples"], hot["leaf"], hot["user_frames"], hot["kernel_frames"]) == (
        10, "hot_c_inner", 2, 0,
    )  # fmt: skip
    svc = rows[("hs-svc-2", 31741)]  # a comm with "-N" in it
    assert (svc["user_frames"], svc["kernel_frames"], svc["leaf"]) == (2, 2, "do_syscall_64_[k]")
    assert rows[("kworker/0:1-events", 12)]["stack"] == "ret_from_fork_[k];kthread_[k]"
    assert rows[("odd name", 7)]["stack"] == "[no stack]"
    sl = res.tables["stack_slices"].to_dicts()
    assert [(s["samples"], s["samples_shown"], s["stacks_shown"], s["interval_s"]) for s in sl] == [
        (20, 17, 5, 10.0),
        (0, 0, 0, 11.0),
    ]
    assert res.coverage.parsed == 7 and not res.coverage.skipped


def test_folded_lines_without_the_banner_are_sniffed(tmp_path: Path) -> None:
    body = "".join(ln + "\n" for ln in PERF.splitlines()[4:9])
    assert stacks.sniff(body, "out.folded") >= MIN_CONFIDENCE
    assert stacks.sniff("hello-1;x 2\nplain text\nmore text\nand more\n", "x.txt") == 0.0


@pytest.mark.parametrize("chunk", [200, 3000])
def test_blocks_of_any_size_give_the_one_block_result(
    chunk: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks end before a time line: keys, slices and the clock must not depend on them.
    fixture = sorted(FIX.glob("*bpftrace*.out"))[0].read_text()
    for name, text in {"small": SMALL, "perf": PERF, "fixture": fixture}.items():
        p = tmp_path / f"{name}.out"
        p.write_text(text + SMALL.replace("@samples: 0\n", "2026-12-02T04:14:03Z\n") * 3)
        assert_same_as_one_block(stacks, p, (chunk,), monkeypatch)
