"""Adapter: a work tree or git commit -> `Repo`, every file validated, every problem kept.

Loading never stops at the first bad file: `denv validate` shows every error at once.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from reconciler.collector import collector_paused
from reconciler.errors import Problem
from reconciler.spec.bounds import size_refusal
from reconciler.spec.catalog import HardwareFile, ModelsFile, OffersFile
from reconciler.spec.fleet import FleetFile
from reconciler.spec.jsonio import read_line
from reconciler.spec.policy import AlarmsFile, GatesFile, OptimizerFile, PrPolicy, PrPolicyFile
from reconciler.spec.problems import from_validation
from reconciler.spec.reading import UnreadableFile
from reconciler.spec.recipe import RecipeFile
from reconciler.spec.release import Promotions, Release
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result
from reconciler.spec.scaling import DEFAULT_POLICY, ScalingFile, ScalingPolicy
from reconciler.spec.sources import FileSource, GitCommit, TrustedOverlay, WorkTree
from reconciler.spec.workload import WorkloadsFile
from reconciler.spec.yamlio import YamlDoc, decode_utf8, parse_values, plain

if TYPE_CHECKING:
    from reconciler.spec.parsecache import ParseCache

MAX_ERRORS_PER_FILE = 20  # then reading stops: a junk file is refused quickly, not listed

M = TypeVar("M", bound=BaseModel)
Parse = Callable[[str, bytes], tuple[YamlDoc | None, Any, Problem | None]]


def _add(repo: Repo, problem: Problem | None) -> None:
    if problem is not None:
        repo.problems.append(problem)


def _validate(repo: Repo, doc: YamlDoc, model: type[M], values: Any = None) -> M | None:
    """The file as `model`; problems at the file's positions. `values`: the file's values as
    plain data when the caller has them (the parse cache's), else they are read from `doc`."""
    if values is None:
        values = plain(doc.data)
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        repo.problems.extend(from_validation(doc.path, values, exc, doc.position))
        return None


def _load_hardware(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    if (parsed := _validate(repo, doc, HardwareFile, values)) is not None:
        for index, hw in enumerate(parsed.hardware):
            if hw.id in repo.hardware:
                repo.problems.append(
                    repo.problem(
                        doc.path,
                        ("hardware", index, "id"),
                        f"hardware.id: '{hw.id}' is listed twice",
                    )
                )
            repo.hardware[hw.id] = hw


def _load_offers(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    if (parsed := _validate(repo, doc, OffersFile, values)) is not None:
        repo.offers.extend(parsed.offers)


def _load_models(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    if (parsed := _validate(repo, doc, ModelsFile, values)) is not None:
        for index, arch in enumerate(parsed.models):
            if arch.id in repo.models:
                repo.problems.append(
                    repo.problem(
                        doc.path, ("models", index, "id"), f"models.id: '{arch.id}' is listed twice"
                    )
                )
            repo.models[arch.id] = arch


def _load_workloads(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    if (parsed := _validate(repo, doc, WorkloadsFile, values)) is not None:
        repo.workloads.update({profile.id: profile for profile in parsed.workloads})


def _load_recipe(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    if (parsed := _validate(repo, doc, RecipeFile, values)) is not None:
        repo.recipes[parsed.recipe.id] = parsed.recipe
        repo.origin[f"recipe:{parsed.recipe.id}"] = doc.path


def _load_fleet(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    if (parsed := _validate(repo, doc, FleetFile, values)) is not None:
        repo.fleets[parsed.fleet.name] = parsed.fleet
        repo.origin[f"fleet:{parsed.fleet.name}"] = doc.path


def _load_release(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    name = doc.path.split("/")[1]
    if (parsed := _validate(repo, doc, Release, values)) is not None:
        repo.releases[name] = parsed
        repo.origin[f"release:{name}"] = doc.path


def _load_promotions(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    name = doc.path.split("/")[1]
    if (parsed := _validate(repo, doc, Promotions, values)) is not None:
        repo.promotions[name] = parsed
        repo.origin[f"promotions:{name}"] = doc.path


def _load_policy(repo: Repo, doc: YamlDoc, values: Any = None) -> None:
    if doc.path.endswith("alarms.yaml"):
        if (alarms := _validate(repo, doc, AlarmsFile, values)) is not None:
            update = {"alarms": alarms.alarms, "prometheus": alarms.prometheus}
            if alarms.defaults is not None:
                update["default_alarms"] = alarms.defaults
            repo.policies = repo.policies.model_copy(update=update)
    elif doc.path.endswith("gates.yaml"):
        if (gates := _validate(repo, doc, GatesFile, values)) is not None:
            repo.policies = repo.policies.model_copy(update={"gates": gates.gates})
    elif doc.path.endswith("scaling.yaml"):
        if (scaling := _validate(repo, doc, ScalingFile, values)) is not None:
            policies = {DEFAULT_POLICY: ScalingPolicy(), **scaling.scaling}
            repo.policies = repo.policies.model_copy(update={"scaling": policies})
    elif doc.path.endswith("pr.yaml"):
        if (pr := _validate(repo, doc, PrPolicyFile, values)) is not None:
            repo.policies = repo.policies.model_copy(update={"pr": pr.pr})
    elif (rules := _validate(repo, doc, OptimizerFile, values)) is not None:
        repo.policies = repo.policies.model_copy(update={"optimizer": rules.optimizer})


class LoadKind(Protocol):
    """Validates one file of a kind into the repo; `values` as for `_validate`."""

    def __call__(self, repo: Repo, doc: YamlDoc, values: Any = None) -> None: ...


# Which model reads which path; the first pattern that matches wins.
# What ranking results reads (`denv bench`): the catalog and the results. Recipes, fleets,
# releases and policies are `denv validate`'s and the reconciler's; a ranking neither reads
# nor judges them, so a fleet being edited does not stop one.
RANKING_FILES = ("catalog/", "results/")

YAML_KINDS: list[tuple[re.Pattern[str], LoadKind]] = [
    (re.compile(r"^catalog/hardware\.yaml$"), _load_hardware),
    (re.compile(r"^catalog/offers\.yaml$"), _load_offers),
    (re.compile(r"^catalog/models\.yaml$"), _load_models),
    (re.compile(r"^catalog/workloads\.yaml$"), _load_workloads),
    (re.compile(r"^recipes/[^/]+/[^/]+\.yaml$"), _load_recipe),
    (re.compile(r"^fleets/[^/]+\.yaml$"), _load_fleet),
    (re.compile(r"^releases/[^/]+/denv\.yaml$"), _load_release),
    (re.compile(r"^releases/[^/]+/promotions\.yaml$"), _load_promotions),
    (re.compile(r"^policies/(alarms|gates|optimizer|pr|scaling)\.yaml$"), _load_policy),
]


def _load_result_json(repo: Repo, path: str, data: bytes, parse: Parse) -> None:
    doc, values, problem = parse(path, data)  # JSON is YAML: this keeps line numbers
    if doc is None:
        _add(repo, problem)
        return
    repo.docs[path] = doc
    if (result := _validate(repo, doc, Result, values)) is not None:
        repo.results.append(result)
        repo.result_lines[result.id] = (path, 1)


def _at_line(number: int) -> Callable[[Sequence[str | int]], tuple[int, int]]:
    return lambda _loc: (number, 1)


def _load_results_jsonl(repo: Repo, path: str, data: bytes) -> None:
    # Line by line from the bytes: a large file is never held twice more as text and lines.
    total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    found = len(repo.problems)
    for number, raw_line in enumerate(io.BytesIO(data), start=1):
        if len(repo.problems) - found >= MAX_ERRORS_PER_FILE:
            del repo.problems[found + MAX_ERRORS_PER_FILE :]
            repo.problems.append(
                Problem(
                    path,
                    number - 1,
                    1,
                    f"stopped after {MAX_ERRORS_PER_FILE} errors: lines {number:,} to "
                    f"{total:,} were not read",
                )
            )
            return
        line, problem = decode_utf8(path, raw_line)
        if line is None:
            assert problem is not None
            _add(repo, Problem(path, number, problem.col, problem.message))
            continue
        if not line.strip():
            continue
        try:  # pydantic's own JSON parser: half the time of json.loads, then validating
            result = Result.model_validate_json(line)
        except ValidationError:
            pass  # read it again below, to name the line and field
        else:
            repo.results.append(result)
            repo.result_lines[result.id] = (path, number)
            continue
        raw, problem = read_line(path, number, line)
        if problem is not None:
            repo.problems.append(problem)
            continue
        try:
            result = Result.model_validate(raw)
        except ValidationError as exc:
            repo.problems.extend(from_validation(path, raw, exc, _at_line(number)))
            continue
        repo.results.append(result)
        repo.result_lines[result.id] = (path, number)


def load_repo(
    source: FileSource, cache: ParseCache | None = None, only: tuple[str, ...] | None = None
) -> Repo:
    """Every denv file of `source`, validated; problems are collected in `repo.problems`.
    With `cache`, YAML files read before are not parsed again (the repository is the same).
    With `only` (path prefixes, e.g. RANKING_FILES), other files are not read: what they
    define is known by name (`Repo.unread`), so references to it stay quiet."""
    with collector_paused():  # a fifth of a load
        return _load_repo(source, parse_values if cache is None else cache.parse, only)


def _load_repo(source: FileSource, parse: Parse, only: tuple[str, ...] | None) -> Repo:
    repo = Repo(label=source.label)
    for path in source.files():
        if only is not None and not path.startswith(only):
            if claimed := _claimed_name(path):
                repo.unread.add(claimed)
            continue
        loader = next((load for pattern, load in YAML_KINDS if pattern.match(path)), None)
        results = path.startswith("results/") and path.endswith((".json", ".jsonl"))
        try:  # every path is looked at (a link that leaves is refused), only denv's read
            source.stat(path)
            data = source.read(path) if loader is not None or results else None
        except UnreadableFile as exc:
            repo.problems.append(Problem(path, 1, 1, str(exc)))
            continue
        if results and data is not None:
            _load_results(repo, path, data, parse)
            continue
        if loader is None or data is None:
            _not_a_kind(repo, path)
            continue
        doc, values, problem = parse(path, data)
        if doc is None:
            _add(repo, problem)
        else:
            repo.docs[path] = doc
            loader(repo, doc, values)
        claimed = _claimed_name(path)
        if claimed and claimed not in repo.origin:
            repo.broken.add(claimed)  # invalid, not missing: references to it stay quiet
    return repo


def _load_results(repo: Repo, path: str, data: bytes, parse: Parse) -> None:
    refusal = size_refusal(path, len(data))  # files that did not come from a source's read
    if refusal is not None:
        repo.problems.append(Problem(path, 1, 1, refusal))
    elif path.endswith(".jsonl"):
        _load_results_jsonl(repo, path, data)
    else:
        _load_result_json(repo, path, data, parse)


def _not_a_kind(repo: Repo, path: str) -> None:
    if path.endswith((".yaml", ".yml")) and not path.startswith(("policies/parity/", "results/")):
        repo.problems.append(
            Problem(
                path,
                1,
                1,
                "not a denv file kind; see docs/files.md for where files go",
                warning=True,
            )
        )


def _claimed_name(path: str) -> str | None:
    """What a file's path says it defines, e.g. fleets/local.yaml -> fleet:local."""
    parts = path.removesuffix(".yaml").split("/")
    if parts[0] == "recipes" and len(parts) == 3:
        return f"recipe:{parts[1]}/{parts[2]}"
    if parts[0] == "fleets" and len(parts) == 2:
        return f"fleet:{parts[1]}"
    if parts[0] == "releases" and len(parts) == 3 and parts[2] == "denv":
        return f"release:{parts[1]}"
    return None


def open_repo(
    root: Path,
    rev: str | None = None,
    trusted_base: str | None = None,
    cache: ParseCache | None = None,
    only: tuple[str, ...] | None = None,
) -> Repo:
    """Load a work tree (or a commit of it) and run the cross-file checks. With
    `trusted_base`, fleets and policies are read from that commit instead (a pull request's
    head: what it may not decide comes from the default branch's tip). `cache`, `only`: see
    `load_repo`; the checks then judge only the files read."""
    from reconciler.spec.checks import check_repo

    source: FileSource = GitCommit(root, rev) if rev else WorkTree(root)
    if trusted_base is not None:
        source = TrustedOverlay(source, GitCommit(root, trusted_base))
    repo = load_repo(source, cache, only)
    repo.problems += check_repo(repo)
    return repo


def load_pr_policy(label: str, data: bytes) -> tuple[PrPolicy | None, list[Problem]]:
    """A PR policy file on its own (`denv validate --pr-policy FILE`): the policy, or None and
    its problems at their positions in the file (named `label`)."""
    doc, values, problem = parse_values(label, data)
    if doc is None:
        return None, [problem] if problem is not None else []
    scratch = Repo(label=label)
    parsed = _validate(scratch, doc, PrPolicyFile, values)
    return (parsed.pr if parsed is not None else None), scratch.problems
