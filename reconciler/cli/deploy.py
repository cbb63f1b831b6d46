"""CLI: `denv deploy` — a benchmark result (a row of the last `denv bench`, or a result id) or a
recipe as a new release: releases/<name>/denv.yaml with the model's weights pinned to a commit,
the recipe, and one stage on the target fleet. It is checked against the fleet and validated
with the rest of the repository first; then it becomes a pull request with the plan as its
first comment (the local forge by default, GitHub where configured), or with --commit a commit
on the current branch. Nothing is written when a check fails."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from reconciler.catalog.deployable import (
    ReleaseDraft,
    nearest_deployable,
    pinned_weights,
    refusal,
    release_text,
)
from reconciler.cli.bench import find_result
from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.cli.plan import cache_dir
from reconciler.cli.progress import ProgressSink
from reconciler.errors import DenvError, NotFound, SpecError, UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.comments import render
from reconciler.forge.config import bot_identity, open_forge
from reconciler.forge.localgit import commit_files, has_commit
from reconciler.forge.protocol import BotChange, BotFiles
from reconciler.forge.views import DeployView
from reconciler.pr.plan import plan_pull_request
from reconciler.spec.base import SLUG
from reconciler.spec.checks import check_repo, domain_size
from reconciler.spec.fit import fit
from reconciler.spec.loader import load_repo
from reconciler.spec.recipe import Recipe, Topology
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result
from reconciler.spec.sources import FileSource, GitCommit, find_root


class WithFiles:
    """A commit's denv files with some added: the repository as it would be, to validate."""

    def __init__(self, base: FileSource, added: dict[str, bytes]) -> None:
        self.base, self.added = base, added
        self.label = f"{base.label} + {', '.join(sorted(added))}"

    def files(self) -> Iterator[str]:
        yield from sorted(set(self.base.files()) | set(self.added))

    def stat(self, path: str) -> int:
        return len(self.added[path]) if path in self.added else self.base.stat(path)

    def read(self, path: str) -> bytes:
        return self.added[path] if path in self.added else self.base.read(path)


def _result(repo: Repo, which: str) -> Result:
    found, _ = find_result(which, lambda: repo, files=False)
    return found


def _describe(result: Result) -> str:
    engine = " ".join(filter(None, (result.engine.name, result.engine.version)))
    lengths = f"{result.workload.isl or '…'}/{result.workload.osl or '…'}"
    load_ = f"concurrency {result.load.concurrency}" if result.load.concurrency else "load …"
    return f"{engine}, recipe {result.recipe.id}, {result.hardware}, {lengths} at {load_}"


def _refuse(repo: Repo, result: Result, reason: str, target: str) -> DenvError:
    aliases = {alias: hw.id for hw in repo.hardware.values() for alias in hw.aliases}
    fleet = repo.fleets.get(target)
    size = domain_size(repo, target) if fleet is not None else None

    def on_target(recipe: Recipe) -> bool:
        if fleet is None or not repo.recipe_runs_on(recipe, fleet):
            return False
        return not size or not fit(recipe.topology, fleet, size)

    nearest = nearest_deployable(result, repo.results, repo.recipes, aliases, on_target)
    message = f"cannot deploy result {result.id}: {reason}."
    if nearest is None:
        message += " No result of a denv recipe comes near it; try denv deploy --recipe ID."
    else:
        message += (
            f"\nThe nearest result denv can deploy: {nearest.id} ({_describe(nearest)}):\n"
            f"  denv deploy --from-bench {nearest.id} --target {target}"
        )
    return DenvError(message)


def _source(
    repo: Repo, from_bench: str | None, recipe_id: str | None, target: str
) -> tuple[Recipe, Topology | None, str]:
    """The recipe to deploy, a topology where the result's differs from it, and the origin."""
    if (from_bench is None) == (recipe_id is None):
        raise UsageError("give one of --from-bench N|RESULT-ID and --recipe ID")
    if recipe_id is not None:
        if recipe_id not in repo.recipes:
            raise NotFound(f"no recipe '{recipe_id}' (no recipes/{recipe_id}.yaml)")
        return repo.recipes[recipe_id], None, f"recipe {recipe_id}"
    assert from_bench is not None
    result = _result(repo, from_bench)
    reason = refusal(result, repo.recipes)
    if reason is not None:
        raise _refuse(repo, result, reason, target)
    assert result.recipe.id is not None
    recipe = repo.recipes[result.recipe.id]
    topology = result.topology if result.topology not in (None, recipe.topology) else None
    return recipe, topology, f"result {result.id} ({result.source.kind})"


def _fitting(
    repo: Repo, recipe: Recipe, topology: Topology | None, origin: str, where: tuple[str, str, str]
) -> ReleaseDraft:
    """The release (name, stage, fleet in `where`); DenvError when its name is not a slug
    or it cannot run on the fleet."""
    if not re.match(SLUG, where[0]):
        raise UsageError(
            f"--name {where[0]!r}: a release name is lowercase letters, digits, '.', '_' and "
            "'-' (it names the folder and the model clients ask for)"
        )
    draft, reasons = _draft(repo, recipe, topology, origin, where)
    if reasons:
        raise DenvError(f"{recipe.id} cannot run on {where[2]}: " + "; ".join(reasons))
    return draft


def _draft(
    repo: Repo, recipe: Recipe, topology: Topology | None, origin: str, where: tuple[str, str, str]
) -> tuple[ReleaseDraft, list[str]]:
    """The release (name, stage, fleet in `where`), and why it cannot run on the fleet."""
    name, stage, target = where
    fleet = repo.fleets.get(target)
    if fleet is None:
        raise NotFound(f"no fleet '{target}' (fleets: {', '.join(sorted(repo.fleets))})")
    model = repo.models.get(recipe.model)
    weights = pinned_weights(model) if model is not None else None
    if weights is None:
        raise DenvError(
            f"model {recipe.model} has no weights pinned to a commit in catalog/models.yaml "
            "(weights: {commit, source} beside hf_repo); add a commit you checked, then deploy"
        )
    reasons = []
    if not repo.recipe_runs_on(recipe, fleet):
        hardware = ", ".join(recipe.hardware)
        reasons.append(f"{recipe.id} is for {hardware}, not {fleet.hardware} ({fleet.name})")
    size = domain_size(repo, fleet.name)
    reasons += fit(topology or recipe.topology, fleet, size) if size else []
    draft = ReleaseDraft(
        name=name,
        weights=weights,
        recipe=recipe.id,
        fleet=fleet.name,
        stage=stage,
        origin=origin,
        topology=topology,
    )
    return draft, reasons


def _base(root: Path, branch: str | None) -> GitCommit:
    """The commit the release is added to: the branch (else origin's), or HEAD."""
    revs = [f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"] if branch else ["HEAD"]
    for rev in revs:
        if has_commit(root, rev):
            return GitCommit(root, rev)
    raise NotFound(f"{root}: no branch '{branch}'")


def _validate(base: GitCommit, draft: ReleaseDraft, text: str) -> None:
    """Every file as it would be; nothing is written while any is invalid."""
    if any(path.startswith(f"releases/{draft.name}/") for path in base.files()):
        raise DenvError(
            f"releases/{draft.name}/ exists at {base.label}: choose another --name, or edit it"
        )
    repo = load_repo(WithFiles(base, {draft.path: text.encode()}))
    repo.problems += check_repo(repo)
    if repo.errors:
        raise SpecError(repo.errors)


def _propose(root: Path, draft: ReleaseDraft, text: str) -> dict[str, object]:
    """A bot pull request adding the release, and its plan as the first comment."""
    forge = open_forge(root, os.environ)

    def add(files: BotFiles) -> None:
        files.write(draft.path, text)

    change = BotChange(
        branch=f"deploy/{draft.name}",
        title=f"Deploy {draft.name}: {draft.recipe} on {draft.fleet}",
        body=render(
            DeployView(
                release=draft.name,
                origin=draft.origin,
                recipe=draft.recipe,
                fleet=draft.fleet,
                weights=draft.weights,
            )
        ),
        message=f"deploy {draft.name}: {draft.recipe} on {draft.fleet}",
        edit=add,
    )
    pr = forge.open_or_update_bot_pr(change)
    with ProgressSink() as shown:
        shown.phase(f"planning #{pr.number}")
        drivers = Drivers(warn=lambda m: shown.say(f"warning: {m}"))
        try:
            planned = plan_pull_request(
                forge, root, pr.number, drivers, shown.phase, cache=cache_dir()
            )
        finally:
            drivers.close()
    return planned.as_json()


def deploy(
    target: Annotated[str, typer.Option("--target", help="The fleet to run it on.")],
    from_bench: Annotated[
        str | None,
        typer.Option("--from-bench", help="A row of the last `denv bench`, or a result id."),
    ] = None,
    recipe: Annotated[str | None, typer.Option("--recipe", help="A recipe id.")] = None,
    name: Annotated[
        str | None,
        typer.Option(help="Release name, also the model name clients ask for (default: model)."),
    ] = None,
    stage: Annotated[str, typer.Option(help="Name of its one stage.")] = "canary",
    commit: Annotated[
        bool, typer.Option("--commit", help="Commit to the current branch instead of a PR.")
    ] = False,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Deploy a benchmark result or a recipe: write releases/<name>/denv.yaml, check it fits
    the fleet, validate, and open a pull request with the plan (or --commit it). Exit 1 when
    the pull request's plan check fails (a host not reached, a deployment not placed)."""
    root = find_root(repo)
    loaded = load(repo)  # the work tree: results as `denv bench` ranked them
    chosen, topology, origin = _source(loaded, from_bench, recipe, target)
    draft = _fitting(loaded, chosen, topology, origin, (name or chosen.model, stage, target))
    text = release_text(draft)
    _validate(_base(root, None if commit else "main"), draft, text)
    summary: dict[str, object] = {
        "release": draft.name,
        "path": draft.path,
        "recipe": draft.recipe,
        "fleet": draft.fleet,
        "weights": draft.weights,
        "from": origin,
    }
    if commit:
        summary["commit"] = commit_files(
            root,
            {draft.path: text.encode()},
            f"deploy {draft.name}: {draft.recipe} on {draft.fleet}",
            bot_identity(os.environ),
        )
    else:
        summary.update(_propose(root, draft, text))
    if as_json:
        print_json(summary)
    else:
        _print(summary)
    check = summary.get("check")
    if isinstance(check, dict) and check["conclusion"] != "success":
        raise typer.Exit(1)  # the pull request is open, but its plan check failed


def _print(summary: dict[str, object]) -> None:
    console.print(
        f"Release {summary['release']}: {summary['recipe']} on {summary['fleet']}, weights "
        f"{summary['weights']} (from {summary['from']}), in {summary['path']}.",
        markup=False,
        soft_wrap=True,
    )
    if "commit" in summary:
        console.print(f"Committed as {str(summary['commit'])[:12]}.", markup=False)
        return
    pr = summary["pull_request"]
    check = summary["check"]
    assert isinstance(pr, dict) and isinstance(check, dict)
    console.print(
        f"Opened #{pr['number']} {pr['title']} ({pr['head_branch']} → {pr['base_branch']}); "
        f"check '{check['name']}' {check['conclusion']}: {check['title']}",
        markup=False,
        soft_wrap=True,
    )
    if check["conclusion"] != "success":
        console.print(str(check["summary"]), markup=False, soft_wrap=True)
    console.print(f"The plan is its first comment: denv pr show {pr['number']}", markup=False)
