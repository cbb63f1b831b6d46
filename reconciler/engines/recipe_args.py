"""Pure logic: the check `denv validate` makes of every recipe's extra engine args
(`recipe.args`) and every release's `overrides.args`, at the line of each element.

The rules are the engine cards' own (engines/base.py, `arg_findings`, with each card's flag
tables and `MANAGED` flags), so what validate refuses is exactly what rendering refuses:
a flag the engine version lacks (naming the nearest one it has), a flag denv sets itself
(naming the setting to change), a first element that is no flag. Shell metacharacters are
warnings: args are argv elements that never pass through a shell, so they do nothing there,
but an arg holding `$(...)` or `; rm` was written by someone who expected one.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from reconciler.engines.base import ArgFinding, FlagTable, arg_findings
from reconciler.engines.cards import card
from reconciler.engines.versions import check_engine_versions
from reconciler.errors import EngineError, Problem
from reconciler.spec.overrides import apply_overrides
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo


def check_engines(repo: Repo) -> list[Problem]:
    """Every problem only the engine layer can find: versions without a flag table, recipe or
    release args the engine version would refuse, and recipes their hardware cannot run."""
    return check_engine_versions(repo) + check_recipe_args(repo) + check_recipe_hardware(repo)


def check_recipe_hardware(repo: Repo) -> list[Problem]:
    """A problem at each hardware a recipe names whose kind its engine cannot run the recipe
    on (a CPU: SGLang, or vLLM with more than one worker a replica), as rendering would."""
    problems = []
    for recipe_id, recipe in sorted(repo.recipes.items()):
        path = repo.origin[f"recipe:{recipe_id}"]
        for index, name in enumerate(recipe.hardware):
            hardware = repo.resolve_hardware(name)
            if hardware is None:
                continue  # the spec checks say so
            try:
                card(recipe.engine.name).check_hardware(recipe, hardware)
            except EngineError as e:
                message = f"recipe.hardware[{index}]: {name}: {e}"
                problems.append(repo.problem(path, ("recipe", "hardware", index), message))
    return problems


def findings(recipe: Recipe) -> list[ArgFinding]:
    """The problems with the recipe's args on its engine version; only the shell warnings
    where denv has no flag table for it (an engine whose card has none, as the simulator,
    which takes any args; or a version refused elsewhere)."""
    engine = recipe.engine
    engine_card = card(engine.name)
    if engine_card.TABLES:
        try:
            return arg_findings(recipe.args, engine_card.table(engine.version), engine_card.MANAGED)
        except EngineError:
            pass  # no table for the version: check_engine_versions says so at its line
    no_flags = FlagTable(engine=engine.name, version="", table="", flags=frozenset(), choices={})
    return [f for f in arg_findings(recipe.args, no_flags, {}) if f.warning]


def check_recipe_args(repo: Repo) -> list[Problem]:
    """A problem at each element of a recipe's args, or of a release's overrides.args, that
    the engine version refuses, and a warning at each that holds shell metacharacters."""
    problems = []
    for recipe_id, recipe in sorted(repo.recipes.items()):
        path = repo.origin[f"recipe:{recipe_id}"]
        for found in findings(recipe):
            at = ("recipe", "args", found.at)
            message = f"recipe.args[{found.at}]: {found.message}"
            problems.append(repo.problem(path, at, message, found.warning))
    for name, release in sorted(repo.releases.items()):
        body = release.release
        if "args" not in body.overrides and not isinstance(body.overrides.get("engine"), dict):
            continue
        path = repo.origin[f"release:{name}"]
        recipe_ids = {body.recipe, *(r for stage in release.stages for r in stage.recipes.values())}
        for loc, message, warning in sorted(_override_findings(repo, recipe_ids, body.overrides)):
            problems.append(repo.problem(path, ("release", "overrides", *loc), message, warning))
    return problems


def _override_findings(
    repo: Repo, recipe_ids: set[str], overrides: dict[str, Any]
) -> set[tuple[tuple[str | int, ...], str, bool]]:
    """(where under overrides, message, warning) for the args each recipe runs once the
    release's overrides apply: at overrides.args when the release sets them, else at the
    engine override that makes the recipe's own args fail (a recipe whose own args fail is
    reported at the recipe; overrides that do not resolve, by the spec checks)."""
    found: set[tuple[tuple[str | int, ...], str, bool]] = set()
    for recipe_id in sorted(recipe_ids):
        base = repo.recipes.get(recipe_id)
        if base is None:
            continue
        try:
            merged = apply_overrides(base, overrides, None)
        except ValidationError:
            continue
        if "args" in overrides:
            for f in findings(merged):
                on = f" (on {merged.engine.name} {merged.engine.version}, recipe {recipe_id})"
                message = f"release.overrides.args[{f.at}]: {f.message}"
                found.add((("args", f.at), message + on * (not f.warning), f.warning))
            continue
        if any(not f.warning for f in findings(base)):
            continue
        engine = overrides["engine"]
        where: tuple[str, ...] = ("engine", "version") if "version" in engine else ("engine",)
        for f in findings(merged):
            if not f.warning:
                message = (
                    f"release.overrides.{'.'.join(where)}: recipe {recipe_id}'s "
                    f"args[{f.at}] on {merged.engine.name} {merged.engine.version}: {f.message}"
                )
                found.add((where, message, False))
    return found
