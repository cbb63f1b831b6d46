"""Pure logic: the registry of PR comment kinds, and the one path every comment takes.

A kind is a name — its hidden marker, `<!-- denv:NAME -->`, which the next run finds and
edits in place — with its template (whose first line is that marker), the view it is filled
from, and the function that fills it (`reconciler/forge/kinds/<name>.py`). `KINDS` holds one
entry per kind: a new kind is its template, its module (view and renderer) and one entry here.
`render(view)` finds the kind by the view's type and fills its template; `post` hands the
body to the forge it is given, under the kind's marker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib.resources.abc import Traversable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from reconciler.forge.kinds import (
    bench,
    candidate,
    closed,
    commands,
    deploy,
    parity,
    plan,
    promotion,
    rollback,
)
from reconciler.forge.markers import read_marker
from reconciler.forge.protocol import Forge
from reconciler.forge.render import TEMPLATES, Fill, fill
from reconciler.forge.views import (
    BenchView,
    CandidateView,
    ClosedView,
    DeployView,
    Parities,
    PlanView,
    PromotionView,
    RollbackView,
)

V = TypeVar("V", bound=BaseModel)


@dataclass(frozen=True)
class CommentKind(Generic[V]):
    view: type[V]  # what it is rendered from: one view type, one kind
    template: Traversable  # its first line is the kind's marker
    render: Callable[[V, Fill], str]


# name (the marker) -> the kind
KINDS: dict[str, CommentKind[Any]] = {
    "plan": CommentKind(PlanView, TEMPLATES / "plan.md", plan.render),
    "bench": CommentKind(BenchView, TEMPLATES / "bench.md", bench.render),
    "parity": CommentKind(Parities, TEMPLATES / "parity.md", parity.render),
    "commands": CommentKind(commands.CommandsView, TEMPLATES / "commands.md", commands.render),
    "candidate": CommentKind(CandidateView, TEMPLATES / "candidate.md", candidate.render),
    "promotion": CommentKind(PromotionView, TEMPLATES / "promotion.md", promotion.render),
    "rollback": CommentKind(RollbackView, TEMPLATES / "rollback.md", rollback.render),
    "deploy": CommentKind(DeployView, TEMPLATES / "deploy.md", deploy.render),
    "closed": CommentKind(ClosedView, TEMPLATES / "closed.md", closed.render),
}


def kind_of(view: BaseModel) -> str:
    """The name of the kind rendered from `view`'s type (ValueError for a type no kind has:
    a bug)."""
    for name, kind in KINDS.items():
        if type(view) is kind.view:
            return name
    raise ValueError(f"no comment kind is rendered from a {type(view).__name__}")


def render(view: BaseModel) -> str:
    """The comment of `view`'s kind, its marker first."""
    name = kind_of(view)
    kind = KINDS[name]
    body = kind.render(view, partial(fill, kind.template))
    if read_marker(body) != (name, 1):
        raise ValueError(f"the template of comment kind '{name}' does not start with its marker")
    return body


def post(forge: Forge, pr: int, view: BaseModel) -> list[int]:
    """Post `view`'s comment on pull request `pr`, or edit the one already there; its ids."""
    return forge.upsert_comment(pr, kind_of(view), render(view))
