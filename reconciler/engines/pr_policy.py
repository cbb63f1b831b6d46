"""Pure logic: the PR policy's judgement of a repository (reconciler/spec/pr_policy.py) with
what only the engines know: their official images, which a pull request may always run (they
are what denv renders when a recipe names no image)."""

from __future__ import annotations

from reconciler.engines.cards import cards
from reconciler.errors import Problem
from reconciler.spec.policy import PrPolicy
from reconciler.spec.pr_policy import pr_policy_problems
from reconciler.spec.pr_rules import official_repository
from reconciler.spec.repo import Repo


def official_images() -> tuple[str, ...]:
    """The repository of each engine's official image (`vllm/vllm-openai`)."""
    return tuple(
        official_repository(card.IMAGE) for card in cards().values() if card.IMAGE is not None
    )


def pr_refusals(repo: Repo, policy: PrPolicy | None = None) -> list[Problem]:
    """Each field of `repo` the PR policy refuses (default: `repo`'s own policies/pr.yaml)."""
    return pr_policy_problems(repo, policy, official_images())
