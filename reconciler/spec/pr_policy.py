"""Pure logic: what a pull request proposes for the bot to run, judged against the trusted PR
policy (policies/pr.yaml): one problem at the `path:line:col` of each refused field, naming
the policy rule that refuses it.

Every recipe, every release and every catalog model of the repository is judged, not only
what the pull request changed: any of them can become a trial (a recipe is benched on each
fleet of its hardware; a release's overrides merge into its recipes). Each text field of a
recipe or a release is either judged here (`RECIPE_JUDGED`, `RELEASE_JUDGED`) or listed as
inert (`RECIPE_INERT`, `RELEASE_INERT`: names checked elsewhere, enums, prose); a text field
in neither — one added to the models later — is refused until someone lists it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.errors import Problem
from reconciler.spec.fleet import Fleet
from reconciler.spec.policy import PrPolicy
from reconciler.spec.pr_rules import arg_refusals, image_refusal, weights_refusal
from reconciler.spec.problems import dotted
from reconciler.spec.repo import Repo

Loc = tuple[str | int, ...]
# (where under the judged field, why, rule)
Finding = tuple[Loc, str, str]


@dataclass(frozen=True)
class Judging:
    """What a judge needs besides the value: the policy, the images always allowed (the
    engines' official ones), and each fleet the value may reach with its weights roots."""

    policy: PrPolicy
    images: tuple[str, ...]
    roots: Mapping[str, Sequence[str]]


def _image(value: Any, judging: Judging) -> list[Finding]:
    allowed = (*judging.images, *judging.policy.images)
    why = image_refusal(str(value), allowed) if value is not None else None
    return [((), why, "images")] if why else []


def _weights(value: Any, judging: Judging) -> list[Finding]:
    if value is None:
        return []
    why = weights_refusal(str(value), judging.policy.weights, judging.roots)
    return [((), why, "weights")] if why else []


def _args(value: Any, judging: Judging) -> list[Finding]:
    if not isinstance(value, list):
        return []  # not a list of flags: the spec checks refuse it
    args = [str(a) for a in value]
    found = arg_refusals(args, judging.policy.refused_flags)
    return [((index,), why, "refused_flags") for index, why in found]


Judge = Callable[[Any, Judging], list[Finding]]

RECIPE_JUDGED: dict[Loc, Judge] = {
    ("engine", "image"): _image,
    ("args",): _args,
    ("settings", "speculative", "draft_model"): _weights,
}
RECIPE_INERT: frozenset[Loc] = frozenset(
    {
        ("id",),
        ("model",),
        ("engine", "name"),
        ("engine", "version"),
        ("hardware",),
        ("topology",),
        ("settings", "dtype"),
        ("settings", "quantization"),
        ("settings", "kv_cache", "dtype"),
        ("settings", "kv_cache", "offload"),
        ("settings", "speculative", "method"),
        ("description",),
        ("source",),
    }
)
RELEASE_JUDGED: dict[Loc, Judge] = {("weights",): _weights}
# replicas: bounds, and the name of a scaling policy of the trusted policies/scaling.yaml
RELEASE_INERT: frozenset[Loc] = frozenset({("model",), ("recipe",), ("topology",), ("replicas",)})


def _walk(
    data: Any, at: Loc, judged: Mapping[Loc, Judge], inert: frozenset[Loc], judging: Judging
) -> Iterator[Finding]:
    """Each finding under `data` (a recipe's or a release body's values, or overrides),
    located relative to it. A text leaf no table names is refused (fail closed)."""
    judge = judged.get(at)
    if judge is not None:
        for where, why, rule in judge(data, judging):
            yield (*at, *where), why, rule
    elif at in inert:
        return
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _walk(value, (*at, str(key)), judged, inert, judging)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _walk(value, (*at, index), judged, inert, judging)
    elif isinstance(data, str):
        yield at, f"{data!r}: a field the PR policy does not judge yet", "unjudged"


def _roots(fleets: Mapping[str, Fleet], names: Sequence[str]) -> dict[str, Sequence[str]]:
    return {name: fleets[name].weights.roots for name in sorted(set(names)) if name in fleets}


def _problems(repo: Repo, path: str, base: Loc, found: Iterator[Finding]) -> list[Problem]:
    problems = []
    for where, why, rule in found:
        loc = (*base, *where)
        message = f"{dotted(loc)}: {why} (pr policy rule {rule})"
        problems.append(repo.problem(path, loc, message))
    return problems


def _recipe_problems(repo: Repo, judging: Judging) -> list[Problem]:
    problems = []
    for recipe_id, recipe in sorted(repo.recipes.items()):
        path = repo.origin[f"recipe:{recipe_id}"]
        runs_on = [n for n, fleet in repo.fleets.items() if repo.recipe_runs_on(recipe, fleet)]
        here = Judging(judging.policy, judging.images, _roots(repo.fleets, runs_on))
        values = recipe.model_dump(mode="json", exclude_unset=True)
        found = _walk(values, (), RECIPE_JUDGED, RECIPE_INERT, here)
        problems += _problems(repo, path, ("recipe",), found)
    return problems


def _release_problems(repo: Repo, judging: Judging) -> list[Problem]:
    problems = []
    for name, release in sorted(repo.releases.items()):
        path = repo.origin[f"release:{name}"]
        fleets = [fleet for stage in release.stages for fleet in stage.fleets]
        here = Judging(judging.policy, judging.images, _roots(repo.fleets, fleets))
        body = release.release.model_dump(mode="json", exclude_unset=True)
        overrides = body.pop("overrides", {})
        found = _walk(body, (), RELEASE_JUDGED, RELEASE_INERT, here)
        problems += _problems(repo, path, ("release",), found)
        found = _walk(overrides, (), RECIPE_JUDGED, RECIPE_INERT, here)
        problems += _problems(repo, path, ("release", "overrides"), found)
    return problems


def _model_problems(repo: Repo, judging: Judging) -> list[Problem]:
    """A catalog model's Hugging Face repository names a trial's weights when no release pins
    them: its form and organisation are judged (its pin is the trial's to require)."""
    problems = []
    rule = judging.policy.weights.model_copy(update={"hf": "pinned"})  # its form only
    for index, arch in enumerate(repo.models.values()):
        if arch.hf_repo is None:
            continue
        why = weights_refusal(f"hf://{arch.hf_repo}", rule, {}, pinned=False)
        if why is not None:
            loc: Loc = ("models", index, "hf_repo")
            message = f"{dotted(loc)}: {why} (pr policy rule weights)"
            problems.append(repo.problem("catalog/models.yaml", loc, message))
    return problems


def pr_policy_problems(
    repo: Repo, policy: PrPolicy | None = None, official_images: Sequence[str] = ()
) -> list[Problem]:
    """Every field of `repo` that `policy` (default: the repository's own policies/pr.yaml,
    which a pull request's paths read from the trusted ref) refuses, with the fleets' weights
    roots as `repo` has them. `official_images`: the engines' own images, always allowed."""
    judging = Judging(policy or repo.policies.pr, tuple(official_images), {})
    return (
        _recipe_problems(repo, judging)
        + _release_problems(repo, judging)
        + _model_problems(repo, judging)
    )
