"""results/simulated/sim-predict.jsonl is up to date: one set of rows for every recipe,
hardware and workload that no published or measured result covers, each carrying the digest
of what its figures follow from; and a row predicted again comes out the same."""

from __future__ import annotations

import pytest

from reconciler.engines.model.simulated_results import (
    CONCURRENCIES,
    Target,
    digest_of,
    simulate,
    targets,
)
from reconciler.spec.loader import load_repo
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result
from reconciler.spec.sources import WorkTree
from tests.conftest import ROOT

STALE = "results/simulated/sim-predict.jsonl is stale: run scripts/simulate_results.py"


@pytest.fixture(scope="module")
def repo() -> Repo:
    return load_repo(WorkTree(ROOT))


def _wanted(repo: Repo) -> list[Target]:
    profiles = list(repo.workloads.values())
    return targets(repo.recipes.values(), repo.hardware, repo.models, profiles, repo.results)


def _held(repo: Repo) -> list[Result]:
    return [r for r in repo.results if r.source.kind == "simulated"]


def test_every_target_has_current_rows_and_no_row_is_stale(repo: Repo) -> None:
    wanted = {t.digest: t for t in _wanted(repo)}
    held = {digest_of(r) for r in _held(repo)}
    assert sorted(held - set(wanted)) == [], STALE
    assert sorted(f"{t.recipe.id} {t.hardware.id} {t.profile.id}"
                  for d, t in wanted.items() if d not in held) == [], STALE  # fmt: skip


def test_every_recipe_and_workload_is_simulated_or_published(repo: Repo) -> None:
    simulated = {(r.recipe.id, r.workload.name) for r in _held(repo)}
    assert {recipe for recipe, _ in simulated} >= {
        r.id for r in repo.recipes.values() if not r.model.startswith("deepseek")
    }
    assert {workload for _, workload in simulated} == set(repo.workloads)


def test_a_row_predicted_again_is_the_same(repo: Repo) -> None:
    target = next(
        t
        for t in _wanted(repo)
        if (t.recipe.id, t.hardware.id, t.profile.id) == ("llama-3.1-8b/vllm@1", "h200", "chat")
    )
    again = simulate(target)
    held = sorted((r for r in _held(repo) if digest_of(r) == target.digest), key=lambda r: r.id)
    assert [r.load.concurrency for r in again] == list(CONCURRENCIES)
    assert sorted(again, key=lambda r: r.id) == held, STALE
