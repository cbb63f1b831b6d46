"""Pure logic: what `denv deploy` may deploy — a result whose engine denv launches and whose recipe
it has, the nearest such result to one it may not — and the release file it writes.

The file goes through the round-trip writer (spec/yamlio.py): a commented template whose values
are set one by one, so a deployed release reads like one a person wrote.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.errors import Problem, SpecError
from reconciler.spec.catalog import ModelArch
from reconciler.spec.engines import engine_names
from reconciler.spec.paths import release_file
from reconciler.spec.recipe import Recipe, Topology
from reconciler.spec.result import Result
from reconciler.spec.yamlio import parse_yaml

TEMPLATE = """\
# yaml-language-server: $schema=../../schemas/release.schema.json
# Written by `denv deploy` from {origin}.
release:
  model: name  # the name clients ask for
  weights: weights  # pinned by commit (catalog/models.yaml)
  recipe: recipe
stages:
  - name: stage
    fleets: [fleet]
"""


def refusal(result: Result, recipes: Mapping[str, Recipe]) -> str | None:
    """Why denv cannot deploy what the result ran; None when it can."""
    engine = result.engine
    if engine.name not in engine_names():
        ran = engine.name + (f" under {engine.orchestrator}" if engine.orchestrator else "")
        can = ", ".join(e for e in engine_names() if e != "sim")
        return f"it ran {ran}, which denv cannot launch (denv launches {can})"
    if result.recipe.id is None:
        return "it names no denv recipe, so denv does not know how to start it"
    if result.recipe.id not in recipes:
        return f"its recipe {result.recipe.id} is not in recipes/"
    return None


def _log_gap(a: float | None, b: float | None) -> float:
    """How far apart two positive figures are, as a ratio; unknown counts as far."""
    if not a or not b:
        return math.inf
    return abs(math.log(a / b))


def nearest_deployable(
    result: Result,
    results: Sequence[Result],
    recipes: Mapping[str, Recipe],
    hardware_aliases: Mapping[str, str],
    on_target: Callable[[Recipe], bool] = lambda recipe: True,
) -> Result | None:
    """The deployable result closest to `result`: same model first, then one whose recipe runs
    on the target (`on_target`), same hardware, the same lengths and precision, then the
    nearest concurrency and throughput per GPU."""

    def hardware(name: str) -> str:
        return hardware_aliases.get(name, name)

    def distance(other: Result) -> tuple[bool, bool, bool, bool, bool, float, float, str]:
        lengths = (other.workload.isl, other.workload.osl)
        assert other.recipe.id is not None  # deployable: it has a recipe
        return (
            other.model != result.model,
            not on_target(recipes[other.recipe.id]),
            hardware(other.hardware) != hardware(result.hardware),
            lengths != (result.workload.isl, result.workload.osl),
            other.precision != result.precision,
            _log_gap(other.load.concurrency, result.load.concurrency),
            _log_gap(other.metrics.output_tok_s_per_gpu, result.metrics.output_tok_s_per_gpu),
            other.id,
        )

    candidates = [r for r in results if r.id != result.id and refusal(r, recipes) is None]
    return min(candidates, key=distance, default=None)


def pinned_weights(model: ModelArch) -> str | None:
    """hf://repo@commit of the model's weights, when catalog/models.yaml pins a commit."""
    if model.hf_repo is None or model.weights is None:
        return None
    return f"hf://{model.hf_repo}@{model.weights.commit}"


@dataclass(frozen=True)
class ReleaseDraft:
    name: str  # releases/<name>/, also the model name clients ask for
    weights: str
    recipe: str
    fleet: str
    stage: str
    origin: str  # e.g. "result ix-…" or "recipe llama-3.1-8b/vllm@1"
    topology: Topology | None = None  # only where it differs from the recipe's

    @property
    def path(self) -> str:
        return release_file(self.name)


def release_text(draft: ReleaseDraft) -> str:
    """The release file of `draft`, from the commented template."""
    doc, problem = parse_yaml(draft.path, TEMPLATE.format(origin=draft.origin).encode())
    if doc is None:
        raise SpecError([problem or Problem(draft.path, 1, 1, "template does not parse")])
    doc.set(("release", "model"), draft.name)
    doc.set(("release", "weights"), draft.weights)
    doc.set(("release", "recipe"), draft.recipe)
    doc.set(("stages", 0, "name"), draft.stage)
    doc.set(("stages", 0, "fleets", 0), draft.fleet)
    if draft.topology is not None:
        doc.set(("release", "topology"), draft.topology.model_dump(exclude_defaults=True))
    return doc.dumps()
