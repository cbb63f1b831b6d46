"""What an invalid file holds on the default branch (spec/isolation.py): the file's own
thing, the releases that run a held recipe, rankings for results; everything for the
catalog's hardware and models and for policies."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.spec.isolation import EVERYTHING, RANKING, held_lines, holds, isolate
from reconciler.spec.loader import open_repo


@pytest.mark.parametrize(
    ("path", "held"),
    [
        ("fleets/local.yaml", "fleet:local"),
        ("releases/chat-8b/denv.yaml", "release:chat-8b"),
        ("releases/chat-8b/promotions.yaml", "release:chat-8b"),
        ("recipes/llama-3.1-8b/vllm@1.yaml", "recipe:llama-3.1-8b/vllm@1"),
        ("results/2026-12/runs.jsonl", RANKING),
        ("catalog/offers.yaml", RANKING),
        ("catalog/workloads.yaml", RANKING),
        ("catalog/hardware.yaml", EVERYTHING),
        ("catalog/models.yaml", EVERYTHING),
        ("policies/alarms.yaml", EVERYTHING),
        ("recipes/stray.yaml", EVERYTHING),
    ],
    ids=lambda value: str(value),
)
def test_what_a_file_holds(path: str, held: str) -> None:
    assert holds(path) == held


Edit = Callable[[str, str, str], None]


def test_a_broken_recipe_holds_the_releases_that_run_it(denv_repo: Path, edit: Edit) -> None:
    edit("recipes/llama-3.1-8b/vllm@1.yaml", "engine:", "engine_:")
    repo = open_repo(denv_repo)
    assert isolate(repo) == []
    assert "chat-8b" not in repo.releases and "chat-8b" not in repo.promotions
    assert set(repo.held) == {"recipe:llama-3.1-8b/vllm@1", "release:chat-8b"}
    assert repo.fleets and "llama-3.1-8b/sglang@1" in repo.recipes  # the rest loads
    lines = held_lines(repo)  # one line per problem, saying all it holds
    assert len(lines) == len(repo.held["recipe:llama-3.1-8b/vllm@1"]) == 2  # engine_, engine
    for line in lines:
        assert line.startswith("recipes/llama-3.1-8b/vllm@1.yaml:")
        assert "holds recipe llama-3.1-8b/vllm@1; release chat-8b:" in line


def test_a_garbled_result_holds_the_results_only(denv_repo: Path) -> None:
    (denv_repo / "results").mkdir(exist_ok=True)
    (denv_repo / "results/bad.jsonl").write_text('{"id": \n')
    repo = open_repo(denv_repo)
    assert isolate(repo) == [] and repo.results == []
    assert set(repo.held) == {RANKING} and "chat-8b" in repo.releases


def test_a_broken_policy_holds_everything(denv_repo: Path, edit: Edit) -> None:
    edit("policies/alarms.yaml", "alarms:", "alarms_:")
    repo = open_repo(denv_repo)
    assert [p.path for p in isolate(repo)][:1] == ["policies/alarms.yaml"]
