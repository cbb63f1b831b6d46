"""CLI: `denv recipe …` — show a recipe; check that it fits a fleet; render what it runs."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from reconciler.catalog.deployments import Deployment, deployments
from reconciler.cli import terminal
from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.engines.launch import engine_name
from reconciler.engines.units import EngineContext, Unit
from reconciler.errors import NotFound, UsageError
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.kinds.cards import JobLine, card_of
from reconciler.fleet.render import render as render_units
from reconciler.spec.checks import domain_size
from reconciler.spec.fit import fit as fit_topology
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe, total_gpus
from reconciler.spec.repo import Repo
from reconciler.spec.words import counted

app = typer.Typer(help="Engine recipes.", no_args_is_help=True)

RecipeArg = Annotated[str, typer.Argument(help="Recipe id, e.g. llama-3.1-8b/vllm@1.")]


def find_recipe(repo: Repo, recipe_id: str) -> Recipe:
    if recipe_id not in repo.recipes:
        near = sorted(r for r in repo.recipes if r.split("/")[0] == recipe_id.split("/")[0])
        hint = f" (recipes of that model: {', '.join(near)})" if near else ""
        raise NotFound(f"unknown recipe '{recipe_id}'{hint}")
    return repo.recipes[recipe_id]


@app.command("show")
def show(recipe_id: RecipeArg, repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """A recipe as written, with its GPU count."""
    loaded = load(repo)
    recipe = find_recipe(loaded, recipe_id)
    if as_json:
        print_json(recipe)
        return
    path = loaded.origin[f"recipe:{recipe_id}"]
    console.print(
        Text.assemble(
            (recipe_id, "bold"),
            f" — {path} — {counted(total_gpus(recipe.topology), 'GPU')}, "
            f"{recipe.engine.name} {recipe.engine.version}",
        )
    )
    terminal.print_file(console, loaded.docs[path].text, "yaml")


@app.command("fit")
def fit(
    recipe_id: RecipeArg,
    fleet: Annotated[str, typer.Option("--fleet", help="Fleet name.")],
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Does the recipe's topology fit the fleet's NVLink domains and GPUs?"""
    loaded = load(repo)
    recipe = find_recipe(loaded, recipe_id)
    if fleet not in loaded.fleets:
        raise NotFound(f"unknown fleet '{fleet}' (known: {', '.join(sorted(loaded.fleets))})")
    target = loaded.fleets[fleet]
    reasons = fit_topology(recipe.topology, target, domain_size(loaded, fleet) or 1)
    if not loaded.recipe_runs_on(recipe, target):
        reasons.insert(
            0, f"{recipe_id} is for {', '.join(recipe.hardware)}, {fleet} has {target.hardware}"
        )
    if as_json:
        print_json(
            {
                "recipe": recipe_id,
                "fleet": fleet,
                "fits": not reasons,
                "gpus": total_gpus(recipe.topology),
                "reasons": reasons,
            }
        )
    elif reasons:
        console.print(f"{recipe_id} does not fit {fleet}:")
        for reason in reasons:
            console.print(f"  - {reason}", markup=False)
    else:
        console.print(
            f"{recipe_id} fits {fleet}: {counted(total_gpus(recipe.topology), 'GPU')}, each "
            f"replica within one {domain_size(loaded, fleet)}-GPU domain"
        )
    if reasons:
        raise typer.Exit(1)


def _fleet(repo: Repo, name: str) -> Fleet:
    if name not in repo.fleets:
        raise NotFound(f"unknown fleet '{name}' (known: {', '.join(sorted(repo.fleets))})")
    return repo.fleets[name]


def _release_deployment(
    repo: Repo, recipe_id: str, release: str, stage: str | None, fleet: str | None
) -> Deployment:
    """The release's deployment of the recipe: its first stage and fleet unless named."""
    if release not in repo.releases:
        raise NotFound(f"unknown release '{release}' (known: {', '.join(sorted(repo.releases))})")
    own = [d for d in deployments(repo) if d.release == release]
    found = [
        d
        for d in own
        if d.recipe.id == recipe_id
        and (stage is None or d.stage == stage)
        and (fleet is None or d.fleet == fleet)
    ]
    if not found:
        runs = ", ".join(f"{d.recipe.id} on {d.fleet} in {d.stage}" for d in own) or "nothing"
        wanted = "".join(
            part
            for part, given in ((f" in stage {stage}", stage), (f" on fleet {fleet}", fleet))
            if given
        )
        raise NotFound(f"release {release} does not run {recipe_id}{wanted} (it runs {runs})")
    return found[0]


def _recipe_deployment(repo: Repo, recipe: Recipe, fleet: str | None) -> Deployment:
    """The recipe alone, serving its catalog model, on the named or first matching fleet."""
    if fleet is None:
        matching = [
            name for name, f in sorted(repo.fleets.items()) if repo.recipe_runs_on(recipe, f)
        ]
        if not matching:
            known = ", ".join(f"{n} ({f.hardware})" for n, f in sorted(repo.fleets.items()))
            raise NotFound(
                f"no fleet has {', '.join(recipe.hardware)} for {recipe.id} "
                f"(fleets: {known}); pass --fleet"
            )
        fleet = matching[0]
    target = _fleet(repo, fleet)
    if not target.simulated and not repo.recipe_runs_on(recipe, target):
        raise UsageError(
            f"{recipe.id} is for {', '.join(recipe.hardware)}, {fleet} has {target.hardware} "
            f"(a simulated fleet runs any recipe)"
        )
    arch = repo.models.get(recipe.model)
    weights = f"hf://{arch.hf_repo}" if arch is not None and arch.hf_repo else recipe.model
    return Deployment(
        release="",
        stage="",
        fleet=fleet,
        served_model=recipe.model,
        weights=weights,
        recipe=recipe,
    )


def _show_unit(unit: Unit, job: JobLine | None = None) -> None:
    where = f"{unit.host} ({unit.address})" if unit.host != unit.address else unit.host
    gpus = f"GPUs {','.join(map(str, unit.gpu_indices))}" if unit.gpu_indices else "no GPUs"
    if unit.gpus != len(unit.gpu_indices):
        gpus += f" (stands for {unit.gpus})"
    port = f"port {unit.port}" if unit.port is not None else "no HTTP port"
    console.print(Text.assemble((unit.name, "bold"), f"  {unit.engine}  {where}  {gpus}  {port}"))
    command = shlex.join(unit.argv)
    if unit.env:
        command = shlex.join(f"{k}={v}" for k, v in unit.env.items()) + " " + command
    if job is not None:  # a scheduler's job runs the command (a Slurm job, on its nodes)
        note = f"  # {job.note}" if job.note else ""
        console.print(
            f"  {shlex.join(job.argv)}{note}", markup=False, highlight=False, soft_wrap=True
        )
    console.print(f"  {command}", markup=False, highlight=False, soft_wrap=True)


@app.command("render")
def render(
    recipe_id: RecipeArg,
    release: Annotated[
        str | None, typer.Option("--release", help="Render the recipe as this release runs it.")
    ] = None,
    stage: Annotated[
        str | None, typer.Option("--stage", help="With --release: the stage (default: first).")
    ] = None,
    fleet: Annotated[
        str | None, typer.Option("--fleet", help="Fleet (default: the first that fits).")
    ] = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Exactly what would run: every unit's host, GPUs, port, env and argv."""
    loaded = load(repo)
    recipe = find_recipe(loaded, recipe_id)
    if release is not None:
        deployment = _release_deployment(loaded, recipe_id, release, stage, fleet)
    elif stage is not None:
        raise UsageError("--stage needs --release")
    else:
        deployment = _recipe_deployment(loaded, recipe, fleet)
    target = _fleet(loaded, deployment.fleet)
    hardware = loaded.resolve_hardware(target.hardware)
    if hardware is None:
        raise NotFound(f"fleet {target.name} names unknown hardware '{target.hardware}'")
    rules = rules_of(target)
    python = rules.python
    context = EngineContext(
        hardware=hardware,
        model=loaded.models.get(deployment.recipe.model),
        python=python,
        engine_python=python,
    )
    units = render_units(deployment, target, domain_size(loaded, target.name) or 1, context, rules)
    jobs = card_of(target).jobs(target, units, trial=not deployment.release)
    if as_json:
        shown = [unit.model_dump(mode="json") for unit in units]
        job = {name: {line.key: line.argv} for name, line in jobs.items()}
        print_json({"units": [{**u, **job.get(u["name"], {})} for u in shown]})
        return
    runs = engine_name(deployment, target)
    origin = f"release {deployment.release}, stage {deployment.stage}, " if release else ""
    console.print(
        Text.assemble(
            (recipe_id, "bold"),
            f" — {origin}fleet {target.name} ({hardware.id}"
            f"{', simulated' if target.simulated else ''}) — {runs}, "
            f"{counted(len(units), 'unit')}, {counted(deployment.gpus, 'GPU')}",
        )
    )
    for unit in units:
        _show_unit(unit, jobs.get(unit.name))
