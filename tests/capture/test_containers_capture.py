"""The capture's container-runtime snapshot: crictl / docker when present (here: stand-ins
on PATH that print the recorded outputs of tests/fixtures/containers, since this machine
runs no container runtime), recorded as missing with its reason when neither is."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import duckdb
import pytest
from capture_helpers import (
    bundle_dir,
    check_manifest,
    load_manifest,
    restricted_path,
    run_capture,
)

from analyzer.pipeline import Options, run

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "containers"


def _stand_in(folder: Path, name: str, fixture: Path, args: str) -> None:
    """``name ARGS`` prints ``fixture``; any other arguments fail, as a wrong call would."""
    script = folder / name
    script.write_text(
        f'#!/bin/sh\n[ "$*" = {shlex.quote(args)} ] || exit 9\ncat {shlex.quote(str(fixture))}\n'
    )
    script.chmod(0o755)


@pytest.mark.capture
def test_crictl_and_docker_lists_are_captured_and_parsed(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    _stand_in(fake, "crictl", FIX / "public__crictl-ps.end.out", "ps -a -o json")
    docker_args = (
        "ps -a --no-trunc --format {{.ID}}\\t{{.Names}}\\t{{.Image}}\\t{{.State}}\\t"
        '{{.Label "io.kubernetes.pod.name"}}\\t{{.Label "io.kubernetes.pod.namespace"}}\\t'
        '{{.Label "io.kubernetes.pod.uid"}}'
    )
    _stand_in(fake, "docker", FIX / "written__docker-ps.end.out", docker_args)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    out = tmp_path / "out"
    r = run_capture(out, "-d", "2", "-i", "1", "--no-bpf", "--no-gpu", env=env)
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(out)
    by_name = check_manifest(load_manifest(bdir), bdir)
    for name in ("containers_crictl.end", "containers_docker.end"):
        assert by_name[name]["status"] == "ok", by_name[name]
    run(bdir, Options(db=tmp_path / "s.duckdb"))
    with duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True) as con:
        got = con.sql("SELECT cli, name FROM containers ORDER BY cli, name").fetchall()
    # two containers from each CLI, at the start and at the end
    assert ("crictl", "nginx") in got and ("docker", "redis") in got and len(got) == 2 * 2 * 2


@pytest.mark.capture
def test_without_a_runtime_cli_the_snapshot_is_missing_with_its_reason(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = dict(os.environ, PATH=restricted_path(tmp_path, {"crictl", "docker"}))
    r = run_capture(out, "-d", "1", "-i", "1", "--no-bpf", "--no-gpu", env=env)
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(out)
    by_name = check_manifest(load_manifest(bdir), bdir)
    c = by_name["containers.end"]
    assert c["status"] == "missing" and "cgroup paths" in c["reason"], c
