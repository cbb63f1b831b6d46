"""Models: a release and its stages (releases/<name>/denv.yaml) and the bot's pins
(releases/<name>/promotions.yaml)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, field_validator

from reconciler.spec.base import HEX_COMMIT, Duration, RecipeId, Slug, Spec
from reconciler.spec.recipe import Topology
from reconciler.spec.scaling import ReplicaBounds

_WEIGHTS = re.compile(
    r"^(hf://[A-Za-z0-9._-]+/[A-Za-z0-9._-]+(@[A-Za-z0-9._/-]+)?|file:///\S+|s3://\S+)$"
)


def weights_commit(weights: str) -> str | None:
    """The pinned commit of an `hf://org/repo@commit` reference, else None."""
    if not weights.startswith("hf://") or "@" not in weights:
        return None
    revision = weights.rsplit("@", 1)[1]
    return revision if HEX_COMMIT.match(revision) else None


class Stage(Spec):
    name: Slug
    fleets: list[Slug] = Field(min_length=1)
    bake: Duration | None = None
    alarms: list[Slug] = []
    recipes: dict[Slug, RecipeId] = {}  # per-fleet recipe, else the release's
    approvals: NonNegativeInt | None = None  # default from policies/gates.yaml
    promotion: Literal["manual", "auto"] = "manual"
    # Elastic: the bot keeps between min and max replicas on each fleet (docs/scaling.md);
    # absent: the release's bounds, else the topology's fixed count.
    replicas: ReplicaBounds | None = None


class ReleaseBody(Spec):
    model: Slug  # the name clients ask for (served model name)
    weights: str = Field(description="hf://org/repo@commit, file:///path or s3://bucket/key")
    recipe: RecipeId
    # A partial recipe (engine, settings, args): checked field by field against the recipe.
    overrides: dict[str, Any] = {}
    topology: Topology | None = None  # replaces the recipe's topology
    replicas: ReplicaBounds | None = None  # every stage's bounds, unless the stage gives its own

    @field_validator("weights")
    @classmethod
    def _weights_uri(cls, value: str) -> str:
        if not _WEIGHTS.match(value):
            raise ValueError(
                f"'{value}' is not a weights reference (hf://org/repo@commit, file:///path, s3://…)"
            )
        return value


class Release(Spec):
    release: ReleaseBody
    stages: list[Stage] = Field(min_length=1)

    def recipe_for(self, stage: Stage, fleet: str) -> str:
        """The recipe `stage` runs on `fleet`: the stage's own for that fleet, else the
        release's."""
        return stage.recipes.get(fleet, self.release.recipe)

    def bounds_for(self, stage: Stage) -> ReplicaBounds | None:
        """The replica bounds of `stage`: its own, else the release's; None: a fixed count."""
        return stage.replicas or self.release.replicas


class Pin(Spec):
    revision: str = Field(pattern=r"^[0-9a-f]{40}$")
    at: dt.datetime | None = None
    by: str | None = None
    pr: int | None = None


class Rejection(Spec):
    revision: str = Field(pattern=r"^[0-9a-f]{40}$")
    reason: str
    at: dt.datetime | None = None
    # The stage it was rolled back on: that stage no longer runs it and no promotion pins it
    # again; a later stage already running it keeps it until its own alarms fire. Absent (an
    # entry written by hand, or before stages were named): no stage runs it.
    stage: Slug | None = None

    def holds_for(self, stage: str) -> bool:
        return self.stage is None or self.stage == stage


class Promotions(Spec):
    promotions: dict[Slug, Pin] = {}  # stage name -> the release revision it runs
    rejected: list[Rejection] = []
