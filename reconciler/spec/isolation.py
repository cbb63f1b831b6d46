"""Pure logic: what a broken file blocks — the rule the bot reads every revision of the
default branch by (reconcile/source.py), so that one invalid file holds only what reads it.

`denv validate`, and a pull request's revisions, stay strict: any error refuses the whole
revision. The bot's pass on the default branch cannot refuse what is already merged; it holds
what the broken file decides and goes on with the rest (docs/files.md, "When a file on the
default branch is invalid"):

| an error in | holds |
|---|---|
| `fleets/<name>.yaml` | every deployment on that fleet |
| `releases/<name>/...` | that release, every stage |
| `recipes/<model>/<recipe>.yaml` | the releases that run that recipe |
| `results/...`, `catalog/offers.yaml`, `catalog/workloads.yaml` | rankings and bench figures |
| `catalog/hardware.yaml`, `catalog/models.yaml`, `policies/...`, anything else | everything |

What is held is taken out of the loaded `Repo` (so nothing plans from it) and named in
`Repo.held` with its problems; the errors that hold everything are returned.
"""

from __future__ import annotations

from reconciler.errors import Problem
from reconciler.spec.repo import Repo

RANKING = "ranking"  # results, offers, workloads: what `denv bench`, rankings and PR figures read
EVERYTHING = "everything"
_RANKING_FILES = ("results/", "catalog/offers.yaml", "catalog/workloads.yaml")


def holds(path: str) -> str:
    """What an error in the file at `path` holds: 'fleet:<name>', 'release:<name>',
    'recipe:<id>', RANKING or EVERYTHING."""
    parts = path.split("/")
    if path.startswith(_RANKING_FILES):
        return RANKING
    if parts[0] == "fleets" and len(parts) == 2 and path.endswith(".yaml"):
        return f"fleet:{parts[1].removesuffix('.yaml')}"
    if parts[0] == "releases" and len(parts) >= 3:
        return f"release:{parts[1]}"
    if parts[0] == "recipes" and len(parts) == 3 and path.endswith(".yaml"):
        return f"recipe:{parts[1]}/{parts[2].removesuffix('.yaml')}"
    return EVERYTHING


def isolate(repo: Repo) -> list[Problem]:
    """Take out of `repo` what its errors hold (`Repo.held`: what -> the problems holding
    it; a release that runs a held recipe is held by the recipe's); the errors that hold
    everything, [] when the rest of the revision can be used."""
    held: dict[str, list[Problem]] = {}
    for problem in repo.errors:
        held.setdefault(holds(problem.path), []).append(problem)
    everything = held.pop(EVERYTHING, [])
    recipes = {key.removeprefix("recipe:") for key in held if key.startswith("recipe:")}
    for name, release in repo.releases.items():
        used = {release.release.recipe} | {
            recipe for stage in release.stages for recipe in stage.recipes.values()
        }
        for recipe in sorted(used & recipes):
            held.setdefault(f"release:{name}", []).extend(held[f"recipe:{recipe}"])
    for key in held:
        kind, _, name = key.partition(":")
        if kind == "fleet":
            repo.fleets.pop(name, None)
        elif kind == "release":
            repo.releases.pop(name, None)
            repo.promotions.pop(name, None)
        elif kind == "recipe":
            repo.recipes.pop(name, None)
        elif key == RANKING:
            repo.results.clear()  # a ranking from some of the results would mislead
    repo.held = {key: tuple(problems) for key, problems in held.items()}
    return everything


def held_lines(repo: Repo) -> list[str]:
    """One line per problem that holds part of `repo`, saying what it holds."""
    what: dict[Problem, list[str]] = {}
    for key, problems in sorted(repo.held.items()):
        for problem in problems:
            what.setdefault(problem, []).append(_what(key))
    return [f"{problem} (holds {'; '.join(held)})" for problem, held in sorted(what.items())]


def _what(key: str) -> str:
    kind, _, name = key.partition(":")
    if key == RANKING:
        return "rankings and bench figures; every deployment goes on"
    if kind == "fleet":
        return f"fleet {name}: what runs there is left as it runs"
    if kind == "release":
        return f"release {name}: what it runs is left as it runs"
    return f"recipe {name}"
