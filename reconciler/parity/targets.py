"""Adapter: what `denv parity run` compares — a URL, a release's stage as it runs now (its
endpoint, from the desired state and a readiness check), or a recipe deployed for the run on
trial GPUs of the reference's fleet, with the reference's weights, and torn down after."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from reconciler.errors import NotFound, UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.reconcile import probes
from reconciler.reconcile.snapshot import snapshot
from reconciler.reconcile.source import GitSource
from reconciler.trials.deployment import new_trial_id, trial_deployment


@dataclass(frozen=True)
class Reference:
    url: str
    fleet: str | None = None  # where a candidate recipe is deployed
    weights: str | None = None  # what it loads: the reference's weights


def is_url(text: str) -> bool:
    return "://" in text


def stage_reference(source: GitSource, drivers: Drivers, name: str) -> Reference:
    """RELEASE/STAGE: the endpoint of the stage's first fleet, which must be ready."""
    release, _, stage = name.partition("/")
    if not release or not stage:
        raise UsageError(f"--reference {name}: give a URL or RELEASE/STAGE (e.g. chat-8b/canary)")
    snap = snapshot(source, drivers)
    found = [d for d in snap.desired.deployments if (d.release, d.stage) == (release, stage)]
    if not found:
        raise NotFound(f"{name}: no such stage running (see `denv status`)")
    first = found[0]
    if first.endpoint is None or not all(probes.is_ready(u.unit) for u in first.units):
        raise UsageError(f"{name} on {first.fleet} is not ready (see `denv status`)")
    weights = snap.repo.releases[release].release.weights
    return Reference(url=first.endpoint, fleet=first.fleet, weights=weights)


@contextlib.contextmanager
def candidate_endpoint(
    source: GitSource | None,
    drivers: Drivers,
    candidate: str,
    reference: Reference,
    fleet: str | None,
    say: Callable[[str], None],
) -> Iterator[str]:
    """A URL as it is; a recipe id deployed on trial GPUs for the `with` block."""
    if is_url(candidate):
        yield candidate
        return
    assert source is not None
    repo = source.repo_at(source.resolve())
    recipe = repo.recipes.get(candidate)
    if recipe is None:
        raise NotFound(f"--candidate {candidate}: neither a URL nor a recipe id")
    target = fleet or reference.fleet
    if target is None or target not in repo.fleets:
        raise UsageError("--candidate RECIPE needs --fleet FLEET (or a RELEASE/STAGE reference)")
    with trial_deployment(
        repo,
        recipe,
        repo.fleets[target],
        drivers=drivers,
        trial=new_trial_id(dt.datetime.now(dt.UTC)),
        weights=reference.weights,
        secrets=None,  # the repository's own recipe, on its own branch: the fleet's token
        purpose="parity",
        say=say,
    ) as trial:
        yield trial.url
