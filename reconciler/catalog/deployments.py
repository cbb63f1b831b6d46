"""Pure logic: releases resolved into deployments — for each (release, stage, fleet), the
recipe with the release's overrides and topology applied."""

from __future__ import annotations

from pydantic import ValidationError

from reconciler.spec.base import Spec
from reconciler.spec.overrides import apply_overrides
from reconciler.spec.recipe import Recipe, total_gpus
from reconciler.spec.repo import Repo
from reconciler.spec.scaling import ReplicaBounds, bounded_topology


class Deployment(Spec):
    release: str
    stage: str
    fleet: str
    served_model: str  # the name clients ask for
    weights: str  # hf://org/repo@commit, file:///path or s3://…
    recipe: Recipe  # overrides and the release's topology applied (bounds: at their min)
    bounds: ReplicaBounds | None = None  # elastic: the bot chooses the count between them
    stage_fleets: int = 1  # the fleets of its stage (a stage's pool shares the bounds over them)

    @property
    def fleet_bounds(self) -> ReplicaBounds | None:
        """What this fleet keeps of the bounds: them, or in a stage's pool one replica and
        the rest up to what the other fleets' one each leaves."""
        return self.bounds.on_fleet(self.stage_fleets) if self.bounds is not None else None

    @property
    def gpus(self) -> int:
        return total_gpus(self.recipe.topology)


def release_recipe(repo: Repo, release: str, recipe: str) -> Recipe | None:
    """A recipe as a release runs it: the release's overrides and topology applied. None
    when either is unknown or the overrides do not fit (validation reports it)."""
    found, base = repo.releases.get(release), repo.recipes.get(recipe)
    if found is None or base is None:
        return None
    try:
        return apply_overrides(base, found.release.overrides, found.release.topology)
    except ValidationError:
        return None


def deployments(repo: Repo) -> list[Deployment]:
    """Every (release, stage, fleet) of a repository that passed validation."""
    found = []
    for name, release in sorted(repo.releases.items()):
        body = release.release
        for stage in release.stages:
            for fleet in stage.fleets:
                recipe = release_recipe(repo, name, release.recipe_for(stage, fleet))
                if recipe is None:
                    continue  # validation reports it; nothing to deploy
                bounds = release.bounds_for(stage)
                on_fleet = bounds.on_fleet(len(stage.fleets)) if bounds is not None else None
                recipe = recipe.model_copy(
                    update={"topology": bounded_topology(recipe.topology, on_fleet)}
                )
                found.append(
                    Deployment(
                        release=name,
                        stage=stage.name,
                        fleet=fleet,
                        served_model=body.model,
                        weights=body.weights,
                        recipe=recipe,
                        bounds=bounds,
                        stage_fleets=len(stage.fleets),
                    )
                )
    return found


def declared_free_gpus(repo: Repo, fleet: str) -> int:
    """GPUs of a fleet that no release declares and that are not kept for trials."""
    spec = repo.fleets[fleet]
    used = sum(d.gpus for d in deployments(repo) if d.fleet == fleet)
    return max(spec.gpus - spec.trial_gpus - used, 0)
