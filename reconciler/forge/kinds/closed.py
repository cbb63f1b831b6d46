"""Pure logic: the comment a pull request is closed with (`<!-- denv:closed -->`), from a
`ClosedView`: why denv closed it without merging."""

from __future__ import annotations

from reconciler.forge.render import Fill
from reconciler.forge.views import ClosedView


def render(view: ClosedView, fill: Fill) -> str:
    return fill(reason=view.reason)
