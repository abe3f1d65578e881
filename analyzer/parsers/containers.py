"""``snap/containers_*.{start,end}.out`` -> ``containers``: names of containers and their
pods from the runtime's own CLI, to name a finding's "who" (docs/capture.md "containers").

Two forms, told apart by the first character:

- ``crictl ps -a -o json`` (CRI ``ListContainersResponse``)::

      {"containers": [{"id": "4098…", "metadata": {"name": "nydus-container"}, "image":
        {"image": "reg…/mysql:latest"}, "state": "CONTAINER_EXITED", "labels": {…}}]}

  One row per element of ``containers``. Coverage: the document's lines are parsed when it
  holds a container, structure when its list is empty, skipped (with the JSON error) when
  it does not parse; an element without an ``id`` is left out with a note.
- ``docker ps -a --no-trunc --format`` with the capture's template (`DOCKER_PS_FMT`): per
  line ``ID<TAB>name<TAB>image<TAB>state<TAB>pod name<TAB>pod namespace<TAB>pod uid``
  (empty label values as empty fields); a line with another number of fields or an ID
  that is not 64 hex digits is skipped.

One row per container (columns in ``TABLES``).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _snap_common as snap
from analyzer.parsers import base

S = pl.String
TABLES: dict[str, base.Table] = {
    "containers": base.table(
        "one row per container listed by the runtime's CLI in a snapshot",
        ("ts", base.TS, "UTC", "snapshot time; NULL when unknown"),
        ("snapshot", S, "", "'start' or 'end' (capture phase)"),
        ("cli", S, "", "crictl | docker"),
        ("container_id", S, "", "full container ID (64 hex digits)"),
        ("name", S, "", "container name (crictl metadata.name; docker Names)"),
        ("image", S, "", "image reference"),
        ("state", S, "", "as the CLI prints it (CONTAINER_RUNNING, running, exited...)"),
        ("pod_name", S, "", "label io.kubernetes.pod.name; NULL outside Kubernetes"),
        ("pod_namespace", S, "", "label io.kubernetes.pod.namespace"),
        ("pod_uid", S, "", "label io.kubernetes.pod.uid"),
    )
}
DOCKER_FIELDS = ["container_id", "name", "image", "state", "pod_name", "pod_namespace", "pod_uid"]
_HEX64 = r"^[0-9a-f]{64}$"
_POD = "io.kubernetes.pod."


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is crictl's container list or the capture's docker ps."""
    text = head.lstrip()
    if text.startswith("{") and '"containers"' in text[:200]:
        return 0.9
    first = text.split("\n", 1)[0].split("\t")
    return 0.85 if len(first) == len(DOCKER_FIELDS) and len(first[0]) == 64 else 0.0


def _obj(item: dict, key: str) -> dict:
    """``item[key]`` when it is a JSON object, else ``{}``."""
    value = item.get(key)
    return value if isinstance(value, dict) else {}


def _crictl(path: Path, cov: base.Coverage) -> pl.DataFrame:
    text = path.read_text(encoding="utf-8", errors="replace")
    n = max(1, len(text.splitlines()))
    cov.total += n
    try:
        doc = json.loads(text)
    except ValueError as e:
        cov.add_skipped(f"not JSON: {str(e)[:80]}", n)
        return pl.DataFrame()
    items = doc.get("containers") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        cov.add_skipped("a JSON document without a 'containers' list", n)
        return pl.DataFrame()
    rows = [  # one element per container: tens, not a per-line loop
        {
            "container_id": c["id"],
            "name": _obj(c, "metadata").get("name"),
            "image": _obj(c, "image").get("image") or c.get("imageRef"),
            "state": c.get("state"),
            **{f"pod_{k}": _obj(c, "labels").get(_POD + k) for k in ("name", "namespace", "uid")},
        }
        for c in items
        if isinstance(c, dict) and isinstance(c.get("id"), str)
    ]
    if len(rows) < len(items):
        cov.notes.append(f"{len(items) - len(rows)} of {len(items)} containers without an id")
    if rows:
        cov.parsed += n
    else:
        cov.add_structure("JSON without containers", n)
    return pl.DataFrame(rows, schema=dict.fromkeys(DOCKER_FIELDS, S)).with_columns(
        cli=pl.lit("crictl")
    )


def _docker(path: Path, cov: base.Coverage) -> pl.DataFrame:
    df = snap.lines(path, cov.notes)
    parts = pl.col("line").str.split("\t")
    ok = (parts.list.len() == len(DOCKER_FIELDS)) & parts.list.first().str.contains(_HEX64)
    df = df.with_columns(snap.verdicts(df, ok, path).alias("what"))
    other = ("skipped", "not the capture's docker ps format (7 tab-separated fields)")
    snap.account(cov, df["what"], snap.REASONS | {"other": other})
    got = df.filter(pl.col("what") == "parsed").select(
        pl.col("line").str.split("\t").list.to_struct(fields=DOCKER_FIELDS).struct.unnest()
    )
    return got.with_columns(
        [pl.col(c).replace("", None) for c in DOCKER_FIELDS[4:]] + [pl.lit("docker").alias("cli")]
    )


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse a crictl or docker container list into ``containers``."""
    cov = base.Coverage()
    with path.open("rb") as f:
        head = f.read(256).lstrip()[:1]
    rows = _crictl(path, cov) if head == b"{" else _docker(path, cov)
    if cov.total and not cov.parsed and cov.n_skipped == cov.total and head != b"{":
        raise ParseError(f"{ctx.file_name or path.name}: no container line")
    phase, ts = snap.snapshot_time(path, ctx, cov.notes)
    return base.ParseResult(snap.conformed(TABLES, {"containers": rows}, phase, ts), cov)
