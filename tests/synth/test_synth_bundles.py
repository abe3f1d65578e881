"""Generated bundles load like real captures: every file identified and parsed, the
injected values in the right tables at the right times, detectors find the incidents
and stay quiet on the negative controls."""

from __future__ import annotations

import json
import tarfile
from datetime import datetime

import pytest

from analyzer.synth import KINDS

ALL_KINDS = list(KINDS)

# Real-capture lines our parsers do not take yet (bugs of the parsers, not of synth):
# the capture's bpftrace scripts print a banner line, and the cgroup sampler copies
# pids.current. Everything else must parse at 100 %.
KNOWN_PARSER_GAPS = {
    "series/bpf_runqlat.out": {"skipped: not tool output (prose)"},
    "series/bpf_biolat.out": {"skipped: not tool output (prose)"},
    "series/cgroup.out": {"skipped: unsupported cgroup file"},
}


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _skips(row: dict) -> set[str]:
    return {k for k in json.loads(row.get("skip_reasons") or "{}") if k.startswith("skipped")}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_file_of_a_generated_bundle_is_identified_and_parsed(analysed, kind: str) -> None:
    a = analysed(kind)
    for row in a.collectors:
        assert row["status"] not in ("unrecognised", "pending", "failed", "refused"), row
        if row["status"] == "partial":
            assert _skips(row) <= KNOWN_PARSER_GAPS.get(row["file"], set()), row
    parsed = {r["file"] for r in a.collectors if r["status"] in ("parsed", "partial")}
    assert {
        "series/vmstat.out",
        "series/mpstat.out",
        "series/iostat.out",
        "series/sar.out",
        "series/nvidia_dmon.out",
    } <= parsed


@pytest.mark.xfail(strict=True, reason="parser gap: bpftrace banner line and cgroup pids.current")
def test_capture_banner_and_pids_current_lines_parse_fully(analysed) -> None:
    a = analysed("checkpoint_stall")
    assert all(r["status"] != "partial" for r in a.collectors)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_detectors_report_the_incident_and_not_its_negative_control(analysed, kind: str) -> None:
    a = analysed(kind)
    found = [(f["key"], f["start"].timestamp(), f["end"].timestamp()) for f in a.findings]
    for inc in a.truth["incidents"]:
        lo, hi = _epoch(inc["start_utc"]) - 2, _epoch(inc["end_utc"]) + 2
        hits = [f for f in found if f[0] == inc["expected_key"] and f[1] <= hi and f[2] >= lo]
        assert hits, (inc, found)
    for ctl in a.truth["negative_controls"]:
        lo, hi = _epoch(ctl["start_utc"]), _epoch(ctl["end_utc"])
        hits = [f for f in found if f[0] == ctl["must_not_key"] and f[1] < hi and f[2] > lo]
        assert not hits, (ctl, hits)


def _window(a, key: str = "incidents") -> tuple[str, str]:
    inc = a.truth[key][0]
    return inc["start_utc"], inc["end_utc"]


def test_checkpoint_bursts_show_as_20x_writes_and_idle_gpus_in_each_burst(analysed) -> None:
    a = analysed("checkpoint_stall")
    base = a.sql("SELECT median(wkb_s) FROM iostat_device")[0][0]
    for ev in a.truth["incidents"][0]["events"]:
        s, e = ev["start_utc"], ev["end_utc"]
        wr, sm = a.sql(
            f"SELECT (SELECT max(wkb_s) FROM iostat_device WHERE ts > '{s}' AND ts <= '{e}'), "
            f"(SELECT min(sm_pct) FROM gpu_dmon WHERE ts > '{s}' AND ts <= '{e}')"
        )[0]
        assert wr >= 20 * base and sm < 10
    assert (
        a.sql("SELECT min(sm_pct) FROM gpu_dmon WHERE ts < TIMESTAMPTZ '2026-11-29 14:00:55+00'")[
            0
        ][0]
        > 85
    )


def test_oom_kill_leaves_a_kernel_report_and_a_memory_events_increment_at_the_kill(
    analysed,
) -> None:
    a = analysed("oom_kill")
    inc = a.truth["incidents"][0]
    kill = _epoch(inc["kill_utc"])
    rows = a.sql("SELECT epoch(ts), pid, memcg FROM dmesg WHERE kind = 'oom_kill'")
    assert [(r[1], r[2]) for r in rows] == [(inc["victim_pid"], "/train.slice")]
    assert abs(rows[0][0] - kill) < 1
    first = a.sql("SELECT epoch(min(ts)) FROM cgroup_memory WHERE events_oom_kill > 0")[0][0]
    assert 0 <= first - kill <= 1.5
    before = a.sql(
        f"SELECT max(psi) FROM (SELECT avg10_pct AS psi FROM psi WHERE resource = 'memory' AND kind = 'some' AND source = 'system' AND ts < to_timestamp({kill}) AND ts > to_timestamp({kill - 20}))"
    )[0][0]
    assert before > 10


def test_irq_hotspot_pins_one_cpu_in_irq_and_softirq(analysed) -> None:
    a = analysed("irq_hotspot")
    s, e = _window(a)
    hot = a.sql(
        f"SELECT min(irq_pct + soft_pct) FROM mpstat_cpu WHERE cpu = 0 AND ts > '{s}' AND ts <= '{e}'"
    )[0][0]
    others = a.sql(
        f"SELECT max(irq_pct + soft_pct) FROM mpstat_cpu WHERE cpu > 0 AND ts > '{s}' AND ts <= '{e}'"
    )[0][0]
    assert hot > 90 and others < 5
    # the softirq tables come every 10 s (mpstat -I 10) and still name NET_RX on that CPU
    steps = a.sql(
        "SELECT DISTINCT epoch(ts) - lag(epoch(ts)) OVER (ORDER BY ts) FROM "
        "(SELECT DISTINCT ts FROM mpstat_irq) ORDER BY 1"
    )
    assert [r[0] for r in steps if r[0] is not None] == [10]
    hit = next(f for f in a.findings if f["key"] == "IRQ_HOTSPOT")
    top = [ev for ev in hit["evidence"] if "softirq" in str(ev)]
    assert top and "NET_RX" in str(top[0]), hit["evidence"]


@pytest.mark.parametrize(
    ("kind", "query", "low", "high"),
    [
        (
            "net_errors",
            "SELECT min(rxdrop_s) FROM sar_net_edev WHERE iface = 'eno1' AND ts > TIMESTAMPTZ '{s}' + INTERVAL 2 SECOND AND ts <= '{e}'",
            300,
            None,
        ),
        (
            "swap_activity",
            "SELECT min(si_kb_s + so_kb_s) FROM vmstat WHERE ts > TIMESTAMPTZ '{s}' + INTERVAL 2 SECOND AND ts <= '{e}'",
            10_000,
            None,
        ),
        (
            "cpu_contention",
            "SELECT min(r) FROM vmstat WHERE ts > TIMESTAMPTZ '{s}' + INTERVAL 2 SECOND AND ts <= '{e}'",
            8 * 1.5,
            None,
        ),
        (
            "gpu_throttle",
            "SELECT max(pclk_mhz) FROM gpu_dmon WHERE ts > TIMESTAMPTZ '{s}' + INTERVAL 2 SECOND AND ts <= '{e}'",
            None,
            1980 * 0.7,
        ),
        (
            "cpu_throttle",
            "SELECT min(throttled_pct) FROM cgroup_cpu WHERE ts > TIMESTAMPTZ '{s}' + INTERVAL 2 SECOND AND ts <= '{e}'",
            30,
            None,
        ),
        (
            "io_saturation",
            "SELECT min(util_pct) FROM iostat_device WHERE device = 'nvme1n1' AND ts > TIMESTAMPTZ '{s}' + INTERVAL 2 SECOND AND ts <= '{e}'",
            99,
            None,
        ),
        (
            "gpu_starvation",
            "SELECT max(sm_pct) FROM gpu_dmon WHERE ts > TIMESTAMPTZ '{s}' + INTERVAL 2 SECOND AND ts <= '{e}'",
            None,
            10,
        ),
    ],
)
def test_injected_values_are_in_the_tables_inside_the_window(
    analysed, kind, query, low, high
) -> None:
    a = analysed(kind)
    s, e = _window(a)
    value = a.sql(query.format(s=s, e=e))[0][0]
    assert value is not None
    assert low is None or value >= low
    assert high is None or value <= high


def test_kernel_reports_of_xid_and_hung_task_are_classified(analysed) -> None:
    xid = analysed("gpu_xid")
    assert {r[0] for r in xid.sql("SELECT xid_code FROM dmesg WHERE kind = 'xid'")} == {13, 43}
    hung = analysed("hung_task")
    assert hung.sql("SELECT comm, pid, blocked_s FROM dmesg WHERE kind = 'hung_task'") == [
        ("tar", 7311, 130)
    ]


def test_sampling_gap_removes_samples_only_from_the_named_collectors(analysed) -> None:
    a = analysed("sampling_gap")
    s, e = _window(a)

    def inside(t, f):
        return a.sql(
            f"SELECT count(*) FROM {t} WHERE ts > '{s}' AND ts < '{e}' AND source_file = '{f}'"
        )[0][0]

    assert (
        inside("vmstat", "series/vmstat.out") == 0
        and inside("iostat_cpu", "series/iostat.out") == 0
    )
    assert (
        inside("psi", "series/psi.out") > 20 and inside("gpu_dmon", "series/nvidia_dmon.out") > 20
    )
    rcs = {r["file"]: r.get("exit_code") for r in a.collectors}
    assert rcs["series/mpstat.out"] == 143


def test_counters_only_grow_and_cpu_rows_average_to_the_all_row(analysed) -> None:
    a = analysed("memory_pressure")
    for table, col, where in [
        ("proc_vmstat", "value", "key = 'pgscan_direct'"),
        ("cgroup_cpu", "usage_usec", "TRUE"),
        ("psi", "total_us", "resource = 'io' AND kind = 'some' AND source = 'system'"),
    ]:
        drops = a.sql(
            f"SELECT count(*) FROM (SELECT {col} - lag({col}) OVER (ORDER BY ts) AS d FROM {table} WHERE {where}) WHERE d < 0"
        )
        assert drops == [(0,)], table
    worst = a.sql(
        "SELECT max(abs(a.usr_pct - c.m)) FROM mpstat_cpu a JOIN (SELECT ts, avg(usr_pct) AS m FROM mpstat_cpu "
        "WHERE cpu >= 0 GROUP BY ts) c USING (ts) WHERE a.cpu = -1"
    )[0][0]
    assert worst < 0.6


def test_bundle_layout_and_manifest_match_a_real_capture(analysed, real_sample_dir) -> None:
    a = analysed("gpu_xid")
    with tarfile.open(a.bundle) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        top = {n.split("/", 1)[0] for n in tar.getnames()}
        manifest = json.load(tar.extractfile(f"{a.truth['bundle']}/manifest.json"))  # type: ignore[arg-type]
    assert top == {a.truth["bundle"]}
    real = {p.relative_to(real_sample_dir).as_posix() for p in real_sample_dir.rglob("*")}
    # the real capture predates --iostat-json (its JSON twin was on by default then)
    real = {n for n in real if not n.startswith("series/iostat_json.")}
    assert {n for n in real if n.startswith(("series/", "snap/"))} <= names | {"snap/pstore"}
    real_manifest = json.loads((real_sample_dir / "manifest.json").read_text())
    assert set(real_manifest) <= set(manifest)
    for c in manifest["collectors"]:
        assert c["output"] is None or c["output"] in names
        if c["output"]:
            assert c["bytes"] == tar_size(a.bundle, f"{a.truth['bundle']}/{c['output']}")


def tar_size(bundle, name: str) -> int:
    with tarfile.open(bundle) as tar:
        return tar.getmember(name).size
