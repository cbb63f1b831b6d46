"""A pull request's bench rows: each result's roofline summary beside its figures."""

from __future__ import annotations

from pathlib import Path

from reconciler.bench.pr_subjects import BenchSubject, Side
from reconciler.bench.pr_view import bench_rows
from reconciler.catalog.roofline import result_roofline, summary
from reconciler.spec.loader import load_repo
from reconciler.spec.sources import WorkTree
from tests.catalog.factories import result
from tests.conftest import ROOT

RECIPE = "llama-3.1-8b/vllm@1"


def test_each_row_carries_its_results_roofline() -> None:
    repo = load_repo(WorkTree(Path(ROOT)))
    recipe = repo.recipes[RECIPE]
    side = Side(label=RECIPE, recipe=recipe, weights="meta-llama/Llama-3.1-8B-Instruct")
    subject = BenchSubject(kind="recipe", name=RECIPE, fleet="local", candidate=side, current=None)
    topology = recipe.topology.model_dump()
    measured = result(
        model="llama-3.1-8b", precision=None, gpus=None, topology=topology, recipe=RECIPE
    )
    [row] = bench_rows(subject, [], [measured], True, repo)
    assert row.roofline == summary(result_roofline(repo, measured))
    assert row.roofline.startswith("decode ") and "of HBM bandwidth (4.8 TB/s)" in row.roofline
    assert "of bf16 compute (989 TFLOPS)" in row.roofline
