"""A pull request from open to merged through the fake GitHub, as CI and reviewers drive it:
plan comment and check, an approval that does not count and one that does, bench comment,
merge. (Reconciling main after the merge belongs to the reconcile layer's own flow.)"""

from __future__ import annotations

from reconciler.forge.commands import merge_blockers
from reconciler.forge.models import CheckRun, Conclusion, MergeStatus, PrState
from reconciler.forge.render import render_bench, render_plan
from reconciler.forge.views import BenchRow, BenchView, MetricDelta, PlanAction, PlanView
from reconciler.spec.loader import open_repo
from tests.forge.conftest import GitHubSetup
from tests.forge.gitrepo import git
from tests.forge.test_github import RELEASE, open_pr


def test_pull_request_from_open_to_merged(github: GitHubSetup) -> None:
    forge, fake = github.forge, github.fake
    number, head = open_pr(github)
    pr = forge.pull_request(number)

    # plan.yml: validate the head commit, comment the plan, set the check
    at_head = open_repo(github.work, rev=head)
    changed = git(github.work, "diff", "--name-only", f"main...{head}").splitlines()
    view = PlanView(
        head_sha=pr.head_sha,
        files=changed,
        problems=[str(p) for p in at_head.errors],
        actions=[
            PlanAction(
                wave=1,
                kind="replace",
                target="chat-8b/canary on local",
                reason="max_batch 128 → 192",
            )
        ],
    )
    forge.upsert_comment(number, "plan", render_plan(view))
    forge.set_check(
        head,
        CheckRun(name="denv plan", title="1 action", summary="", conclusion=Conclusion.SUCCESS),
    )
    assert changed == [RELEASE] and not at_head.errors

    # reviews: one without write permission, then one that counts
    gates = at_head.policies.gates
    fake.review(number, "mallory")
    assert forge.approvals(number, gates.approvers).count == 0
    fake.review(number, "grace")
    approvals = forge.approvals(number, gates.approvers)
    assert approvals.counted == ["grace"]

    # bench.yml, after the approving review: results with deltas against the release
    bench = BenchView(
        head_sha=head,
        current="chat-8b @ main",
        traffic="agent",
        rows=[
            BenchRow(
                subject="llama-3.1-8b/vllm@1",
                fleet="local",
                hardware="h200",
                simulated=True,
                metrics=[
                    MetricDelta(
                        name="output",
                        unit="tok/s/GPU",
                        current=2410.0,
                        candidate=2795.6,
                        higher_is_better=True,
                    )
                ],
            )
        ],
    )
    forge.upsert_comment(number, "bench", render_bench(bench))
    forge.set_check(
        head, CheckRun(name="denv bench", title="+16.0%", summary="", conclusion=Conclusion.SUCCESS)
    )

    # the gate, then the merge of exactly the approved head
    assert merge_blockers(approvals, gates.default_approvals, forge.checks(head)) == []
    outcome = forge.merge(number, head_sha=head)
    assert outcome.status == MergeStatus.MERGED
    assert forge.pull_request(number).state == PrState.MERGED
    kinds = [body.splitlines()[0] for body in fake.comment_bodies(number)]
    assert kinds == ["<!-- denv:plan -->", "<!-- denv:bench -->"]
    git(github.work, "fetch", "-q", "origin")
    assert not open_repo(github.work, rev="origin/main").errors
    assert "max_batch: 192" in git(github.work, "show", f"origin/main:{RELEASE}")
