"""Pure logic: a rollback's pull request (`<!-- denv:rollback -->`, templates/rollback.md)
from a `RollbackView`: the alarm that fired and what denv did to each stage."""

from __future__ import annotations

from datetime import UTC

from reconciler.forge.render import Fill, short
from reconciler.forge.views import RollbackView


def render(view: RollbackView, fill: Fill) -> str:
    return fill(
        release=view.release,
        stage=view.stage,
        to_revision=short(view.to_revision),
        from_revision=short(view.from_revision),
        at=view.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        alarm=view.alarm,
        fleets=", ".join(f"`{f}`" for f in view.fleets),
        observed=view.observed,
        threshold=view.threshold,
        stages="\n".join(f"- {line}" for line in view.stages) or "- —",
    )
