"""The host configuration audit: facts from both cgroup vocabularies, role inference, rules."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from report_stores import FULL, build

from analyzer.audit import infer_role, run_audit
from analyzer.audit.facts import Facts, normalise_cgroup
from analyzer.audit.rules import RULES, rules_markdown
from reports.queries import Store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store() -> Store:
    return Store(build(*FULL))


def rows(audit, rule: str) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(r["observed"], r["status"]) for r in audit.rows if r["id"] == rule]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("cpu.max", "max 100000", [("cpu.quota_us", "max"), ("cpu.period_us", "100000")]),
        ("cpu.cfs_quota_us", "50000", [("cpu.quota_us", "50000")]),
        ("cpu.cfs_period_us", "100000", [("cpu.period_us", "100000")]),
        ("memory.max", "max", [("memory.max_bytes", "max")]),
        ("memory.limit_in_bytes", "9223372036854771712", [("memory.max_bytes", "max")]),
        ("memory.limit_in_bytes", "8589934592", [("memory.max_bytes", "8589934592")]),
        ("memory.high", "4294967296", [("memory.high_bytes", "4294967296")]),
        ("memory.memsw.limit_in_bytes", "-1", [("memory.memsw_max_bytes", "max")]),
        ("cpu.shares", "2048", [("cpu.weight", "79")]),
        ("memory.max_bytes", "max", [("memory.max_bytes", "max")]),  # already normalised
    ],
)
def test_cgroup_v1_and_v2_limits_share_one_vocabulary(key: str, value: str, expected: list) -> None:
    assert normalise_cgroup(key, value) == expected


def test_training_host_deviations_are_found_with_why_and_fix(store: Store) -> None:
    audit = run_audit(store, "auto")
    assert audit.role == "training" and audit.role_inferred
    assert "torchrun" in audit.role_reason
    assert rows(audit, "SWAPPINESS") == [("60", "deviation")]
    assert rows(audit, "OVERCOMMIT") == [("2", "deviation")]
    assert rows(audit, "THP_DEFRAG") == [("always", "deviation")]
    assert rows(audit, "THP_ENABLED") == [("always", "ok")]  # fine for training
    assert rows(audit, "CPU_GOVERNOR") == [("performance, powersave", "deviation")]
    assert rows(audit, "NUMA_BALANCING") == [("1", "deviation")]
    dirty = rows(audit, "DIRTY_WRITEBACK")[0]
    assert dirty[1] == "deviation" and "≈ up to 25.1 GiB of 251 GiB RAM" in dirty[0]
    assert rows(audit, "PROCESS_AFFINITY")[0][1] == "deviation"  # one CPU for the trainer
    deviation = next(r for r in audit.rows if r["id"] == "SWAPPINESS")
    assert deviation["fix"] == "sysctl -w vm.swappiness=10" and deviation["why"]
    assert audit.rows[0]["status"] == "deviation"  # deviations first


def test_cgroup_quota_is_read_from_v2_cpu_max_and_v1_cfs_quota(store: Store) -> None:
    quota = rows(run_audit(store, "training"), "CGROUP_CPU_QUOTA")
    assert ("legacy/job: no CPU quota", "ok") in quota
    assert ("train.slice: 2 CPUs (200000/100000 µs)", "deviation") in quota
    memory = rows(run_audit(store, "training"), "CGROUP_MEMORY")
    assert memory == [("legacy/job: max max, high unset", "ok")]


def test_cgroup_limits_table_counts_too() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE cgroup_limits (ts TIMESTAMPTZ, cgroup VARCHAR, key VARCHAR, value BIGINT,"
        " unlimited BOOLEAN, device VARCHAR, source_key VARCHAR);"
        "INSERT INTO cgroup_limits VALUES (NULL, '/svc', 'cpu.quota_us', 400000, false, NULL, 'cpu.cfs_quota_us'),"
        " (NULL, '/svc', 'cpu.period_us', 100000, false, NULL, 'cpu.cfs_period_us'),"
        " (NULL, '/svc', 'memory.max_bytes', NULL, true, NULL, 'memory.limit_in_bytes')"
    )
    audit = run_audit(Store(con), "inference")
    assert rows(audit, "CGROUP_CPU_QUOTA") == [("/svc: 4 CPUs (400000/100000 µs)", "advice")]


def test_the_role_changes_what_counts_as_a_deviation(store: Store) -> None:
    inference = run_audit(store, "inference")
    assert inference.role == "inference" and not inference.role_inferred
    assert rows(inference, "THP_ENABLED") == [("always", "deviation")]
    assert rows(inference, "PROCESS_SCHED")[0][1] == "deviation"  # SCHED_BATCH adds latency
    assert rows(run_audit(store, "training"), "PROCESS_SCHED")[0][1] == "ok"


def test_settings_changed_during_the_capture_are_listed(store: Store) -> None:
    assert ("vm.swappiness", "60", "10") in run_audit(store).changed


def test_a_store_without_snapshot_reports_unknown_not_ok() -> None:
    audit = run_audit(Store(duckdb.connect()))
    assert not audit.has_snapshot
    assert {r["status"] for r in audit.rows} <= {"unknown", "ok"}
    assert rows(audit, "SWAPPINESS") == [("not captured", "unknown")]


@pytest.mark.parametrize(
    ("commands", "util", "role"),
    [
        (["python3 -m vllm.entrypoints.openai.api_server --model x"], None, "inference"),
        (["tritonserver --model-repository=/m"], None, "inference"),
        (["torchrun --nproc-per-node 8 train.py"], None, "training"),
        (["python3 workload.py --out /tmp/hs-ckpt"], None, "training"),
        (["python3 observer.py"], 95.0, "training"),  # no marker ('observer' is not 'serve')
        (["python3 app.py"], 20.0, "inference"),
    ],
)
def test_role_is_inferred_from_processes_then_gpu_use(
    commands: list[str], util: float | None, role: str
) -> None:
    facts = Facts(commands=commands, gpu_count=8 if util is not None else 0, gpu_util_mean=util)
    assert infer_role(facts)[0] == role


def test_docs_carry_the_generated_audit_rules_table() -> None:
    doc = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    block = doc.split("<!-- audit-rules:start -->\n", 1)[1].split("<!-- audit-rules:end -->", 1)[0]
    assert block == rules_markdown(), "docs/report.md is stale: run python -m analyzer.audit.rules"
    for rule in RULES:
        assert f"`{rule.id}`" in block
