"""Every lever the optimizer can move, alone, in pairs and all at once, promotes into a release
file that loads, validates and renders, and that runs exactly the candidate's recipe.

The cases come from the lever table (`levers.ALL_LEVERS` and each space's choices), not from a
hand-picked list: a lever added to the table is tested here without a line changing. The
release files are copies of releases/chat-8b/denv.yaml (its flow maps and comments included),
as written and moved onto mixture-of-experts recipes, so the expert levers have choices.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import get_args

import pytest

from reconciler.catalog.deployments import deployments
from reconciler.engines.units import EngineContext
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.render import render
from reconciler.optimize import levers as lv
from reconciler.optimize.levers import Value
from reconciler.optimize.promote import edit_release
from reconciler.optimize.space import Candidate, SearchSpace
from reconciler.spec.checks import check_repo, domain_size
from reconciler.spec.loader import YAML_KINDS
from reconciler.spec.policy import OptimizerRules
from reconciler.spec.recipe import Quantization
from reconciler.spec.repo import Repo
from reconciler.spec.yamlio import parse_yaml
from tests.conftest import ROOT
from tests.optimize.spaces import repo

PATH = "releases/chat-8b/denv.yaml"
FLEET = "local"
BUDGET = 8
# Every format a policy may allow, and engine changes: the widest space there is.
RULES = OptimizerRules(allow_quantization=[q for q in get_args(Quantization) if q != "none"])


@dataclass(frozen=True)
class Base:
    name: str
    text: str


def _moved(recipe: str) -> Base:
    """The example release running `recipe` instead (its own topology: the line goes)."""
    text = (ROOT / PATH).read_text()
    model = repo().models[repo().recipes[recipe].model]
    assert model.weights is not None
    weights = f"hf://{model.hf_repo}@{model.weights.commit}"
    old = repo().releases["chat-8b"].release
    lines = [line for line in text.splitlines(keepends=True) if "topology:" not in line]
    moved = "".join(lines).replace(old.recipe, recipe).replace(old.weights, weights)
    return Base(recipe, moved)


@cache
def bases() -> tuple[Base, ...]:
    return (
        Base("chat-8b", (ROOT / PATH).read_text()),
        _moved("deepseek-r1/sglang-fp8-h200-tp8-mtp@1"),  # MoE, MTP with a draft length
        _moved("qwen3-235b-a22b/vllm@1"),  # MoE on vLLM: expert and data parallel
    )


def with_release(text: str) -> Repo:
    """This repository with the release file as `text` (loaded as the loader loads it)."""
    doc, problem = parse_yaml(PATH, text.encode())
    assert doc is not None, f"the promoted file does not parse: {problem}\n{text}"
    base = repo()
    loaded = copy.copy(base)
    loaded.releases = {}
    loaded.docs = {**base.docs, PATH: doc}
    loaded.origin = {k: v for k, v in base.origin.items() if not k.startswith("release:")}
    loaded.problems = []
    load = next(load for pattern, load in YAML_KINDS if pattern.match(PATH))
    load(loaded, doc)
    loaded.problems += check_repo(loaded)
    return loaded


@cache
def space(base: Base) -> SearchSpace:
    loaded = with_release(base.text)
    assert not loaded.errors, loaded.errors
    return SearchSpace.for_release(loaded, "chat-8b", FLEET, BUDGET, RULES, levers=lv.ALL_LEVERS)


def promote(base: Base, candidate: Candidate) -> str:
    """The release file once the candidate is promoted, as `denv optimize promote` writes it."""
    edit = space(base).release_edit(candidate)
    doc, _ = parse_yaml(PATH, base.text.encode())
    assert doc is not None
    edit_release(doc, edit.recipe, edit.overrides, edit.topology)
    return doc.dumps()


def check_promoted(base: Base, candidate: Candidate) -> None:
    """Loads, validates, resolves to the candidate's recipe, and renders: the simulator's units
    on the fleet as declared, and the engine's own argv on the fleet's real hardware."""
    text = promote(base, candidate)
    loaded = with_release(text)
    assert not loaded.errors, "\n".join(map(str, loaded.errors)) + "\n" + text
    found = [d for d in deployments(loaded) if d.release == "chat-8b"]
    assert found, f"the promoted release resolves to no deployment:\n{text}"
    wanted = space(base).recipe_of(candidate)
    for deployment in found:
        assert deployment.recipe == wanted, text
        fleet = loaded.fleets[deployment.fleet]
        hardware = loaded.resolve_hardware(fleet.hardware)
        assert hardware is not None
        context = EngineContext(
            hardware=hardware,
            model=loaded.models.get(deployment.recipe.model),
            python="python3",
            engine_python="python3",
        )
        domain = domain_size(loaded, fleet.name) or 1
        for on in (fleet, fleet.model_copy(update={"simulated": False})):
            units = render(deployment, on, domain, context, rules_of(on))
            assert units and all(unit.argv for unit in units), text


def _others(lever: lv.Lever, space: SearchSpace) -> list[Value]:
    now = space.current().choices.get(lever.name)
    return [choice for choice in lever.choices if not (choice == now and type(choice) is type(now))]


def _moving(lever: lv.Lever, choice: Value) -> dict[str, Value]:
    """The choices that move one lever: a pool lever moves the mode to its own as well."""
    return {lv.MODE: lever.mode, lever.name: choice} if lever.mode else {lever.name: choice}


def singles(base: Base, name: str) -> Iterator[Candidate]:
    """Each of the lever's choices but the current one that is feasible."""
    found = space(base)
    for lever in (lever for lever in found.levers if lever.name == name):
        for choice in _others(lever, found):
            built = found.build(_moving(lever, choice))
            if isinstance(built, Candidate):
                yield built


def _compatible(a: lv.Lever, b: lv.Lever) -> bool:
    modes = {a.mode, b.mode} - {None}
    moves_mode = lv.MODE in (a.name, b.name)
    return len(modes) < 2 and not (moves_mode and modes)


def pairs(base: Base) -> Iterator[tuple[str, str, Candidate]]:
    """For each two levers, the first feasible candidate that moves both."""
    found = space(base)
    for a, b in itertools.combinations(found.levers, 2):
        if not _compatible(a, b):
            continue
        for x, y in itertools.product(_others(a, found), _others(b, found)):
            built = found.build({**_moving(a, x), **_moving(b, y)})
            if isinstance(built, Candidate):
                yield a.name, b.name, built
                break


def everything(base: Base) -> Iterator[Candidate]:
    """In each mode, as many levers moved at once as stay feasible, each to its first choice
    that does."""
    found = space(base)
    now = found.current().choices.get(lv.MODE)
    modes = next((lever.choices for lever in found.levers if lever.name == lv.MODE), (now,))
    for mode in modes:
        chosen: dict[str, Value] = {} if mode == now else {lv.MODE: mode}
        for lever in found.levers:
            if lever.name == lv.MODE or lever.mode not in (None, mode):
                continue
            for choice in _others(lever, found):
                if isinstance(found.build({**chosen, lever.name: choice}), Candidate):
                    chosen[lever.name] = choice
                    break
        built = found.build(chosen)
        if isinstance(built, Candidate):
            yield built


@pytest.mark.parametrize("name", lv.ALL_LEVERS)
def test_every_choice_of_every_lever_promotes_into_a_release_that_renders(name: str) -> None:
    tested = 0
    for base in bases():
        for candidate in singles(base, name):
            check_promoted(base, candidate)
            tested += 1
    assert tested, f"no release of the test offers a feasible choice of lever {name}"


@pytest.mark.parametrize("index", range(3), ids=["chat-8b", "deepseek-r1-mtp", "qwen3-moe"])
def test_every_pair_of_levers_promotes_into_a_release_that_renders(index: int) -> None:
    base = bases()[index]
    moved = set()
    for a, b, candidate in pairs(base):
        check_promoted(base, candidate)
        moved |= {a, b}
    # every lever that moves alone moves beside another
    assert moved >= {lever.name for lever in space(base).levers if any(singles(base, lever.name))}


@pytest.mark.parametrize("index", range(3), ids=["chat-8b", "deepseek-r1-mtp", "qwen3-moe"])
def test_all_levers_moved_at_once_promote_into_a_release_that_renders(index: int) -> None:
    base = bases()[index]
    moved = list(everything(base))
    assert moved and max(len(candidate.choices) for candidate in moved) >= 10
    for candidate in moved:
        check_promoted(base, candidate)
    for sampled in space(base).sample(5, seed=index):
        check_promoted(base, sampled)


def test_speculative_decoding_with_a_draft_length_promotes() -> None:
    """docs/optimize.md's first example: a block of several settings the file lacks."""
    base = bases()[0]
    built = space(base).build({lv.SPECULATIVE: "ngram:4"})
    assert isinstance(built, Candidate)
    text = promote(base, built)
    assert "speculative: { method: ngram, draft_tokens: 4, draft_model: null }" in text
    check_promoted(base, built)
