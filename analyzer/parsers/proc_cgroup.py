"""``series/proc_cgroup.out`` -> ``process_cgroups``: the cgroup of every process, and the
container, pod and systemd unit it names (columns in ``TABLES``).

The capture prints, every 5 s (or every interval when longer), one line per process that
is new or whose cgroups changed since the last pass (docs/capture.md "proc_cgroup")::

    1796184249 4242 9:name=systemd:/system.slice/containerd.service|4:memory:/kubepods/burstable/pod8d5e…/3f2a…|1:cpu:/kubepods/…|0::/

``<epoch> <pid>`` then the ``/proc/<pid>/cgroup`` lines of the unified hierarchy
(``0::``) and of the ``cpu``, ``memory`` and ``name=systemd`` controllers, joined by
``|``, blanks, tabs, newlines and backslashes in paths as octal escapes (``\\040``).
A row holds from ``ts`` until the PID's next row (or the end of the capture).

**cgroup** (the one a finding names): the first of the ``cpu`` controller's path (cgroup
v1 or hybrid: where CPU quotas apply), the unified path, the memory and the systemd path
that is not the root ``/``; ``/`` when all are. **Identity** from the first of cgroup,
unified, memory and systemd paths that names it:

- container: a path component of 64 hex digits, bare (cgroupfs driver: ``/docker/<id>``,
  ``/kubepods/…/pod<uid>/<id>``), as a systemd scope ``<runtime>-<id>.scope`` (podman:
  ``libpod-<id>.scope/container``) or in the ``<slice>:<runtime>:<id>`` form of the
  systemd driver seen from inside a container; ``runtime`` from the prefix: ``docker``,
  ``cri-containerd`` → containerd, ``crio`` → cri-o, ``libpod`` → podman;
- pod: ``pod<uid>`` (``_`` in systemd slice names read as ``-``), and the QoS class from
  ``kubepods-burstable``/``kubepods-besteffort`` (else ``guaranteed`` under kubepods);
- unit: the last ``*.service`` or non-container ``*.scope`` component; slice: the last
  ``*.slice`` component.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.parsers import _snap_common as snap
from analyzer.parsers import base

S = pl.String
TABLES: dict[str, base.Table] = {
    "process_cgroups": base.table(
        "one row per process and pass of the capture's proc_cgroup sampler where the process is new or its cgroups changed; holds until the PID's next row",
        ("ts", base.TS, "UTC", "pass time (epoch second)"),
        ("pid", pl.Int64, "", "process ID"),
        (
            "cgroup",
            S,
            "",
            "the cpu controller's path (v1/hybrid), else unified (v2), memory, systemd",
        ),
        ("unified_cgroup", S, "", "cgroup v2 path (the 0:: line); NULL when absent"),
        ("cpu_cgroup", S, "", "cgroup v1 cpu controller path; NULL when absent"),
        ("memory_cgroup", S, "", "cgroup v1 memory controller path; NULL when absent"),
        ("systemd_cgroup", S, "", "cgroup v1 name=systemd path; NULL when absent"),
        ("container_id", S, "", "64-hex container ID named by the path; NULL when none"),
        ("runtime", S, "", "docker | containerd | cri-o | podman, from the scope's prefix"),
        ("pod_uid", S, "", "Kubernetes pod UID (dashed form); NULL outside kubepods"),
        ("pod_qos", S, "", "guaranteed | burstable | besteffort (kubepods slices)"),
        ("unit", S, "", "systemd unit: the last *.service or non-container *.scope"),
        ("slice", S, "", "systemd slice: the last *.slice component"),
    )
}

ROW = r"^(\d{9,11}) (\d+) (\d+:[^:]*:.*)$"
RUNTIMES = {"docker": "docker", "cri-containerd": "containerd", "crio": "cri-o"}
RUNTIMES |= {"libpod": "podman", "containerd": "containerd"}
_CONTAINER = (
    r"(?:^|[/:])(?:(docker|cri-containerd|crio|libpod|containerd)[-:])?([0-9a-f]{64})"
    r"(?:\.scope)?(?:/|$)"
)
_POD = r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
_QOS = r"kubepods[-/](burstable|besteffort)"
_UNIT = r"(?:^|/)([^/]+\.(?:service|scope))$"
_SLICE = r"^(?:.*/)?([^/:]+\.slice)(?:[/:]|$)"


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is the capture's proc_cgroup output."""
    lns = [ln for ln in head.splitlines()[:50] if ln.strip()]
    share = sum(1 for ln in lns if re.match(ROW, ln)) / len(lns) if lns else 0.0
    return 0.9 if share >= 0.8 else 0.0


def _path(parts: pl.Expr, controller: str) -> pl.Expr:
    """The path of the part of ``controller`` (the unified hierarchy when ``""``)."""
    which = rf"^\d+:([^:]*,)?{controller}(,[^:]*)?:" if controller else r"^0::"
    hit = parts.list.eval(pl.element().filter(pl.element().str.contains(which)).first())
    return snap.unescape(hit.list.first().str.replace(r"^\d+:[^:]*:", ""))


def _identity(paths: list[pl.Expr]) -> list[pl.Expr]:
    def first(pattern: str, group: int) -> pl.Expr:
        return pl.coalesce([p.str.extract(pattern, group) for p in paths])

    runtime = first(_CONTAINER, 1).replace_strict(RUNTIMES, default=None, return_dtype=S)
    container = first(_CONTAINER, 2)
    unit = first(_UNIT, 1)
    return [
        container.alias("container_id"),
        pl.when(container.is_not_null()).then(runtime).alias("runtime"),
        first(_POD, 1).str.replace_all("_", "-").alias("pod_uid"),
        pl.when(first(_POD, 1).is_not_null())
        .then(first(_QOS, 1).fill_null("guaranteed"))
        .alias("pod_qos"),
        pl.when(unit.str.contains(r"[0-9a-f]{64}").not_()).then(unit).alias("unit"),
        first(_SLICE, 1).alias("slice"),
    ]


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse the proc_cgroup sampler's output into ``process_cgroups``."""
    cov = base.Coverage()
    df = snap.lines(path, cov.notes)
    g = pl.col("line").str.extract_groups(ROW)
    df = df.with_columns(
        snap.verdicts(df, g.struct.field("1").is_not_null(), path).alias("what"), g.alias("g")
    )
    other = ("skipped", "not '<epoch> <pid> <hierarchy>:<controllers>:<path>|…'")
    snap.account(cov, df["what"], snap.REASONS | {"other": other})
    parts = (  # a '|' inside a path stays in it
        pl.col("g").struct.field("3").str.replace_all(r"\|(\d+:)", "\x00$1").str.split("\x00")
    )
    epoch = pl.from_epoch(pl.col("g").struct.field("1").cast(pl.Int64), "s")
    order = ["cpu_cgroup", "unified_cgroup", "memory_cgroup", "systemd_cgroup"]
    rows = (
        df.filter(pl.col("what") == "parsed")
        .with_columns(
            epoch.dt.replace_time_zone("UTC").cast(base.TS).alias("ts"),
            pl.col("g").struct.field("2").cast(pl.Int64, strict=False).alias("pid"),
            _path(parts, "").alias("unified_cgroup"),
            _path(parts, "cpu").alias("cpu_cgroup"),
            _path(parts, "memory").alias("memory_cgroup"),
            _path(parts, "name=systemd").alias("systemd_cgroup"),
        )
        .with_columns(  # the first that is not the root, else the root
            pl.coalesce(*[pl.when(pl.col(c) != "/").then(pl.col(c)) for c in order], *order).alias(
                "cgroup"
            )
        )
    )
    names = ["cgroup", "unified_cgroup", "memory_cgroup", "systemd_cgroup"]
    rows = rows.with_columns(_identity([pl.col(c) for c in names]))
    return base.ParseResult(
        {"process_cgroups": TABLES["process_cgroups"].conform(rows).collect()}, cov
    )
