"""--app-metrics and --app-log with the real capture script and the real pipeline.

A small inference-like service (samples/real/service.py: a CPU-bound handler, its latency
histogram exported with prometheus_client) runs under a load generator while the script
captures for 15 s and a training-like loop writes step lines to a log; the bundle then
goes through ``analyze`` and the tables must hold the service's latency quantiles (checked
against the latencies the service itself recorded) and the loop's step time. Then
unhealthy endpoints: down, slow (never blocks longer than the interval) and huge (cut at
the size cap) in one capture, which must still succeed; and wget instead of curl.
No mocks: real processes, sockets, files.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest
from app_helpers import Load, StepLog, free_port, service
from capture_helpers import bundle_dir, check_manifest, load_manifest, run_capture

pytestmark = pytest.mark.capture
BUCKETS_MS = (5, 10, 20, 50, 100, 200, 500, 1000)
QUIET = ("--no-bpf", "--no-gpu", "--history-hours", "0")


def _analyze(bundle: Path, db: Path) -> duckdb.DuckDBPyConnection:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "analyzer",
            "analyze",
            str(bundle),
            "-q",
            "--db",
            str(db),
            "-o",
            str(db.with_suffix(".html")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return duckdb.connect(str(db), read_only=True)


def _bucket(ms: float) -> tuple[float, float]:
    lo = 0.0
    for b in BUCKETS_MS:
        if ms <= b:
            return lo, b
        lo = b
    return lo, float("inf")


def test_latency_quantiles_and_step_times_reach_the_tables(tmp_path: Path) -> None:
    record, log = tmp_path / "latencies.txt", tmp_path / "train.log"
    with (
        service("--record", str(record)) as svc,
        Load(svc.port, ms=8, threads=2) as load,
        StepLog(log, step_s=0.25) as steps,
    ):
        r = run_capture(
            tmp_path / "out", "-d", "15", "-i", "1", *QUIET,
            "--app-metrics", svc.url, "--app-log", str(log), "--app-pattern", "step [0-9]+",
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert load.done > 200 and len(steps.written) > 50
    bdir = bundle_dir(tmp_path / "out")
    by_name = check_manifest(load_manifest(bdir), bdir)
    assert by_name["app_metrics_1"]["status"] == "ok", by_name["app_metrics_1"]
    assert by_name["app_log_1"]["status"] == "ok", by_name["app_log_1"]
    con = _analyze(Path(r.stdout.strip()), tmp_path / "a.duckdb")

    files = dict(
        con.sql("SELECT collector, status FROM collectors WHERE collector LIKE 'app_%'").fetchall()
    )
    assert files == {"app_metrics_1": "parsed", "app_log_1": "parsed"}
    scrapes = con.sql(
        "SELECT status, max(dur_ms), count(*) FROM app_scrape GROUP BY status"
    ).fetchall()
    assert [s[0] for s in scrapes] == ["ok"] and scrapes[0][1] < 1000 and scrapes[0][2] >= 14

    q = con.sql(
        "SELECT count, mean_ms, p50_ms, p90_ms, p99_ms FROM app_metric_quantile "
        "WHERE family = 'demo_request_latency_seconds' AND count > 0 ORDER BY ts"
    ).fetchall()
    assert len(q) >= 12, q
    assert all(p50 <= p90 <= p99 for _, _, p50, p90, p99 in q)
    first, last = con.sql("SELECT epoch(min(ts)), epoch(max(ts)) FROM app_scrape").fetchall()[0]
    seen = [ln.split() for ln in record.read_text().splitlines()]
    truth = [float(ms) * 1000 for t, ms in seen if first < float(t) <= last]
    # the histogram saw what the service recorded between the first and the last scrape:
    # counts and mean agree, and the interpolated median lies in the true median's bucket
    assert abs(sum(c for c, *_ in q) - len(truth)) <= 0.1 * len(truth)
    weighted_mean = sum(c * m for c, m, *_ in q) / sum(c for c, *_ in q)
    assert weighted_mean == pytest.approx(statistics.mean(truth), rel=0.1)
    lo, hi = _bucket(statistics.median(truth))
    assert lo <= statistics.median(p50 for _, _, p50, _, _ in q) <= hi

    rate = con.sql(
        "SELECT median(rate_per_s) FROM app_metric_rate WHERE metric = 'demo_requests_total'"
    ).fetchall()[0][0]
    assert rate == pytest.approx(len(truth) / (last - first), rel=0.35)

    st = con.execute(
        "SELECT count(*), median(step_time_ms), min(step), max(step) FROM app_log_line "
        "WHERE file = ? AND pattern = 'step [0-9]+'",
        [str(log)],
    ).fetchall()[0]
    assert st[0] >= 50 and st[1] == pytest.approx(250, rel=0.1), st
    lo_t, hi_t = con.sql("SELECT min(ts), max(ts) FROM app_log_line").fetchall()[0]
    start, end = con.sql("SELECT start_utc, end_utc FROM bundle").fetchall()[0]
    assert (lo_t - start).total_seconds() >= -2 and (end - hi_t).total_seconds() >= -2


def _write_later(path: Path, after_s: float) -> threading.Thread:
    def run() -> None:
        time.sleep(after_s)
        with StepLog(path, step_s=0.2):
            time.sleep(2.0)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_down_slow_and_huge_endpoints_leave_the_capture_unaffected(tmp_path: Path) -> None:
    env = {**os.environ, "HINDSIGHT_APP_MAX_KB": "256"}
    later, bad = tmp_path / "later.log", tmp_path / "bad.log"
    bad.touch()
    with service("--slow", "5") as slow, service("--pad", "40000") as huge:
        down = f"http://127.0.0.1:{free_port()}/metrics"  # nothing listens there
        writer = _write_later(later, 2.5)  # a log that appears during the capture
        r = run_capture(
            tmp_path / "out", "-d", "5", "-i", "1", *QUIET,
            "--app-metrics", down, "--app-metrics", slow.url, "--app-metrics", huge.url,
            "--app-log", str(bad), "--app-pattern", "step (", "--app-log", str(later),
            "--app-pattern", "step [0-9]+", env=env,
        )  # fmt: skip
        writer.join()
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(tmp_path / "out")
    m = load_manifest(bdir)
    by_name = check_manifest(m, bdir)
    assert m["stop_reason"] == "duration"
    for name in ("vmstat", "psi", "meminfo"):
        assert by_name[name]["status"] == "ok", by_name[name]
    d, s, h = (by_name[f"app_metrics_{i}"] for i in (1, 2, 3))
    assert d["status"] == "failed" and "every scrape failed" in d["reason"], d
    assert "connect" in d["reason"].lower(), d
    assert s["status"] == "failed" and "timed out" in s["reason"], s
    assert h["status"] == "ok" and "cut at 256 KiB" in h["reason"], h
    b, lt = by_name["app_log_1"], by_name["app_log_2"]
    assert b["status"] == "failed" and "rejects the --app-pattern" in b["reason"], b
    assert lt["status"] == "ok", lt
    assert (bdir / "series" / "app_log_2.out").read_text().count(" step ") >= 3

    con = _analyze(Path(r.stdout.strip()), tmp_path / "a.duckdb")
    rows = con.sql(
        "SELECT endpoint, status, dur_ms, bytes, truncated, ts FROM app_scrape ORDER BY endpoint, ts"
    ).fetchall()
    per = {u: [x for x in rows if x[0] == u] for u in (down, slow.url, huge.url)}
    assert all(x[1] == "failed" for x in per[down] + per[slow.url])
    assert len(per[slow.url]) >= 4
    # a slow endpoint never holds a scrape past the interval, and the next one starts on time
    assert max(x[2] for x in per[slow.url]) < 1000
    starts = [x[5] for x in per[slow.url]]
    assert max((b - a).total_seconds() for a, b in itertools.pairwise(starts)) < 1.6
    assert all(x[1] == "truncated" and x[4] and x[3] <= 256 * 1024 for x in per[huge.url])
    kept = con.execute(
        "SELECT count(*) FROM app_metric_sample WHERE endpoint = ? AND metric = 'demo_pad'",
        [huge.url],
    ).fetchall()[0][0]
    assert kept > 1000  # what fitted under the cap was parsed


def _path_without_curl(tmp: Path) -> str:
    """A PATH with every command of this machine's PATH except curl (symlinks)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for d in [*os.environ.get("PATH", "/usr/bin:/bin").split(":"), "/usr/sbin", "/sbin"]:
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = bin_dir / name
            if name != "curl" and not target.exists() and os.access(os.path.join(d, name), os.X_OK):
                target.symlink_to(os.path.join(d, name))
    return str(bin_dir)


@pytest.mark.skipif(
    not any(os.access(f"{d}/wget", os.X_OK) for d in ("/usr/bin", "/bin")), reason="no wget"
)
def test_wget_scrapes_when_there_is_no_curl(tmp_path: Path) -> None:
    env = {"PATH": _path_without_curl(tmp_path), "HOME": str(tmp_path)}
    with service() as svc:
        r = run_capture(tmp_path / "out", "-d", "3", *QUIET, "--app-metrics", svc.url, env=env)
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(tmp_path / "out")
    c = check_manifest(load_manifest(bdir), bdir)["app_metrics_1"]
    assert c["status"] == "ok" and c["command"].startswith("wget "), c
    text = (bdir / "series" / "app_metrics_1.out").read_text()
    assert text.count("# hindsight-scrape end ") >= 2 and "demo_request_latency_seconds" in text


def test_unpaired_or_unsafe_app_options_are_refused(tmp_path: Path) -> None:
    for args, msg in (
        (["--app-log", "x.log"], "--app-pattern"),
        (["--app-metrics", "file:///etc/shadow"], "http:// or https://"),
        (["--app-pattern", "step"], "--app-pattern"),
    ):
        r = run_capture(tmp_path / "out", "-d", "1", *args)
        assert r.returncode != 0 and msg in r.stderr, (args, r.stderr)
    assert not (tmp_path / "out").exists()


def test_without_app_options_both_collectors_are_listed_skipped(tmp_path: Path) -> None:
    r = run_capture(tmp_path / "out", "-d", "1", *QUIET)
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(tmp_path / "out")
    by_name = check_manifest(load_manifest(bdir), bdir)
    assert (by_name["app_metrics"]["status"], by_name["app_log"]["status"]) == (
        "skipped",
        "skipped",
    )
    assert "--app-metrics" in by_name["app_metrics"]["reason"]
