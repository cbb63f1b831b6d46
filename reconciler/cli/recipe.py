"""CLI: `denv recipe …` — show a recipe; check that it fits a fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.syntax import Syntax

from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.errors import NotFound
from reconciler.spec.checks import domain_size
from reconciler.spec.fit import fit as fit_topology
from reconciler.spec.recipe import Recipe, total_gpus
from reconciler.spec.repo import Repo

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
        f"[bold]{recipe_id}[/] — {path} — {total_gpus(recipe.topology)} GPUs, "
        f"{recipe.engine.name} {recipe.engine.version}"
    )
    console.print(Syntax(loaded.docs[path].text, "yaml", background_color="default"))


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
            f"{recipe_id} fits {fleet}: {total_gpus(recipe.topology)} GPUs, each "
            f"replica within one {domain_size(loaded, fleet)}-GPU domain"
        )
    if reasons:
        raise typer.Exit(1)
