"""Pure logic: what a pull request asks `denv pr bench` to measure — each release or recipe it
changes, on each fleet it targets, and what it is compared with (the current release: the
same thing as the base branch has it).

- A release counts when its first stage (the one that follows `main`) resolves to another
  recipe or other weights on a fleet than at the base; a new release has nothing to compare
  with. Later stages run pinned revisions: promotion, not this pull request, changes them.
- A recipe counts when it is new or changed and no release's first stage runs it (those are
  benched as the release). It runs on every fleet with trial GPUs whose hardware it lists,
  against the release serving the same model there at the base, else the recipe as it was.
"""

from __future__ import annotations

from typing import Literal

from reconciler.catalog.deployments import Deployment, deployments
from reconciler.spec.base import Spec
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.trials.plan import default_weights


class Side(Spec):
    """One side of a comparison: what is deployed on trial GPUs, and how it is named."""

    label: str  # e.g. "chat-8b" or "llama-3.1-8b/vllm@2"
    recipe: Recipe  # resolved: the release's overrides and topology applied
    weights: str


class BenchSubject(Spec):
    kind: Literal["release", "recipe"]
    name: str  # release name or recipe id
    fleet: str
    candidate: Side  # as the pull request's head has it
    current: Side | None  # as the base has it; None: nothing to compare with

    @property
    def key(self) -> str:
        return f"{self.name} on {self.fleet}"


def _first_stages(repo: Repo) -> dict[tuple[str, str], Deployment]:
    """(release, fleet) -> the deployment of the release's first stage there."""
    found: dict[tuple[str, str], Deployment] = {}
    for deployment in deployments(repo):
        first = repo.releases[deployment.release].stages[0].name
        if deployment.stage == first:
            found[(deployment.release, deployment.fleet)] = deployment
    return found


def _side(deployment: Deployment) -> Side:
    return Side(label=deployment.release, recipe=deployment.recipe, weights=deployment.weights)


def _release_subjects(base: dict[tuple[str, str], Deployment], head: Repo) -> list[BenchSubject]:
    subjects = []
    for (release, fleet), now in sorted(_first_stages(head).items()):
        before = base.get((release, fleet))
        if before is not None and (before.recipe, before.weights) == (now.recipe, now.weights):
            continue
        subjects.append(
            BenchSubject(
                kind="release",
                name=release,
                fleet=fleet,
                candidate=_side(now),
                current=_side(before) if before is not None else None,
            )
        )
    return subjects


def _recipe_current(
    recipe: Recipe, fleet: str, base_repo: Repo | None, base: dict[tuple[str, str], Deployment]
) -> Side | None:
    serving = [d for (_, f), d in sorted(base.items()) if f == fleet]
    for deployment in serving:
        if deployment.recipe.model == recipe.model:
            return _side(deployment)
    before = base_repo.recipes.get(recipe.id) if base_repo is not None else None
    if before is None or base_repo is None:
        return None
    return Side(label=before.id, recipe=before, weights=default_weights(base_repo, before))


def _recipe_subjects(
    base_repo: Repo | None, base: dict[tuple[str, str], Deployment], head: Repo
) -> list[BenchSubject]:
    in_releases = {d.recipe.id for d in _first_stages(head).values()}
    subjects = []
    for recipe_id, recipe in sorted(head.recipes.items()):
        before = base_repo.recipes.get(recipe_id) if base_repo is not None else None
        if recipe == before or recipe_id in in_releases:
            continue
        for name, fleet in sorted(head.fleets.items()):
            if fleet.trial_gpus <= 0 or not head.recipe_runs_on(recipe, fleet):
                continue
            current = _recipe_current(recipe, name, base_repo, base)
            # parity compares recipes on the same weights: the current release's pinned ones
            weights = current.weights if current is not None else default_weights(head, recipe)
            subjects.append(
                BenchSubject(
                    kind="recipe",
                    name=recipe_id,
                    fleet=name,
                    candidate=Side(label=recipe_id, recipe=recipe, weights=weights),
                    current=current,
                )
            )
    return subjects


def bench_subjects(base: Repo | None, head: Repo) -> list[BenchSubject]:
    """What the head changes against `base` (None: the base has no valid denv files), releases
    first, each with the fleet it is benched on and what it is compared with."""
    before = _first_stages(base) if base is not None else {}
    return _release_subjects(before, head) + _recipe_subjects(base, before, head)
