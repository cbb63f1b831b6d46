"""Adapter: answer parity at deploy time. A stage that serves its release's weights with
different recipes on different fleets (a stage's per-fleet `recipes`) is checked once every
one of its deployments is ready: the parity suite of the stage's revision is sent to the first
fleet's endpoint (the reference) and to each other one. A failed or incomplete check marks
the stage degraded, which `denv status` shows and promotion respects. A result is kept (with
the bot's pass note) until the stage's revision or recipes change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.errors import DenvError
from reconciler.parity.suite import parse_suite
from reconciler.parity.suite_files import SUITES_DIR
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.snapshot import Snapshot
from reconciler.reconcile.source import GitSource

FAILING_SHOWN = 20  # failing prompt ids kept per check


def mixed_stages(snap: Snapshot) -> dict[str, list[DesiredDeployment]]:
    """'release/stage' -> its deployments, for stages that run more than one recipe."""
    stages: dict[str, list[DesiredDeployment]] = {}
    for deployment in snap.desired.deployments:
        stages.setdefault(f"{deployment.release}/{deployment.stage}", []).append(deployment)
    return {k: v for k, v in sorted(stages.items()) if len({d.recipe for d in v}) > 1}


def _ready(deployment: DesiredDeployment) -> bool:
    return bool(deployment.endpoint) and all(probes.is_ready(u.unit) for u in deployment.units)


def deploy_time_parity(
    source: GitSource, say: Callable[[str], None] = lambda message: None
) -> Callable[[Snapshot, dict[str, Any]], dict[str, Any]]:
    """The reconciler's after-pass check: 'release/stage' -> its parity state."""

    def check(snap: Snapshot, previous: dict[str, Any]) -> dict[str, Any]:
        results: dict[str, Any] = {}
        for key, deployments in mixed_stages(snap).items():
            fingerprint = [deployments[0].revision, *(d.recipe for d in deployments)]
            known = previous.get(key)
            if known and known.get("fingerprint") == fingerprint and known["state"] != "waiting":
                results[key] = known
                continue
            if not all(_ready(d) for d in deployments):
                results[key] = {"fingerprint": fingerprint, "state": "waiting", "degraded": False}
                continue
            say(f"parity {key}: {' vs '.join(d.fleet for d in deployments)}")
            results[key] = _run(source, snap, deployments) | {"fingerprint": fingerprint}
        return results

    return check


def _run(source: GitSource, snap: Snapshot, deployments: list[DesiredDeployment]) -> dict[str, Any]:
    # the runner's HTTP client (aiohttp) loads only when a check runs: every bot's start
    # would pay 0.2 s of CPU for it, a scale-up included
    from reconciler.parity.runner import run_parity

    policy = snap.repo.policies.gates.parity
    path = f"{SUITES_DIR}/{policy.suite}.jsonl"
    reference = deployments[0]
    found: dict[str, Any] = {"reference": f"{reference.fleet} ({reference.recipe})"}
    try:
        data = source.read(reference.revision, path)
        if data is None:
            raise DenvError(f"no parity suite {path} at {reference.revision[:12]}")
        suite = parse_suite(policy.suite, path, data)
        verdicts = [
            (other, run_parity(f"{reference.endpoint}/v1", f"{other.endpoint}/v1", suite, policy))
            for other in deployments[1:]
        ]
    except DenvError as exc:  # a suite that could not run completely is no pass
        return found | {"state": "error", "degraded": True, "error": str(exc)}
    failed = [(other, v) for other, v in verdicts if not v.ok]
    worst = min(verdicts, key=lambda pair: pair[1].passed)[1]
    return found | {
        "state": "failed" if failed else "passed",
        "degraded": bool(failed),
        "verdict": worst.headline,
        "candidates": {other.fleet: v.headline for other, v in verdicts},
        "failing": [o.id for _, v in failed for o in v.failures][:FAILING_SHOWN],
    }
