"""Adapter: the reconciler's hooks for a bot that runs stages — after each pass, deploy-time
parity then the rollout (which reads parity's verdicts); before each plan, the rollout's
overrides (a stage at a rejected revision runs its last good one) and the autoscaler's counts
of elastic stages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.errors import DenvError
from reconciler.forge.protocol import Forge
from reconciler.parity.deploytime import deploy_time_parity
from reconciler.reconcile.loop import Adjust, Checks, Scale
from reconciler.reconcile.revisions import Stages
from reconciler.reconcile.snapshot import Snapshot
from reconciler.reconcile.source import GitSource
from reconciler.rollout.autoscale import Autoscaler
from reconciler.rollout.bot import RolloutBot
from reconciler.rollout.revisions import Revisions, adjust_stages


def bot_hooks(
    source: GitSource, forge: Callable[[], Forge], say: Callable[[str], None]
) -> tuple[Checks, Adjust, Scale]:
    """(checks, adjust, scale) for `Reconciler`; what they keep is {'parity': …, 'rollout': …,
    'scaling': …}."""
    parity = deploy_time_parity(source, say)
    revisions = Revisions(source)
    bot = RolloutBot(revisions, forge, say)
    scaler = Autoscaler(source, say)

    def checks(snap: Snapshot, previous: dict[str, Any]) -> dict[str, Any]:
        found = parity(snap, previous.get("parity") or {})
        kept = previous.get("rollout") or {}
        try:
            kept = bot.check(snap, kept, found)
        except DenvError as exc:  # the rollout waits for the next pass; what it kept stays
            say(f"rollout: {exc}")
        return {"parity": found, "rollout": kept, "scaling": scaler.state(snap.desired)}

    def adjust(stages: Stages, kept: dict[str, Any]) -> Stages:
        return adjust_stages(revisions, stages, kept)

    return checks, adjust, scaler
