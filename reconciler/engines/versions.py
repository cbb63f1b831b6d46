"""Pure logic: the engine versions denv has flag tables for, and the check `denv validate`
makes of every recipe's engine version and every release's engine override.

A version renders with the table of the nearest known version at or below it (engines/base.py,
`pick_table`); one older than every table cannot render, so it is refused where it is written
— the recipe's `engine.version`, or the release's `overrides.engine` — with the versions denv
knows and the nearest one it could use, not later when a plan renders the units.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from reconciler.engines.base import version_key
from reconciler.engines.cards import card
from reconciler.errors import Problem
from reconciler.spec.engines import engine_names
from reconciler.spec.overrides import apply_overrides
from reconciler.spec.repo import Repo


def known_versions(engine: str) -> list[str]:
    """Versions of `engine` with a flag table (its card's), oldest first; none for an engine
    that takes any version (the simulator) or is not registered."""
    if engine not in engine_names():
        return []
    return sorted(card(engine).TABLES, key=version_key)


def version_refusal(engine: str, version: str) -> str | None:
    """Why denv cannot render `engine` at `version` (no flag table at or below it), naming
    the versions it knows and the nearest usable one; None when a table covers it."""
    known = known_versions(engine)
    if not known or version_key(version) >= version_key(known[0]):
        return None
    return (
        f"{engine} {version} has no flag table in denv (it knows {engine} {', '.join(known)}); "
        f"the nearest it could use is {known[0]}, or add a table for {version} "
        f"(docs/engines.md, 'Adding a version')"
    )


def check_engine_versions(repo: Repo) -> list[Problem]:
    """A problem at the line of each recipe engine version and each release engine override
    that denv has no flag table for."""
    problems = []
    for recipe_id, recipe in sorted(repo.recipes.items()):
        refusal = version_refusal(recipe.engine.name, recipe.engine.version)
        if refusal is not None:
            path = repo.origin[f"recipe:{recipe_id}"]
            at = ("recipe", "engine", "version")
            problems.append(repo.problem(path, at, f"recipe.engine.version: {refusal}"))
    for name, release in sorted(repo.releases.items()):
        body = release.release
        engine = body.overrides.get("engine")
        if not isinstance(engine, dict) or not engine:
            continue  # the recipe's own version, checked at the recipe
        where: tuple[str, ...] = ("engine", "version") if "version" in engine else ("engine",)
        path = repo.origin[f"release:{name}"]
        recipe_ids = {body.recipe, *(r for stage in release.stages for r in stage.recipes.values())}
        for refusal in sorted(_override_refusals(repo, recipe_ids, body.overrides)):
            loc = ("release", "overrides", *where)
            problems.append(
                repo.problem(path, loc, f"release.overrides.{'.'.join(where)}: {refusal}")
            )
    return problems


def _override_refusals(repo: Repo, recipe_ids: set[str], overrides: dict[str, Any]) -> set[str]:
    """Refusals of the engine each recipe runs once the release's overrides apply (recipes
    or overrides that do not resolve are reported by the spec checks)."""
    found = set()
    for recipe_id in recipe_ids:
        base = repo.recipes.get(recipe_id)
        if base is None or version_refusal(base.engine.name, base.engine.version) is not None:
            continue
        try:
            engine = apply_overrides(base, overrides, None).engine
        except ValidationError:
            continue
        refusal = version_refusal(engine.name, engine.version)
        if refusal is not None:
            found.add(refusal)
    return found
