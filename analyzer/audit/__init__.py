"""Host configuration audit: the snapshot's tuning against recommended values for training
and for inference hosts, each deviation with why it matters and the command that fixes it.

``run_audit(store, role)`` → :class:`Audit` (``store``: an `analyzer.catalog.Catalog` of the
analysed store). The audit judges; the report only shows its result. ``role`` is ``training``, ``inference`` or
``auto`` (inferred from the processes and GPUs seen, :func:`infer_role`). Statuses: ``ok``;
``deviation`` (differs from the recommendation for this role); ``advice`` (worth a look,
not wrong); ``unknown`` (the snapshot lacks it: not captured is not the same as fine).

The recommendations are the table :data:`analyzer.audit.rules.RULES` (documented in
docs/report.md, checked by a test). The facts come from :mod:`analyzer.audit.facts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from analyzer.audit.facts import Facts, load_facts
from analyzer.audit.rules import RULES
from analyzer.catalog import Catalog

ROLES = ("training", "inference")
STATUS_ORDER = ["deviation", "advice", "unknown", "ok"]
INFERENCE_MARKERS = (
    "vllm", "tritonserver", "text-generation-launcher", "text-generation-server", "sglang",
    "trtllm-serve", "tensorrt_llm", "lmdeploy", "torchserve", "ollama", "llama-server",
    "serve", "serving", "inference", "uvicorn", "gunicorn",
)  # fmt: skip
TRAINING_MARKERS = (
    "torchrun", "torch.distributed.run", "deepspeed", "accelerate", "megatron", "nemo",
    "train", "training", "finetune", "fine_tune", "pretrain", "lightning", "horovod",
    "ckpt", "checkpoint", "epoch",
)  # fmt: skip


@dataclass
class Audit:
    """The audit's result: the role judged for, why, and one row per rule check."""

    role: str
    role_reason: str
    role_inferred: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    has_snapshot: bool = False


def _hits(commands: list[str], markers: tuple[str, ...]) -> list[str]:
    found = []
    for m in markers:
        pattern = re.compile(r"(?<![a-z0-9])" + re.escape(m) + r"(?![a-z0-9])")
        if any(pattern.search(c.lower()) for c in commands):
            found.append(m)
    return found


def infer_role(facts: Facts) -> tuple[str, str]:
    """(role, why) from process names/command lines and GPU use.

    >>> infer_role(Facts(commands=["python -m vllm.entrypoints.openai.api_server"]))
    ('inference', 'serving process seen (vllm)')
    >>> infer_role(Facts(commands=["torchrun --nproc-per-node 8 train.py"]))[0]
    'training'
    >>> infer_role(Facts())[0]
    'training'
    """
    inf, train = _hits(facts.commands, INFERENCE_MARKERS), _hits(facts.commands, TRAINING_MARKERS)
    if inf and len(inf) >= len(train):
        return "inference", f"serving process seen ({', '.join(inf[:3])})"
    if train:
        return "training", f"training process seen ({', '.join(train[:3])})"
    if facts.gpu_count and facts.gpu_util_mean is not None:
        if facts.gpu_util_mean >= 60:
            return (
                "training",
                f"no role marker in process names; GPUs busy {facts.gpu_util_mean:.0f}% on average, typical of training",
            )
        return (
            "inference",
            f"no role marker in process names; GPUs busy only {facts.gpu_util_mean:.0f}% on average, typical of serving",
        )
    return "training", "no GPU activity or role marker seen; training assumed"


def run_audit(store: Catalog, role: str = "auto") -> Audit:
    """Every rule of `RULES` checked against the store's snapshot, deviations first."""
    facts = load_facts(store)
    inferred = role not in ROLES
    if inferred:
        role, why = infer_role(facts)
    else:
        why = "set with --role"
    audit = Audit(role, why, inferred, has_snapshot=bool(facts.kv) or bool(facts.cgroups))
    for rule in RULES:
        try:
            checks = rule.check(facts, role)
        except (ValueError, TypeError, KeyError, ZeroDivisionError) as exc:
            checks = [("", "unknown", f"could not evaluate: {type(exc).__name__}")]
        for observed, status, detail in checks:
            audit.rows.append(
                {
                    "id": rule.id,
                    "area": rule.area,
                    "setting": rule.setting,
                    "observed": observed,
                    "status": status,
                    "detail": detail,
                    "training": rule.training,
                    "inference": rule.inference,
                    "recommended": rule.training if role == "training" else rule.inference,
                    "why": rule.why,
                    "fix": rule.fix,
                }
            )
    audit.rows.sort(
        key=lambda r: STATUS_ORDER.index(r["status"]) if r["status"] in STATUS_ORDER else 9
    )
    for r in audit.rows:
        audit.counts[r["status"]] = audit.counts.get(r["status"], 0) + 1
    audit.changed = [(k, a, b) for k, (a, b) in sorted(facts.changed.items())][:30]
    return audit
