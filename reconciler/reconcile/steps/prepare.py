"""Adapter: step 0, prepare — every host that starts or replaces a unit makes its runtime and
weights ready (reconciler.fleet.prepare) before any replica is stopped; the deployments with a
host that could not are left as they run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.prepare import JobState, prepare_hosts, prepare_payload, weights_request
from reconciler.reconcile.plan import Action, ActionKind, Plan
from reconciler.reconcile.steps.context import Context, deployment_key

# (fleet, host, weights) -> the actions that need it ready
Wanted = dict[tuple[str, str, str | None], list[Action]]


def prepare(ctx: Context, plan: Plan) -> set[DeploymentKey]:
    """Runtimes and weights ready on every host before anything is stopped; the
    deployments with a host that could not prepare are left as they run (returned)."""
    wanted = _wanted(plan)
    if not wanted:
        return set()
    asks, payloads = {}, {}
    for (fleet, host, weights), actions in sorted(wanted.items(), key=str):
        key = _job(host, weights)
        needs = [a.desired.need for a in actions if a.desired and a.desired.need]
        spec = ctx.repo.fleets[fleet]
        payloads[key] = prepare_payload(needs, weights_request(spec, weights, secrets=None), host)
        asks[key] = (host, functools.partial(_ask, ctx, fleet, host))
    parallel = min(ctx.repo.fleets[f].weights.parallel for f, _, _ in wanted)
    done, errors = prepare_hosts(asks, payloads, parallel, _progress(ctx), stopping=ctx.stopping)
    return _blocked(ctx, wanted, done, errors)


def _ask(ctx: Context, fleet: str, host: str, payload: Mapping[str, Any], wait: float) -> Any:
    return ctx.ask(fleet, host, lambda driver: driver.prepare(host, payload, wait))


def _wanted(plan: Plan) -> Wanted:
    """The actions that start something with a runtime need or weights, by where and what."""
    wanted: Wanted = {}
    for action in plan.actions:
        unit = action.desired
        if action.kind == ActionKind.KEEP or action.kind == ActionKind.STOP or unit is None:
            continue
        if unit.need is not None or unit.weights is not None:
            wanted.setdefault((action.fleet, action.host, unit.weights), []).append(action)
    return wanted


def _job(host: str, weights: str | None) -> str:
    """A host's prepare job, as progress and errors name it."""
    return f"{host} {weights or ''}".strip()


def _progress(ctx: Context) -> Callable[[str, JobState], None]:
    """One line per step of each host's job."""
    shown: dict[str, str] = {}

    def progress(key: str, state: JobState) -> None:
        line = f"{state.step} {state.bytes_done / 1e9:.1f}/{state.bytes_total / 1e9:.1f} GB"
        if shown.get(key) != state.step:  # one line per step and host
            shown[key] = state.step
            ctx.tell(f"prepare {key}: {line}")

    return progress


def _blocked(
    ctx: Context, wanted: Wanted, done: Mapping[str, JobState], errors: Mapping[str, str]
) -> set[DeploymentKey]:
    """The deployments with a job that failed, or that SIGTERM left running, reported."""
    blocked: set[DeploymentKey] = set()
    for (_, host, weights), actions in wanted.items():
        key = _job(host, weights)
        error = errors.get(key)
        if error is not None:
            ctx.report.error(f"{error}; nothing of it was stopped or started")
        elif key not in done:
            ctx.report.wait(
                f"prepare {key}: stopped following it (SIGTERM); its job goes on on the "
                f"host and the next pass resumes it"
            )
        else:
            continue
        blocked |= {deployment_key(a) for a in actions}
    return blocked
