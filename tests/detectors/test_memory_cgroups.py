"""memory_pressure per memory cgroup, host reclaim from every /proc/vmstat key, and the
memcg facts of oom_kill: tiny inputs in, findings out."""

from __future__ import annotations

import polars as pl
from detector_data import above_info, between, context, run, series, store_with, t

from analyzer import correlate
from analyzer.detectors import _memcg, memory_pressure, oom_kill

N = 200
MIB = 2**20
CG = "/job"


def _cg(hits_per_s: float, span=(50, 110), limit_mb: int = 256, v2: bool = False, **extra):
    """A cgroup whose usage sits at its limit in ``span`` while its limit-hit counter
    (v1 failcnt, or v2 memory.events max) climbs ``hits_per_s``."""
    a, z = span

    def count(i: int) -> float:
        return hits_per_s * (min(i, z - 1) - a + 1) if i >= a else 0.0

    usage = lambda i: (limit_mb - 1) * MIB if between(i, [span]) else 10 * MIB  # noqa: E731
    key = "events_max" if v2 else "failcnt"
    cols = {key: count, "current_bytes": usage, **extra}
    if v2:
        cols["max_bytes"] = limit_mb * MIB
    return series(N, cgroup=CG, **cols)


def _stat(refault_per_s: float, span=(50, 110), limit_mb: int = 256) -> pl.DataFrame:
    """v1 memory.stat: the hierarchical limit, page cache and file refaults climbing."""
    a, z = span

    def refaults(i: int) -> float:
        return refault_per_s * (min(i, z - 1) - a + 1) if i >= a else 0.0

    rows = [
        series(N, cgroup=CG, file="memory.stat", key="hierarchical_memory_limit", value=limit_mb * MIB),
        series(N, cgroup=CG, file="memory.stat", key="cache", value=(limit_mb - 16) * MIB),
        series(N, cgroup=CG, file="memory.stat", key="workingset_refault_file", value=refaults),
    ]  # fmt: skip
    return pl.concat([r.with_columns(pl.col("value").cast(pl.Int64)) for r in rows])


def _dmesg_kill(at: int, memcg: str = "/job/") -> pl.DataFrame:
    row = {"ts": t(at), "kind": "oom_kill", "event_id": 1, "line_no": 11, "pid": 4242, "comm": "python",
           "uid": 0, "memcg": memcg, "oom_constraint": "CONSTRAINT_MEMCG", "anon_rss_kb": 250_000,
           "file_rss_kb": 0, "shmem_rss_kb": 0, "total_vm_kb": 300_000,
           "message": "Memory cgroup out of memory: Killed process 4242 (python)"}  # fmt: skip
    return pl.DataFrame([row]).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))


def _vmstat(**rates) -> pl.DataFrame:
    """/proc/vmstat rows: each key a counter rising at its rate (a constant or f(i))."""
    frames = []
    for key, rate in rates.items():
        f = rate if callable(rate) else (lambda i, v=rate: v)
        frames.append(
            series(
                N,
                key=key,
                value=lambda i, f=f: int(sum(f(j) for j in range(i + 1))),
                rate_per_s=lambda i, f=f: float(f(i)) if i else None,
                counter=True,
            )
        )
    return pl.concat(frames)


def test_a_v1_cgroup_pinned_at_its_limit_with_refaults_is_pressure_naming_it_and_its_limit() -> (
    None
):
    got = above_info(
        run(memory_pressure, n=N, cgroup_memory=_cg(1000.0), cgroup_memory_stat=_stat(5000.0))
    )
    assert len(got) == 1
    f = got[0]
    assert (f.start, f.end) == (t(50), t(110))
    assert f.severity == "minor"
    assert f.impact["cgroup"] == CG and f.impact["limit_mb"] == 256
    assert f.impact["limit_hits"] == 60_000 and f.impact["refault_per_s"] == 5000
    assert f.impact["reread_from_disk_mb"] == round(60 * 5000 * 4096 / MIB)
    assert "256 MiB" in f.title and "/job" in f.summary


def test_limit_hits_just_below_the_threshold_give_nothing() -> None:
    got = run(memory_pressure, n=N, cgroup_memory=_cg(9.0), cgroup_memory_stat=_stat(0.0))
    assert got == []


def test_a_cgroup_reclaiming_cache_nobody_reads_again_is_only_info() -> None:
    got = run(memory_pressure, n=N, cgroup_memory=_cg(500.0), cgroup_memory_stat=_stat(0.0))
    assert isinstance(got, list) and [f.severity for f in got] == ["info"]


def test_v2_memory_events_max_with_the_limit_from_memory_max_is_a_finding() -> None:
    got = above_info(
        run(memory_pressure, n=N, cgroup_memory=_cg(50.0, v2=True, limit_mb=900),
            cgroup_memory_stat=_stat(2000.0, limit_mb=900).filter(pl.col("key") != "hierarchical_memory_limit"))
    )  # fmt: skip
    assert [(f.impact["cgroup"], f.impact["limit_mb"]) for f in got] == [(CG, 900)]


def test_the_limit_comes_from_the_limits_snapshot_when_not_sampled() -> None:
    snap = pl.DataFrame(
        {
            "snapshot": ["start"],
            "source": ["cgroup_limits"],
            "key": ["cgroup.job.memory.max_bytes"],
            "value": ["536870912"],
            "raw": ["/sys/fs/cgroup/memory/job/memory.limit_in_bytes 536870912"],
        }
    )
    store = store_with(n=N, cgroup_memory=_cg(1000.0), host_config=snap)
    got = memory_pressure.detect(context(store, n=N))
    store.close()
    assert isinstance(got, list) and [f.impact.get("limit_mb") for f in got] == [512]


def test_pressure_ending_in_an_oom_kill_is_major_and_the_chain_starts_where_the_limit_was_hit() -> (
    None
):
    inputs = {"cgroup_memory": _cg(1000.0), "cgroup_memory_stat": _stat(5000.0),
              "dmesg": _dmesg_kill(110)}  # fmt: skip
    mp = above_info(run(memory_pressure, n=N, **inputs))
    kills = run(oom_kill, n=N, **inputs)
    assert isinstance(kills, list) and len(kills) == 1
    assert [f.severity for f in mp] == ["major"] and kills[0].impact["memcg"] == CG
    chains = correlate.correlate([*mp, *kills])
    assert len(chains) == 1 and chains[0].start == t(50)
    assert any("memory cgroup /job" in m for m in chains[0].mechanisms)


def test_the_oom_kill_names_the_cgroup_limit_and_when_it_was_first_hit() -> None:
    inputs = {"cgroup_memory": _cg(1000.0, span=(80, 110)), "cgroup_memory_stat": _stat(0.0),
              "dmesg": _dmesg_kill(109)}  # fmt: skip
    kills = run(oom_kill, n=N, **inputs)
    assert isinstance(kills, list) and len(kills) == 1
    ev = {e.signal: e for e in kills[0].evidence}
    assert ev["memcg_limit"].value == 256
    assert (
        ev["memcg_limit_hits"].value == 30_000
        and "-29 s from the kill" in ev["memcg_limit_hits"].note
    )


def test_pressure_in_another_cgroup_does_not_claim_the_kill() -> None:
    inputs = {"cgroup_memory": _cg(1000.0), "cgroup_memory_stat": _stat(5000.0),
              "dmesg": _dmesg_kill(110, memcg="/other")}  # fmt: skip
    mp = above_info(run(memory_pressure, n=N, **inputs))
    kills = run(oom_kill, n=N, **inputs)
    assert isinstance(kills, list)
    assert [f.severity for f in mp] == ["minor"]
    assert len(correlate.correlate([*mp, *kills])) == 2


def _psi(source: str, some) -> pl.DataFrame:
    return pl.concat([
        series(N, source=source, resource="memory", kind="some", avg10_pct=0.0, stall_pct=some),
        series(N, source=source, resource="memory", kind="full", avg10_pct=0.0, stall_pct=0.0),
    ])  # fmt: skip


def test_the_cgroups_own_memory_pressure_file_is_enough() -> None:
    cg = series(N, cgroup=CG, current_bytes=10 * MIB, max_bytes=256 * MIB)
    psi = _psi("/sys/fs/cgroup/job", lambda i: 30.0 if 60 <= i < 90 else 0.0)
    got = above_info(run(memory_pressure, n=N, cgroup_memory=cg, psi=psi))
    assert [(f.impact["cgroup"], f.start, f.end) for f in got] == [(CG, t(60), t(90))]
    assert got[0].impact["stall_some_pct"] == 30.0


def test_host_psi_without_global_reclaim_is_folded_into_the_cgroup_at_its_limit() -> None:
    psi = _psi("system", lambda i: 15.0 if 70 <= i < 100 else 0.0)
    got = above_info(
        run(memory_pressure, n=N, cgroup_memory=_cg(1000.0), cgroup_memory_stat=_stat(5000.0), psi=psi)
    )  # fmt: skip
    assert [(f.impact.get("cgroup"), f.start, f.end) for f in got] == [(CG, t(50), t(110))]
    assert any(e.signal == "psi_mem_some_pct" and e.value == 7.5 for e in got[0].evidence)


def test_host_reclaim_absorbs_the_cgroups_at_their_limits_and_stays_host_wide() -> None:
    psi = _psi("system", lambda i: 30.0 if 40 <= i < 120 else 0.0)
    vm = _vmstat(pgscan_direct=lambda i: 50_000 if 40 <= i < 120 else 0, pgscan_kswapd=0,
                 pgscan_anon=0, pgscan_file=lambda i: 50_000 if 40 <= i < 120 else 0)  # fmt: skip
    got = above_info(run(memory_pressure, n=N, cgroup_memory=_cg(1000.0), psi=psi, proc_vmstat=vm))
    assert len(got) == 1
    f = got[0]
    assert "cgroup" not in f.impact and f.impact["cgroups_at_limit"] == [CG]
    assert (f.start, f.end) == (t(40), t(120))


def test_cgroup_limit_reclaim_counts_in_pgscan_per_s_and_in_the_evidence() -> None:
    vm = _vmstat(pgscan_kswapd=0, pgscan_direct=0, pgsteal_kswapd=0, pgsteal_direct=0,
                 pgscan_anon=0, pgsteal_anon=0,
                 pgscan_file=lambda i: 400_000 if 50 <= i < 110 else 0,
                 pgsteal_file=lambda i: 400_000 if 50 <= i < 110 else 0)  # fmt: skip
    store = store_with(n=N, proc_vmstat=vm, cgroup_memory=_cg(1000.0))
    ctx = context(store, n=N)
    got = memory_pressure.detect(ctx)
    store.close()
    sig = ctx.signals.filter(pl.col("ts") == t(80))
    assert sig["pgscan_per_s"][0] == 400_000 and sig["pgscan_kswapd_per_s"][0] == 0
    assert sig["pgscan_direct_per_s"][0] == 0 and sig["pgsteal_per_s"][0] == 400_000
    assert isinstance(got, list) and len(got) == 1
    ev = {e.signal: e for e in got[0].evidence}
    assert ev["pgscan_all_keys"].value == 400_000 and "file 24 M" in ev["pgscan_all_keys"].note
    assert ev["pgsteal_cgroup_limit"].value == 400_000


def test_kswapd_reclaiming_while_memavailable_is_low_is_host_pressure_and_not_when_high() -> None:
    def inputs(avail_kb: int) -> dict:
        mem = pl.concat([
            series(N, key="MemTotal", value_kb=24_000_000),
            series(N, key="MemAvailable", value_kb=lambda i: avail_kb if 60 <= i < 100 else 20_000_000),
        ])  # fmt: skip
        vm = _vmstat(pgscan_kswapd=lambda i: 200_000 if 60 <= i < 100 else 0, pgscan_direct=0)
        return {"meminfo": mem, "proc_vmstat": vm}

    low = above_info(run(memory_pressure, n=N, **inputs(2_400_000)))
    assert [(f.start, f.end, "cgroup" in f.impact) for f in low] == [(t(60), t(100), False)]
    assert (
        "kswapd 200,000" in low[0].summary and "(10% of MemTotal; ≤ 15% for 40 s)" in low[0].summary
    )
    # a third of RAM still available (or a full page cache streamed through): not pressure
    assert above_info(run(memory_pressure, n=N, **inputs(8_000_000))) == []


def test_a_window_lasts_while_memavailable_stays_low_but_low_memory_alone_opens_none() -> None:
    mem = pl.concat([
        series(N, key="MemTotal", value_kb=24_000_000),
        series(N, key="MemAvailable", value_kb=lambda i: 2_000_000 if 60 <= i < 130 else 20_000_000),
    ])  # fmt: skip
    vm = _vmstat(pgscan_kswapd=lambda i: 200_000 if 60 <= i < 70 else 0, pgscan_direct=0)
    got = above_info(run(memory_pressure, n=N, meminfo=mem, proc_vmstat=vm))
    assert [(f.start, f.end) for f in got] == [(t(60), t(130))]
    assert (
        above_info(run(memory_pressure, n=N, meminfo=mem, proc_vmstat=_vmstat(pgscan_kswapd=0)))
        == []
    )


def test_cgroup_paths_are_spelled_like_the_kernel_log() -> None:
    assert [_memcg.cgroup_path(x) for x in ("/a/b/", "a", "/", "")] == ["/a/b", "/a", "/", "/"]


def test_swapping_names_the_cgroup_whose_swap_grew_and_its_limit() -> None:
    from analyzer.detectors import swap_activity

    vm = series(
        N, si_kb_s=0.0, so_kb_s=lambda i: 50_000.0 if 50 <= i < 60 else 0.0, since_boot=False
    )
    swap = lambda i: int(min(max(i - 49, 0), 10) * 50 * MIB)  # noqa: E731  (500 MiB by 60)
    stat = pl.concat([
        series(N, cgroup=CG, file="memory.stat", key="swap", value=swap),
        series(N, cgroup=CG, file="memory.stat", key="hierarchical_memory_limit", value=256 * MIB),
        series(N, cgroup="/idle", file="memory.stat", key="swap", value=0),
    ]).with_columns(pl.col("value").cast(pl.Int64))  # fmt: skip
    cgm = pl.concat([series(N, cgroup=c, current_bytes=255 * MIB) for c in (CG, "/idle")])
    got = above_info(run(swap_activity, n=N, vmstat=vm, cgroup_memory=cgm, cgroup_memory_stat=stat))
    assert len(got) == 1 and got[0].impact["cgroups"] == [CG]
    ev = [e for e in got[0].evidence if e.signal == "cgroup_swap"]
    assert [(e.value, e.baseline) for e in ev] == [(450.0, 50.0)]
    assert "limit 256 MiB" in got[0].summary


def test_a_5_s_sampler_spreads_each_increase_over_the_seconds_since_the_previous_sample() -> None:
    every5 = pl.col("ts").dt.second() % 5 == 0
    cg = _cg(1000.0).filter(every5)
    got = above_info(
        run(memory_pressure, n=N, cgroup_memory=cg, cgroup_memory_stat=_stat(5000.0).filter(every5))
    )
    # first counted at the sample of 50 s (covers 46..50), last increase at the 110 s sample
    assert [(f.start, f.end) for f in got] == [(t(46), t(111))]
    assert got[0].impact["limit_hits"] == 60_000
    assert abs(got[0].impact["limit_hits_per_s"] - 60_000 / 65) < 0.1


def test_a_folded_host_stall_counts_for_the_cgroup_severity() -> None:
    some = lambda i: 30.0 if 50 <= i < 110 else 0.0  # noqa: E731
    psi = pl.concat([
        series(N, source="system", resource="memory", kind="some", avg10_pct=0.0, stall_pct=some),
        series(N, source="system", resource="memory", kind="full", avg10_pct=0.0, stall_pct=some),
    ])  # fmt: skip
    got = above_info(
        run(memory_pressure, n=N, cgroup_memory=_cg(1000.0), cgroup_memory_stat=_stat(0.0), psi=psi)
    )
    assert [(f.impact["cgroup"], f.severity) for f in got] == [(CG, "major")]
    assert "30% (full) host-wide" in got[0].summary


def test_its_own_memory_pushed_to_swap_makes_a_cgroup_at_its_limit_minor() -> None:
    swap = lambda i: int(min(max(i - 49, 0), 60) * 2 * MIB)  # noqa: E731  (120 MiB by 110)
    stat = pl.concat([_stat(0.0), series(N, cgroup=CG, file="memory.stat", key="swap", value=swap)
                      .with_columns(pl.col("value").cast(pl.Int64))])  # fmt: skip
    got = run(memory_pressure, n=N, cgroup_memory=_cg(1000.0), cgroup_memory_stat=stat)
    assert isinstance(got, list) and [f.severity for f in got] == ["minor"]
    assert got[0].impact["swap_growth_mb"] == 118  # max − the window's first sample (2 MiB)
