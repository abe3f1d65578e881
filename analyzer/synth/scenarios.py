"""Named scenarios (``hindsight synth --scenario NAME``) and multi-bundle helpers.

- ``baseline``: a healthy host, no incident.
- ``<kind>`` (every incident kind): that incident about a fifth into the capture with its
  default duration, and its negative control later on.
- ``demo``: periodic checkpoint stalls and a CPU-starved data loader (like the real
  ``samples/h200-checkpoint-stall``), on a longer timeline.
- ``mixed``: one incident of several kinds, spread over the capture.

`fleet` makes the specs of N hosts of one job where one host (the straggler) has an
incident (issue 9: fleet view); `before_after` the pair for ``hindsight diff``.
"""

from __future__ import annotations

from dataclasses import replace

from analyzer.synth.incidents import KINDS
from analyzer.synth.spec import Incident, Spec, SpecError


def _fit(kind: str, at: float, seconds: float, *, control: bool = False) -> Incident:
    dur = KINDS[kind].dur_s
    if control and kind == "hung_task":
        dur = 60.0
    dur = min(dur, max(seconds * (0.45 if kind == "hung_task" else 0.4), 1.0))
    if control:  # a control never overlaps the incident before it: shorten it instead
        dur = max(min(dur, seconds - at - 5), 1.0)
    if kind == "hung_task" and not control and dur < 121:
        raise SpecError("the hung_task scenario needs a capture of at least 5 minutes")
    start = min(max(at, 0.0), max(seconds - dur - 1, 0.0))
    return Incident(kind, float(round(start)), float(round(dur)), {}, control)


def _single(kind: str, seconds: float) -> list[Incident]:
    first = _fit(kind, seconds * 0.2, seconds)
    ctrl_at = max(first.end_s + 0.1 * seconds, seconds * 0.65)
    out = [first]
    if ctrl_at + 10 < seconds:
        out.append(_fit(kind, ctrl_at, seconds, control=True))
    return out


def _mixed(seconds: float) -> list[Incident]:
    plan = ["checkpoint_stall", "cpu_throttle", "gpu_xid", "net_errors", "irq_hotspot"]
    slot = seconds / len(plan)
    return [_fit(k, i * slot + 0.1 * slot, seconds) for i, k in enumerate(plan)]


def _demo(seconds: float) -> list[Incident]:
    return [
        Incident("checkpoint_stall", round(seconds * 0.05), round(seconds * 0.55), {"every_s": 40}),
        Incident("gpu_starvation", round(seconds * 0.7), round(seconds * 0.15), {}),
    ]


SCENARIOS = {
    "baseline": "a healthy host, no incident",
    "demo": "checkpoint stalls + a CPU-starved loader",
    "mixed": "five different incidents spread over the capture",
} | {k: f"{KINDS[k].doc} (+ its negative control)" for k in KINDS}


def scenario(name: str, seconds: float) -> list[Incident]:
    """The incidents of scenario ``name`` for a capture of ``seconds``."""
    name = name.replace("-", "_")
    if name == "baseline":
        return []
    if name == "demo":
        return _demo(seconds)
    if name == "mixed":
        return _mixed(seconds)
    if name in KINDS:
        return _single(name, seconds)
    raise SpecError(f"unknown scenario {name!r}; scenarios: {', '.join(SCENARIOS)}")


def fleet(
    base: Spec, hosts: int, straggler_kind: str = "gpu_throttle", straggler: int = 0
) -> list[Spec]:
    """``hosts`` specs of one job (hostnames ``<base>-NN``, seeds base.seed + i); host
    ``straggler`` also gets ``straggler_kind`` over the middle half of the capture."""
    out = []
    for i in range(hosts):
        inc = (
            [Incident(straggler_kind, round(base.seconds * 0.25), round(base.seconds * 0.5))]
            if i == straggler
            else []
        )
        out.append(
            replace(base, hostname=f"{base.hostname}-{i:02d}", seed=base.seed + i, incidents=inc)
        )
    return out


def before_after(base: Spec, kind: str) -> tuple[Spec, Spec]:
    """The same host with ``kind`` (before the fix) and without it (after), a day apart."""
    from datetime import timedelta

    before = replace(base, incidents=_single(kind, base.seconds)[:1])
    after = replace(base, incidents=[], seed=base.seed + 1000, start=base.start + timedelta(days=1))
    return before, after


def build_spec(
    *,
    cpus: int,
    gpus: int,
    disks: int,
    nics: int,
    seconds: float | None,
    hours: float | None,
    interval: int,
    seed: int,
    hostname: str,
    start: str | None,
    noise: float,
    bpf: bool,
    incidents: list[str],
    controls: list[str],
    scenario_name: str | None,
    iostat_json: bool = False,
    irq_interval: int | None = None,
) -> Spec:
    """The `Spec` of a ``hindsight synth`` command line (``--hours`` and ``--seconds``
    are exclusive; a scenario adds its incidents to the ``--incident`` ones).
    ``iostat_json`` / ``irq_interval`` are the capture's ``--iostat-json`` and
    ``--irq-interval``."""
    from datetime import datetime

    from analyzer.synth.spec import DEFAULT_START, parse_incident

    if seconds is not None and hours is not None:
        raise SpecError("give --hours or --seconds, not both")
    total = (
        round(hours * 3600) if hours is not None else round(seconds if seconds is not None else 600)
    )
    when = DEFAULT_START
    if start:
        try:
            when = datetime.fromisoformat(start.replace("Z", "+00:00"))
        except ValueError as e:
            raise SpecError(f"--start: not an ISO time: {start!r}") from e
    incs = [parse_incident(x) for x in incidents] + [
        parse_incident(x, control=True) for x in controls
    ]
    if scenario_name:
        incs += scenario(scenario_name, total)
    return Spec(
        cpus=cpus,
        gpus=gpus,
        disks=disks,
        nics=nics,
        seconds=total,
        interval=interval,
        seed=seed,
        start=when,
        hostname=hostname,
        incidents=incs,
        noise=noise,
        bpf=bpf,
        iostat_json=iostat_json,
        irq_interval=irq_interval,
    )
