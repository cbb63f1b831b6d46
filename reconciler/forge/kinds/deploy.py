"""Pure logic: the description of a pull request `denv deploy` opens (`<!-- denv:deploy -->`),
from a `DeployView`: the new release and where it comes from."""

from __future__ import annotations

from reconciler.forge.render import Fill
from reconciler.forge.views import DeployView


def render(view: DeployView, fill: Fill) -> str:
    return fill(
        release=view.release,
        origin=view.origin,
        recipe=view.recipe,
        fleet=view.fleet,
        weights=view.weights,
    )
