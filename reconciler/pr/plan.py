"""Composition: the plan of a pull request — its head validated, planned against what the fleets
run (as `denv plan` does), commented on the pull request (edited in place on each run) and
set as the `denv plan` check of the head commit. `denv pr plan` and `denv deploy` use it.

The check fails on invalid files, on fields the trusted PR policy refuses (policies/pr.yaml:
images, weights sources, engine flags) and on a deployment that cannot be placed; the comment
says why. The head's commit must be in the local repository (a CI checkout of the pull request has
it; elsewhere `git fetch origin pull/N/head`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.engines.pr_policy import pr_refusals
from reconciler.errors import DenvError, ForgeError, SpecError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.comments import post
from reconciler.forge.localgit import changed_paths, has_commit
from reconciler.forge.models import CheckRun, Conclusion, PrState, PullRequest
from reconciler.forge.protocol import Forge
from reconciler.forge.trusted import TrustedRef, trial_refusal, trusted_ref
from reconciler.forge.views import PlanView
from reconciler.reconcile.plan import Plan
from reconciler.reconcile.render import plan_view, summary
from reconciler.reconcile.snapshot import snapshot
from reconciler.reconcile.source import GitSource, InvalidRevision
from reconciler.spec.policy import Gates, PrPolicy
from reconciler.spec.repo import Repo
from reconciler.spec.sources import is_trusted_path

CHECK = "denv plan"
CHECK_SUMMARY_LIMIT = 60_000  # GitHub keeps 65,535 characters of a check's summary


@dataclass(frozen=True)
class PrPlan:
    pr: PullRequest
    files: list[str]  # what the pull request changes
    problems: list[str]  # invalid files: nothing is planned
    unplaceable: list[str]  # deployments the plan could not place
    plan: Plan | None
    check: CheckRun
    comment_ids: list[int]

    def as_json(self) -> dict[str, object]:
        return {
            "pull_request": self.pr.model_dump(mode="json"),
            "files": self.files,
            "problems": self.problems,
            "unplaceable": self.unplaceable,
            "check": self.check.model_dump(mode="json"),
            "comment_ids": self.comment_ids,
            "plan": None if self.plan is None else self.plan.model_dump(mode="json"),
        }


def _unplaceable(plan: Plan) -> list[str]:
    return [e.where + (f" on {e.fleet}" if e.fleet else "") + f": {e.message}" for e in plan.errors]


def _check(problems: list[str], unplaceable: list[str], plan: Plan | None) -> CheckRun:
    if problems:
        title = f"invalid files: {len(problems)} problem{'s' * (len(problems) != 1)}"
        text, conclusion = "\n".join(problems), Conclusion.FAILURE
    elif unplaceable:
        title = "cannot be placed"
        text, conclusion = "\n".join(unplaceable), Conclusion.FAILURE
    else:
        assert plan is not None
        title, text, conclusion = summary(plan), summary(plan), Conclusion.SUCCESS
        if plan.unreachable:
            # the plan is incomplete (as `denv plan` exits 1), yet not the pull request's
            # fault: neutral does not block a merge, so a PR taking a dead host out can land
            missed = [
                f"{usage.fleet}: {host}: {cause}"
                for usage in plan.fleets
                for host, cause in sorted(usage.unreachable.items())
            ]
            text = "\n".join([text, *missed])
            conclusion = Conclusion.NEUTRAL
    if len(text) > CHECK_SUMMARY_LIMIT:
        text = text[:CHECK_SUMMARY_LIMIT] + "\n… (cut; the plan comment has it all)"
    return CheckRun(name=CHECK, title=title, summary=text, conclusion=conclusion)


def open_head(
    forge: Forge, root: Path, number: int, verb: str, expect_head: str | None = None
) -> PullRequest:
    """Pull request `number`, open, with its head commit in the repository at `root`; with
    `expect_head`, only while its head is still that commit (a command's pinned commit)."""
    pr = forge.pull_request(number)
    if pr.state != PrState.OPEN:
        raise ForgeError(f"pull request #{number} is {pr.state}: only open ones are {verb}")
    if expect_head is not None and pr.head_sha != expect_head:
        raise ForgeError(
            f"#{number}: the head moved to {pr.head_sha[:12]} from {expect_head[:12]}: not {verb}"
        )
    if not has_commit(root, pr.head_sha):
        raise DenvError(
            f"#{number}'s head {pr.head_sha[:12]} is not in {root}: fetch it first "
            f"(git fetch origin pull/{number}/head)"
        )
    return pr


def pull_request_source(root: Path, trusted: TrustedRef, cache: Path) -> GitSource:
    """The pull request's revisions as the bot may act on them: its recipes, releases and
    catalog; fleets, policies and parity suites (where denv connects, what it runs, which
    secret it sends, who may approve, what parity gates on) from the default branch, never
    from the pull request or its base. `cache`: the folder of GitSource's caches."""
    return GitSource(str(root), cache, trusted_base=trusted.commit)


def proposed(source: GitSource, head: str) -> Repo:
    """The head of a pull request as the bot may act on it: valid, and within the trusted PR
    policy (policies/pr.yaml and the fleets' weights roots, read from the trusted ref that
    `source` overlays). InvalidRevision listing every problem of either kind."""
    repo = source.repo_at(head)
    refused = pr_refusals(repo)
    if refused:
        raise InvalidRevision(head, refused)
    return repo


def trusted_gates(forge: Forge, root: Path, cache: Path) -> Gates:
    """The approval rules of the default branch, never of a pull request's head, base or work
    tree: a pull request cannot lower the bar it must clear. SpecError when they are invalid."""
    trusted = trusted_ref(forge, root)
    try:
        source = pull_request_source(root, trusted, cache)
        return source.repo_at(trusted.commit).policies.gates
    except InvalidRevision as exc:
        raise SpecError(exc.problems) from None


def approved_by(forge: Forge, root: Path, pr: PullRequest, user: str, cache: Path) -> None:
    """DenvError unless `user`'s approval of the head counts (write permission, or named by
    the default branch's approvers policy; not the author): anyone else's review starts
    nothing."""
    approvals = forge.approvals(pr.number, trusted_gates(forge, root, cache).approvers)
    if approvals.head_sha != pr.head_sha:  # pushed since `pr` was read: not what was approved
        raise ForgeError(
            f"#{pr.number}: the head moved to {approvals.head_sha[:12]} from "
            f"{pr.head_sha[:12]}: nothing benched"
        )
    if user not in approvals.counted:
        why = next((i.reason for i in approvals.ignored if i.user == user), "no approval")
        raise ForgeError(f"#{pr.number}: {user}'s review does not count ({why}): nothing benched")


def trusted_policy(source: GitSource, trusted: TrustedRef) -> PrPolicy:
    """The PR policy of the default branch (policies/pr.yaml there, else its defaults), never
    a pull request's own: a pull request that edits it changes nothing for itself. SpecError
    when the default branch's files are invalid."""
    try:
        return source.repo_at(trusted.commit).policies.pr
    except InvalidRevision as exc:
        raise SpecError(exc.problems) from None


def trials_refused(pr: PullRequest, trusted: TrustedRef, policy: PrPolicy) -> str | None:
    """Why nothing of pull request `pr` may run on hosts (None: it may), for its plan and its
    bench alike: its base is neither the default branch nor one of the trusted policy's
    `allowed_bases`."""
    return trial_refusal(pr, trusted, allowed_bases=policy.allowed_bases)


def trusted_note(files: list[str], trusted: TrustedRef, refusal: str | None = None) -> str | None:
    """What a pull request changes that the bot does not take from it, and why nothing of it
    runs on hosts (`refusal`, forge/trusted.py), said in its comments."""
    said = []
    if refusal is not None:
        said.append(refusal)
    if ignored := [f for f in files if is_trusted_path(f)]:
        named = ", ".join(f"`{f}`" for f in ignored)
        said.append(
            f"This pull request changes {named}: fleets, policies and parity suites are read "
            f"from the default branch, `{trusted.branch}`, so they take effect once merged "
            f"there; this run used `{trusted.branch}`'s."
        )
    return " ".join(said) or None


def plan_pull_request(
    forge: Forge,
    root: Path,
    number: int,
    drivers: Drivers,
    status: Callable[[str], None] = lambda message: None,
    expect_head: str | None = None,
    *,
    cache: Path,
) -> PrPlan:
    """Validate and plan the head of pull request `number` (only while it is `expect_head`,
    when given), comment the plan, set the check."""
    pr = open_head(forge, root, number, "planned", expect_head)
    trusted = trusted_ref(forge, root)
    files = changed_paths(root, pr.base_branch, pr.head_sha)
    source = pull_request_source(root, trusted, cache)
    problems: list[str] = []
    plan: Plan | None = None
    status(f"validating {pr.head_sha[:12]}")
    try:
        proposed(source, pr.head_sha)
    except InvalidRevision as exc:
        problems = [str(p) for p in exc.problems]
    if not problems:
        plan = snapshot(source, drivers, pr.head_sha, status).plan
    unplaceable = _unplaceable(plan) if plan is not None else []
    # planned whatever its base, always against the default branch's fleets and policies
    refusal = trials_refused(pr, trusted, trusted_policy(source, trusted))
    note = trusted_note(files, trusted, refusal)
    if plan is None:
        view = PlanView(
            head_sha=pr.head_sha, base=trusted.branch, files=files, problems=problems, note=note
        )
    else:
        view = plan_view(plan, trusted.branch, files, note)
    status(f"commenting on #{number}")
    ids = post(forge, number, view)
    check = _check(problems, unplaceable, plan)
    forge.set_check(pr.head_sha, check)
    return PrPlan(pr, files, problems, unplaceable, plan, check, ids)
