"""CLI: `denv pr …` — pull requests on the local forge: open, list, show, approve, merge; and
`denv pr plan`, `bench` and `commands` (pr_runs.py), which comment on a pull request of the
local forge or of GitHub."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from reconciler.cli import pr_runs, terminal
from reconciler.cli.common import JsonOption, RepoOption, console, print_json
from reconciler.cli.plan import cache_dir
from reconciler.errors import ForgeError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.commands import merge_blockers
from reconciler.forge.config import local_forge, open_forge
from reconciler.forge.local import LocalForge
from reconciler.forge.markers import read_marker
from reconciler.forge.models import Approvals, MergeStatus, PrState, PullRequest
from reconciler.pr.plan import plan_pull_request, trusted_gates
from reconciler.spec.sources import find_root

app = typer.Typer(
    help="Pull requests on the local forge: branches of this repository with their comments, "
    "checks and approvals.",
    no_args_is_help=True,
)

app.command("bench")(pr_runs.bench)
app.command("commands")(pr_runs.commands)

NumberArg = Annotated[int, typer.Argument(help="Pull request number.", min=1)]


def _forge(repo: Path, user: str | None = None) -> LocalForge:
    return local_forge(find_root(repo), os.environ, user)


def _approvals(repo: Path, forge: LocalForge, number: int) -> tuple[Approvals, int]:
    """The approvals policy of the default branch, never of the pull request or its base."""
    gates = trusted_gates(forge, find_root(repo), cache_dir())
    return forge.approvals(number, gates.approvers), gates.default_approvals


def _checks_line(forge: LocalForge, pr: PullRequest) -> str:
    checks = forge.checks(pr.head_sha)
    return ", ".join(f"{c.name}: {c.conclusion}" for c in checks) or "none"


@app.command("list")
def list_prs(
    state: Annotated[PrState, typer.Option(help="Which pull requests.")] = PrState.OPEN,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Pull requests with their head, approvals and checks."""
    forge = _forge(repo)
    prs = forge.pull_requests(state)
    unreadable = forge.unreadable()
    if as_json:
        found = [pr.model_dump(mode="json") for pr in prs]
        print_json({"pull_requests": found, "unreadable": unreadable})
    elif not prs:
        console.print(f"No {state} pull requests.")
    else:
        _table(forge, prs)
    if unreadable:  # never read as absent: the listing is incomplete, and says so
        raise ForgeError("\n".join(unreadable))


def _table(forge: LocalForge, prs: list[PullRequest]) -> None:
    table = Table("#", "TITLE", "BRANCH", "AUTHOR", "HEAD", "APPROVALS", "CHECKS", box=None)
    for pr in prs:
        approvals = forge.approvals(pr.number)
        table.add_row(
            str(pr.number),
            pr.title,
            f"{pr.head_branch} → {pr.base_branch}",
            pr.author,
            pr.head_sha[:12],
            str(approvals.count),
            _checks_line(forge, pr),
        )
    console.print(table)


@app.command("repair")
def repair(number: NumberArg, repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """Set an unreadable pull request record aside and record the pull request as closed;
    the bot opens a new one for its branch if its change is still wanted."""
    kept = _forge(repo).repair(number)
    if as_json:
        print_json({"number": number, "kept": str(kept)})
        return
    console.print(f"#{number}: recorded as closed; the unreadable record is kept as {kept}")


@app.command("show")
def show(number: NumberArg, repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """A pull request: description, checks of its head, approvals and comments."""
    forge = _forge(repo)
    pr = forge.pull_request(number)
    approvals, required = _approvals(repo, forge, number)
    comments = forge.comments(number)
    if as_json:
        print_json(
            {
                "pull_request": pr.model_dump(mode="json"),
                "checks": [c.model_dump(mode="json") for c in forge.checks(pr.head_sha)],
                "approvals": {**approvals.model_dump(mode="json"), "required": required},
                "comments": [c.model_dump(mode="json") for c in comments],
            }
        )
        return
    console.print(Text.assemble((f"#{pr.number} {pr.title}", "bold"), f"  ({pr.state})"))
    console.print(f"{pr.author} wants {pr.head_branch} → {pr.base_branch} at {pr.head_sha[:12]}")
    if pr.body:
        console.print(Markdown(pr.body, hyperlinks=False))
    console.print(f"checks: {_checks_line(forge, pr)}")
    counted = ", ".join(approvals.counted) or "none"
    if approvals.opening is not None:
        console.print(f"cannot merge: {approvals.opening}", markup=False)
    console.print(f"approvals: {approvals.count} of {required} ({counted})")
    for ignored in approvals.ignored:
        console.print(f"  not counted: {ignored.user}: {ignored.reason}")
    for comment in comments:
        kind = read_marker(comment.body)
        label = f" [{kind[0]}]" if kind else ""
        console.rule(f"{comment.author}{label} · {comment.at:%Y-%m-%d %H:%M}")
        console.print(Markdown(comment.body, hyperlinks=False))


@app.command("approve")
def approve(
    number: NumberArg,
    user: Annotated[
        str | None, typer.Option("--as", help="Who approves (default: git config user.name).")
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            help="The SSH key that signs the approval (default: git config user.signingKey); "
            "it counts when the default branch's policies/allowed_signers lists it for the "
            "approver.",
        ),
    ] = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Approve the pull request's current head commit, signed with your SSH key."""
    forge = _forge(repo, user)
    forge.pull_request(number)  # a missing pull request stops here
    gates = trusted_gates(forge, find_root(repo), cache_dir())  # an invalid default branch too
    review = forge.approve(number, key=_signing_key(forge, key, "an approval"))
    approvals, required = forge.approvals(number, gates.approvers), gates.default_approvals
    if as_json:
        print_json(
            {
                "review": review.model_dump(mode="json"),
                "approvals": {**approvals.model_dump(mode="json"), "required": required},
            }
        )
        return
    counts = review.user in approvals.counted
    why = next((i.reason for i in approvals.ignored if i.user == review.user), "")
    note = "" if counts else f"; it does not count: {why}"
    console.print(
        f"{review.user} approved #{number} at {review.commit[:12]}{note}. "
        f"Approvals: {approvals.count} of {required}."
    )


@app.command("merge")
def merge(number: NumberArg, repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """Merge when the head's checks pass and it has the approvals policies/gates.yaml asks."""
    forge = _forge(repo)
    pr = forge.pull_request(number)
    approvals, required = _approvals(repo, forge, number)
    blockers = merge_blockers(approvals, required, forge.checks(pr.head_sha))
    if blockers:
        raise ForgeError(f"#{number} cannot merge yet: " + "; ".join(blockers))
    outcome = forge.merge(number, head_sha=pr.head_sha)
    if as_json:
        print_json(outcome)
    if outcome.status != MergeStatus.MERGED:
        raise ForgeError(f"#{number} was not merged: {outcome.reason}")
    if not as_json:
        sha = outcome.sha or ""
        console.print(f"Merged #{number} into {pr.base_branch} as {sha[:12]}.")


@app.command("open")
def open_pr(
    head: Annotated[str, typer.Option("--head", help="The branch with the change.")],
    title: Annotated[str, typer.Option(help="Title (default: the head's commit subject).")] = "",
    body: Annotated[str, typer.Option(help="Description, in markdown.")] = "",
    base: Annotated[str, typer.Option(help="The branch to merge into.")] = "main",
    user: Annotated[
        str | None, typer.Option("--as", help="Who opens it (default: git config user.name).")
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            help="The SSH key that signs the opening (default: git config user.signingKey); "
            "the default branch's policies/allowed_signers must list it for the author.",
        ),
    ] = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Open a pull request on the local forge from a branch of this repository, signed with
    your SSH key: the key names you as its author, and cannot approve it."""
    forge = _forge(repo, user)
    signing = _signing_key(forge, key, "an opening")
    pr = forge.open_pr(head, title or _subject(forge, head), body, base, key=signing)
    if as_json:
        print_json(pr)
        return
    console.print(
        f"Opened #{pr.number} {pr.title}: {pr.head_branch} → {pr.base_branch}.", markup=False
    )


def _signing_key(forge: LocalForge, key: Path | None, what: str) -> Path:
    """`--key`, else git's user.signingKey; a clear error when neither is set."""
    chosen = key or forge.signing_key()
    if chosen is None:
        raise ForgeError(
            f"{what} is signed with your SSH key: pass --key ~/.ssh/id_ed25519 or set "
            "git config user.signingKey (docs/github.md#the-local-forge)"
        )
    return chosen.expanduser()


def _subject(forge: LocalForge, branch: str) -> str:
    """The first line of the branch's last commit message (the branch name if it has none)."""
    tip = forge.repo.branch_tip(branch)
    if tip is None:
        return branch
    return forge.repo.revparse(tip).message.split("\n", 1)[0].strip() or branch


@app.command("plan")
def plan_pr(
    number: Annotated[int, typer.Option("--pr", help="Pull request number.", min=1)],
    head: pr_runs.HeadOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Validate and plan the pull request's head against what the fleets run; comment the
    plan (edited in place) and set the `denv plan` check, which fails on invalid files or a
    deployment that cannot be placed. The local forge, or GitHub (docs/github.md)."""
    expect = pr_runs.full_commit("--head", head)
    root = find_root(repo)
    forge = open_forge(root, os.environ)
    drivers = Drivers(warn=lambda m: print(f"warning: {m}", file=sys.stderr))
    try:
        with terminal.console(stderr=True).status(f"planning #{number}") as shown:
            result = plan_pull_request(
                forge, root, number, drivers, shown.update, expect, cache=cache_dir()
            )
    finally:
        drivers.close()
    if as_json:
        print_json(result.as_json())
        return
    check = result.check
    console.print(
        f"#{number} at {result.pr.head_sha[:12]}: check '{check.name}' {check.conclusion}: "
        f"{check.title}",
        markup=False,
    )
    if check.conclusion.blocks:
        console.print(check.summary, markup=False, soft_wrap=True)
    console.print(f"Plan commented on #{number}: {result.pr.url}", markup=False)
