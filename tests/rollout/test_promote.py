"""Promotion PRs on the local forge over a real git repository: the body's evidence (the bake's
alarm readings, bench results of the recipe the next stage will run) and stale PRs closed."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.catalog.deployments import deployments
from reconciler.catalog.roofline import Roofline, roofline
from reconciler.forge.local import LocalForge
from reconciler.forge.models import PrState
from reconciler.reconcile.desired import Desired
from reconciler.reconcile.plan import Plan
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.benchfigures import Wanted, bench_figures
from reconciler.rollout.promote import Promoter
from reconciler.rollout.revisions import Revisions
from reconciler.rollout.state import AlarmValue, Phase, PromotionPr, RolloutState, StageRecord
from reconciler.spec.result import Result
from reconciler.trials.plan import recipe_digest
from tests.engines.model.perfspecs import hardware, model
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture

RELEASE = "releases/chat-8b/denv.yaml"
SEEN = AlarmValue(
    name="ttft-p99-1.5s", value=0.21, requests=812, firing=False, text="ttft p99 210 ms ≤ 1.5 s"
)
QUIET = AlarmValue(
    name="errors-1pct", value=None, requests=0, firing=False, text="not judged, 0 requests < 100"
)


def result(digest: str, concurrency: int, day: int, tok: float, kind: str = "simulated") -> Result:
    return Result.model_validate(
        {
            "id": f"llama-3.1-8b-vllm-1-h200-c{concurrency}-202503{day:02d}t120000",
            "model": "llama-3.1-8b",
            "recipe": {"id": "llama-3.1-8b/vllm@1", "digest": digest},
            "engine": {"name": "vllm", "version": "0.11.0"},
            "hardware": "h200",
            "gpus": 1,
            "workload": {"isl": 1000, "osl": 100},
            "load": {"concurrency": concurrency},
            "metrics": {
                "output_tok_s_per_gpu": tok,
                "tpot_ms": {"p50": 10.0},
                "ttft_ms": {"p99": 180.0},
                "itl_ms": {"p99": 9.5},
            },
            "source": {"kind": kind, "at": f"2025-03-{day:02d}"},
        }
    )


def _roofline(result: Result) -> Roofline:
    return roofline(result, hardware("h200"), model("llama-3.1-8b"))


def test_bench_figures_keep_the_newest_result_per_load_of_the_digest() -> None:
    results = [
        result("d1", 8, 1, 1000.0),
        result("d1", 8, 3, 1100.0, kind="measured"),
        result("d1", 64, 2, 4000.0),
        result("d2", 8, 4, 9999.0),  # another recipe
    ]
    rows = bench_figures(results, [Wanted("local", "h200", "d1")], lambda hw: hw, _roofline)
    assert [(r.load, r.tok_s_gpu, r.source) for r in rows] == [
        ("c8", 1100.0, "measured"),
        ("c64", 4000.0, "simulated"),
    ]
    for row, kept in zip(rows, (results[1], results[2]), strict=True):
        roof = _roofline(kept)
        assert roof.decode is not None and roof.prefill is not None
        assert (row.decode_hbm, row.prefill_compute) == (
            roof.decode.fraction,
            roof.prefill.fraction,
        )
    assert bench_figures(results, [Wanted("local", "b200", "d1")], lambda hw: hw, _roofline) == []


def snap_of(repo: GitRepo) -> tuple[Snapshot, Revisions]:
    source = repo.source()
    source.sync()
    head = source.resolve()
    snap = Snapshot(head, source.repo_at(head), Desired(head=head), {}, Plan(head=head))
    return snap, Revisions(source)


def green(revision: str, **changes: Any) -> RolloutState:
    canary = StageRecord(
        revision=revision, phase=Phase.GREEN, ready=True, ready_at=1.0e9, green_at=1.0e9 + 600,
        good=revision, alarms=[], evidence=[SEEN, QUIET],
    )  # fmt: skip
    return RolloutState(stages={"chat-8b/canary": canary.model_copy(update=changes)})


@pytest.fixture
def promoted(git_repo: GitRepo) -> tuple[GitRepo, LocalForge, str, RolloutState]:
    """The canary green at the first revision, results of the recipe prod will run, and the
    promotion PR the bot opened for it."""
    first = str(git_repo.git.head.target)
    snap, _ = snap_of(git_repo)
    [prod] = [d for d in deployments(snap.repo) if d.stage == "prod"]
    digest = recipe_digest(prod.recipe)
    for found in (result(digest, 8, 1, 1000.0), result(digest, 8, 5, 1234.5)):
        path = f"results/llama-3.1-8b/vllm@1/h200/{found.id}.json"
        git_repo.write(path, found.model_dump_json(exclude_defaults=True))
    git_repo.commit("bench results")
    snap, revisions = snap_of(git_repo)
    forge = LocalForge(git_repo.path)
    kept = green(first)
    Promoter(revisions, lambda: forge, print).promotions(
        snap, "chat-8b", snap.repo.releases["chat-8b"], kept, {}, 1.0e9 + 600
    )
    return git_repo, forge, first, kept


def test_the_body_shows_bench_results_and_never_an_unjudged_alarm_as_ok(
    promoted: tuple[GitRepo, LocalForge, str, RolloutState],
) -> None:
    _, forge, _, kept = promoted
    [pr] = forge.pull_requests()
    assert kept.stages["chat-8b/canary"].promotion.number == pr.number  # type: ignore[union-attr]
    assert "| `local` | h200 | c8 | 1,234 | 180 ms | 9.5 ms | 37% | 20% | simulated |" in pr.body
    assert "20250301" not in pr.body  # the older result at the same load
    assert "| errors-1pct | not judged, 0 requests < 100 | ≤ 1% over 5m | not judged |" in pr.body
    assert "| ttft-p99-1.5s | ttft p99 210 ms ≤ 1.5 s | ≤ 1.5 s over 5m | ok |" in pr.body


def test_a_promotion_of_a_rejected_revision_is_closed_with_why(
    promoted: tuple[GitRepo, LocalForge, str, RolloutState],
) -> None:
    repo, forge, first, kept = promoted
    kept.rejected[first] = "ttft p99 2 s > 1.5 s"
    snap, revisions = snap_of(repo)
    Promoter(revisions, lambda: forge, print).promotions(
        snap, "chat-8b", snap.repo.releases["chat-8b"], kept, {}, 1.0e9 + 700
    )
    pr = kept.stages["chat-8b/canary"].promotion
    assert pr is not None and pr.state == "closed"
    closed = forge.pull_request(pr.number)
    assert closed.state == PrState.CLOSED
    [comment] = forge.comments(pr.number)
    assert "will not merge this" in comment.body and "ttft p99 2 s" in comment.body


def test_a_promotion_superseded_by_a_newer_pin_is_closed_and_never_reopened(
    promoted: tuple[GitRepo, LocalForge, str, RolloutState],
) -> None:
    repo, forge, first, kept = promoted
    number = kept.stages["chat-8b/canary"].promotion.number  # type: ignore[union-attr]
    repo.replace(RELEASE, "max_batch: 128", "max_batch: 64")
    newer = repo.commit("max_batch 64")
    repo.pin("chat-8b", "prod", newer)  # a person promoted the newer revision by hand
    repo.commit("prod runs the newer revision")
    snap, revisions = snap_of(repo)
    stale = PromotionPr(number=number, url="u", revision=first, stage="prod")
    kept = green(first, promotion=stale)
    promoter = Promoter(revisions, lambda: forge, print)
    for now in (1.0e9 + 700, 1.0e9 + 800):  # the second pass opens nothing new
        promoter.promotions(snap, "chat-8b", snap.repo.releases["chat-8b"], kept, {}, now)
    assert forge.pull_request(number).state == PrState.CLOSED
    assert forge.pull_requests() == []
    [comment] = forge.comments(number)
    assert f"superseded, `prod` runs the newer `{newer[:12]}`" in comment.body
