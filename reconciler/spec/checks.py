"""Pure logic: checks that span files, on an already loaded `Repo`.

Each check returns problems with the position of the field at fault; none reads files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from pydantic import ValidationError

from reconciler.errors import Problem
from reconciler.spec.fit import fit, oversized_domains
from reconciler.spec.overrides import apply_overrides, unknown_fields
from reconciler.spec.paths import recipe_file
from reconciler.spec.problems import from_validation
from reconciler.spec.recipe import DisaggregatedTopology
from reconciler.spec.release import Release, weights_commit
from reconciler.spec.repo import Repo
from reconciler.spec.scaling import bounded_topology


def domain_size(repo: Repo, fleet_name: str) -> int | None:
    """GPUs per NVLink domain: the fleet's own figure, else its hardware's."""
    fleet = repo.fleets[fleet_name]
    if fleet.domain is not None:
        return fleet.domain
    hardware = repo.resolve_hardware(fleet.hardware)
    return hardware.scale_up.domain if hardware is not None else None


def check_recipes(repo: Repo) -> list[Problem]:
    problems = []
    for recipe_id, recipe in repo.recipes.items():
        path = repo.origin[f"recipe:{recipe_id}"]
        if path != recipe_file(recipe_id):
            problems.append(
                repo.problem(
                    path,
                    ("recipe", "id"),
                    f"recipe.id: '{recipe_id}' "
                    f"does not match its path (expected "
                    f"'{path.removeprefix('recipes/').removesuffix('.yaml')}')",
                )
            )
        if recipe.model not in repo.models:
            problems.append(
                repo.problem(
                    path,
                    ("recipe", "model"),
                    f"recipe.model: unknown model '{recipe.model}' (not in catalog/models.yaml)",
                )
            )
        for index, hw in enumerate(recipe.hardware):
            if repo.resolve_hardware(hw) is None:
                problems.append(
                    repo.problem(
                        path,
                        ("recipe", "hardware", index),
                        f"recipe.hardware: unknown hardware '{hw}' (not in catalog/hardware.yaml)",
                    )
                )
    return problems


def check_fleets(repo: Repo) -> list[Problem]:
    problems = []
    for name, fleet in repo.fleets.items():
        path = repo.origin[f"fleet:{name}"]
        if path != f"fleets/{name}.yaml":
            problems.append(
                repo.problem(
                    path, ("fleet", "name"), f"fleet.name: '{name}' does not match its file name"
                )
            )
        if repo.resolve_hardware(fleet.hardware) is None:
            problems.append(
                repo.problem(
                    path,
                    ("fleet", "hardware"),
                    f"fleet.hardware: unknown hardware '{fleet.hardware}'",
                )
            )
            continue
        size = domain_size(repo, name)
        for message in oversized_domains(fleet, size or 1):
            problems.append(repo.problem(path, ("fleet", "hosts"), f"fleet.hosts: {message}"))
    return problems


def check_catalog(repo: Repo) -> list[Problem]:
    problems = []
    for index, offer in enumerate(repo.offers):
        if repo.resolve_hardware(offer.hardware) is None:
            problems.append(
                repo.problem(
                    "catalog/offers.yaml",
                    ("offers", index, "hardware"),
                    f"offers[{index}].hardware: unknown hardware '{offer.hardware}'",
                )
            )
    unknown: dict[str, list[str]] = {}
    for result in repo.results:
        path, line = repo.result_lines[result.id]
        if repo.resolve_hardware(result.hardware) is None:
            unknown.setdefault(result.hardware, []).append(result.id)
        if result.recipe.id is not None and not repo.knows("recipe", result.recipe.id):
            problems.append(
                Problem(
                    path,
                    line,
                    1,
                    f"result {result.id}: recipe.id: unknown recipe '{result.recipe.id}'",
                )
            )
    for hardware, ids in sorted(unknown.items()):
        path, line = repo.result_lines[ids[0]]
        problems.append(
            Problem(
                path,
                line,
                1,
                f"{len(ids)} result(s) on hardware '{hardware}', "
                "which catalog/hardware.yaml does not list (no specs or price)",
                warning=True,
            )
        )
    counts = Counter(result.id for result in repo.results)
    for result_id in sorted(k for k, n in counts.items() if n > 1):
        path, line = repo.result_lines[result_id]
        problems.append(
            Problem(path, line, 1, f"result id '{result_id}' is used {counts[result_id]} times")
        )
    return problems


def _check_stage_fleet(
    repo: Repo, release: Release, path: str, stage_index: int, fleet_index: int
) -> list[Problem]:
    stage = release.stages[stage_index]
    fleet_name = stage.fleets[fleet_index]
    loc: tuple[str | int, ...] = ("stages", stage_index, "fleets", fleet_index)
    if fleet_name not in repo.fleets:
        if repo.knows("fleet", fleet_name):
            return []  # its own file is invalid and says so
        return [
            repo.problem(
                path,
                loc,
                f"stages[{stage_index}].fleets: unknown fleet "
                f"'{fleet_name}' (no fleets/{fleet_name}.yaml)",
            )
        ]
    recipe_id = release.recipe_for(stage, fleet_name)
    base = repo.recipes.get(recipe_id)
    if base is None:
        return []  # reported once, where the recipe is named
    try:
        effective = apply_overrides(base, release.release.overrides, release.release.topology)
    except ValidationError:
        return []  # reported by check_overrides
    fleet = repo.fleets[fleet_name]
    problems = []
    bounds = release.bounds_for(stage)
    if bounds is not None and isinstance(effective.topology, DisaggregatedTopology):
        own = stage.replicas is not None
        where = ("stages", stage_index, "replicas") if own else ("release", "replicas")
        label = f"stages[{stage_index}].replicas" if own else "release.replicas"
        problems.append(
            repo.problem(
                path,
                where,
                f"{label}: replica bounds scale an aggregated "
                f"topology; {recipe_id} is disaggregated (give prefill and decode replicas)",
            )
        )
    fleet_bounds = bounds.on_fleet(len(stage.fleets)) if bounds is not None else None
    effective = effective.model_copy(
        update={"topology": bounded_topology(effective.topology, fleet_bounds)}
    )
    if not repo.recipe_runs_on(effective, fleet):
        problems.append(
            repo.problem(
                path,
                loc,
                f"stages[{stage_index}].fleets: recipe "
                f"{recipe_id} is for {', '.join(effective.hardware)}, not "
                f"{fleet.hardware} ({fleet_name})",
            )
        )
    size = domain_size(repo, fleet_name)
    for reason in fit(effective.topology, fleet, size or 1) if size else []:
        problems.append(
            repo.problem(
                path,
                loc,
                f"stages[{stage_index}].fleets: {recipe_id} does not fit {fleet_name}: {reason}",
            )
        )
    return problems


def _check_overrides(repo: Repo, release: Release, path: str) -> list[Problem]:
    body = release.release
    problems = [
        repo.problem(
            path,
            ("release", "overrides", *where),
            f"release.overrides.{'.'.join(where)}: {message}",
        )
        for where, message in unknown_fields(body.overrides)
    ]
    base = repo.recipes.get(body.recipe)
    if problems or base is None:
        return problems
    try:
        apply_overrides(base, body.overrides, body.topology)
    except ValidationError as exc:
        data = {"release": {"overrides": body.overrides}}
        problems += from_validation(
            path,
            data,
            exc,
            lambda loc: repo.locate(path, tuple(loc)),
            base=("release", "overrides"),
        )
    return problems


def _check_policies(repo: Repo, release: Release, path: str) -> list[Problem]:
    """Each replica bounds' scaling policy is one of policies/scaling.yaml."""
    given: list[tuple[tuple[str | int, ...], str, str]] = []
    if release.release.replicas is not None:
        where: tuple[str | int, ...] = ("release", "replicas", "policy")
        given.append((where, "release.replicas.policy", release.release.replicas.policy))
    for s, stage in enumerate(release.stages):
        if stage.replicas is not None:
            where = ("stages", s, "replicas", "policy")
            given.append((where, f"stages[{s}].replicas.policy", stage.replicas.policy))
    known = repo.policies.scaling
    return [
        repo.problem(
            path,
            where,
            f"{label}: unknown scaling policy '{name}' (known: {', '.join(sorted(known))}; "
            "policies/scaling.yaml)",
        )
        for where, label, name in given
        if name not in known
    ]


def _check_pools(repo: Repo, release: Release, path: str) -> list[Problem]:
    """A stage's pool (`pool: stage`) keeps a replica on each of its fleets: its minimum is at
    least as many as the stage has fleets."""
    problems = []
    for s, stage in enumerate(release.stages):
        bounds = release.bounds_for(stage)
        if bounds is None or bounds.pool != "stage" or bounds.min >= len(stage.fleets):
            continue
        own = stage.replicas is not None
        where = ("stages", s, "replicas", "min") if own else ("release", "replicas", "min")
        label = f"stages[{s}].replicas.min" if own else "release.replicas.min"
        problems.append(
            repo.problem(
                path,
                where,
                f"{label}: {bounds.min} is fewer than stage {stage.name}'s "
                f"{len(stage.fleets)} fleets (pool: stage keeps a replica on each)",
            )
        )
    return problems


def check_release(repo: Repo, name: str) -> list[Problem]:
    release = repo.releases[name]
    path = repo.origin[f"release:{name}"]
    body = release.release
    problems = []
    if not repo.knows("recipe", body.recipe):
        problems.append(
            repo.problem(
                path,
                ("release", "recipe"),
                f"release.recipe: unknown recipe '{body.recipe}' (no recipes/{body.recipe}.yaml)",
            )
        )
    problems += _check_overrides(repo, release, path)
    if weights_commit(body.weights) is None and body.weights.startswith("hf://"):
        required = repo.policies.gates.require_pinned_weights
        problems.append(
            repo.problem(
                path,
                ("release", "weights"),
                "release.weights: not pinned to a commit (write hf://org/repo@<commit>)",
                warning=not required,
            )
        )
    problems += _check_policies(repo, release, path) + _check_pools(repo, release, path)
    names = Counter(stage.name for stage in release.stages)
    base_model = repo.recipes[body.recipe].model if body.recipe in repo.recipes else None
    for s, stage in enumerate(release.stages):
        if names[stage.name] > 1:
            problems.append(
                repo.problem(
                    path,
                    ("stages", s, "name"),
                    f"stages[{s}].name: '{stage.name}' is used by more than one stage",
                )
            )
        for a, alarm in enumerate(stage.alarms):
            if alarm not in repo.policies.alarms:
                problems.append(
                    repo.problem(
                        path,
                        ("stages", s, "alarms", a),
                        f"stages[{s}]."
                        f"alarms: unknown alarm '{alarm}' (not in "
                        "policies/alarms.yaml)",
                    )
                )
        for fleet_name, recipe_id in stage.recipes.items():
            loc: tuple[str | int, ...] = ("stages", s, "recipes", fleet_name)
            recipe = repo.recipes.get(recipe_id)
            if recipe is None and not repo.knows("recipe", recipe_id):
                problems.append(
                    repo.problem(path, loc, f"stages[{s}].recipes: unknown recipe '{recipe_id}'")
                )
            elif recipe is not None and base_model is not None and recipe.model != base_model:
                problems.append(
                    repo.problem(
                        path,
                        loc,
                        f"stages[{s}].recipes: {recipe_id} "
                        f"serves {recipe.model}, the release serves "
                        f"{base_model}",
                    )
                )
            if fleet_name not in stage.fleets:
                problems.append(
                    repo.problem(
                        path,
                        loc,
                        f"stages[{s}].recipes: fleet "
                        f"'{fleet_name}' is not one of the stage's fleets",
                    )
                )
        for f in range(len(stage.fleets)):
            problems += _check_stage_fleet(repo, release, path, s, f)
    return problems


def check_promotions(repo: Repo, name: str) -> list[Problem]:
    path = repo.origin[f"promotions:{name}"]
    release = repo.releases.get(name)
    if release is None:
        return [
            repo.problem(
                path, (), f"promotions for '{name}', which has no releases/{name}/denv.yaml"
            )
        ]
    later = [stage.name for stage in release.stages[1:]]
    return [
        repo.problem(
            path,
            ("promotions", stage),
            f"promotions.{stage}: not a later stage "
            f"of {name} (later stages: {', '.join(later) or 'none'})",
        )
        for stage in repo.promotions[name].promotions
        if stage not in later
    ]


CHECKS: tuple[Callable[[Repo], list[Problem]], ...] = (check_recipes, check_fleets, check_catalog)


def check_repo(repo: Repo) -> list[Problem]:
    """Every cross-file problem of a loaded repository."""
    problems = [problem for check in CHECKS for problem in check(repo)]
    for name in repo.releases:
        problems += check_release(repo, name)
    for name in repo.promotions:
        problems += check_promotions(repo, name)
    return problems
