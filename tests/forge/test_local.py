"""The local forge on a real git repository: open, comment, approve, merge; bot pull requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import BotBranchTaken, ForgeError
from reconciler.forge.commands import merge_blockers
from reconciler.forge.local import LocalForge
from reconciler.forge.models import CheckRun, Conclusion, MergeStatus, PrState
from reconciler.forge.protocol import BotChange, BotFiles
from tests.forge.gitrepo import commit_file, git
from tests.forge.sshkeys import SIGNERS, allow, new_key, signer_line

RELEASE = "releases/chat-8b/denv.yaml"


def _branch_with_change(repo: Path, branch: str = "bigger-batch") -> str:
    git(repo, "checkout", "-q", "-b", branch)
    text = (repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    sha = commit_file(repo, RELEASE, text, "chat-8b: max_batch 192")
    git(repo, "checkout", "-q", "main")
    return sha


@pytest.fixture
def keys(git_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """SSH keys of ada, grace and mallory; main's allowed signers list ada's and grace's."""
    folder = tmp_path_factory.mktemp("keys")
    made = {name: new_key(folder, name) for name in ("ada", "grace", "mallory")}
    allow(git_repo, {"ada": made["ada"], "grace": made["grace"]})
    return made


def test_open_comment_approve_merge(git_repo: Path, keys: dict[str, Path]) -> None:
    head = _branch_with_change(git_repo)
    forge = LocalForge(git_repo, user="ada")
    pr = forge.open_pr(
        "bigger-batch", "chat-8b: bigger batches", "Raise max_batch.", key=keys["ada"]
    )
    assert (pr.number, pr.head_sha, pr.state) == (1, head, PrState.OPEN)

    first = forge.upsert_comment(1, "plan", "plan v1")
    again = forge.upsert_comment(1, "plan", "plan v2")
    assert first == again  # edited in place
    bodies = [c.body for c in forge.comments(1)]
    assert bodies == ["<!-- denv:plan -->\nplan v2"]

    forge.set_check(
        head,
        CheckRun(name="denv plan", title="1 change", summary="s", conclusion=Conclusion.SUCCESS),
    )
    assert [c.name for c in forge.checks(head)] == ["denv plan"]

    forge.approve(1, "ada", key=keys["ada"])  # the author's own approval never counts
    forge.approve(1, "grace", key=keys["grace"])
    approvals = forge.approvals(1)
    assert approvals.counted == ["grace"]
    assert [(i.user, i.reason) for i in approvals.ignored] == [
        ("ada", "author of the pull request")
    ]
    assert forge.approvals(1, approvers=["linus"]).counted == []

    outcome = forge.merge(1, head_sha=head)
    assert outcome.status == MergeStatus.MERGED, outcome.reason
    assert "max_batch: 192" in (git_repo / RELEASE).read_text()  # the checked-out main moved
    assert git(git_repo, "status", "--porcelain") == ""
    assert git(git_repo, "rev-parse", "main") == outcome.sha
    assert forge.pull_request(1).state == PrState.MERGED
    assert forge.pull_requests() == []
    assert forge.merge(1).status == MergeStatus.REFUSED


def test_an_approval_counts_only_signed_by_its_approver(
    git_repo: Path, keys: dict[str, Path]
) -> None:
    """`--as grace` named the approver for anyone: now grace's key must sign it, by the
    allowed signers of the default branch, which the pull request cannot add itself to."""
    _branch_with_change(git_repo)
    git(git_repo, "checkout", "-q", "bigger-batch")  # the pull request lists mallory too
    text = (git_repo / SIGNERS).read_text() + signer_line("mallory", keys["mallory"])
    commit_file(git_repo, SIGNERS, text, "let mallory approve")
    git(git_repo, "checkout", "-q", "main")
    forge = LocalForge(git_repo, user="ada")
    forge.open_pr("bigger-batch", "t", key=keys["ada"])
    forge.approve(1, "grace")  # unsigned
    forge.approve(1, "grace", key=keys["mallory"])  # mallory signs as grace: latest word
    forge.approve(1, "mallory", key=keys["mallory"])  # listed by the pull request only
    approvals = forge.approvals(1)
    assert approvals.counted == []
    assert [(i.user, i.reason) for i in approvals.ignored] == [
        ("grace", f"its signature is not grace's by {SIGNERS} on main"),
        ("mallory", f"its signature is not mallory's by {SIGNERS} on main"),
    ]
    forge.approve(1, "grace")
    assert forge.approvals(1).ignored[0].reason == "unsigned (denv pr approve --key)"
    forge.approve(1, "grace", key=keys["grace"])
    assert forge.approvals(1).counted == ["grace"]


def test_without_allowed_signers_no_approval_counts_and_a_bad_line_stops(
    git_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _branch_with_change(git_repo)
    forge = LocalForge(git_repo, user="ada")
    folder = tmp_path_factory.mktemp("keys")
    forge.open_pr("bigger-batch", "t", key=new_key(folder, "ada"))
    forge.approve(1, "grace", key=new_key(folder, "grace"))
    approvals = forge.approvals(1)
    assert approvals.opening == f"main has no {SIGNERS} to check its opening by"
    [ignored] = approvals.ignored
    assert (
        ignored.reason == f"its author is not known: main has no {SIGNERS} to check its opening by"
    )
    commit_file(git_repo, SIGNERS, "# signers\ngrace ssh-ed25519\n", "half a line")
    with pytest.raises(ForgeError, match=f"^{SIGNERS}:2 \\(on main\\): expected `PRINCIPALS"):
        forge.approvals(1)
    commit_file(git_repo, SIGNERS, "grace ssh-ed25519 AAAAnotakey\n", "not a key")
    with pytest.raises(ForgeError, match="1 \\(on main\\): the ssh-ed25519 key is not a base64"):
        forge.approvals(1)


def test_approval_of_an_old_head_does_not_count(git_repo: Path, keys: dict[str, Path]) -> None:
    _branch_with_change(git_repo)
    forge = LocalForge(git_repo, user="ada")
    forge.open_pr("bigger-batch", "t", key=keys["ada"])
    forge.approve(1, "grace", key=keys["grace"])
    git(git_repo, "checkout", "-q", "bigger-batch")
    commit_file(git_repo, "NOTES.md", "more\n", "another commit")
    git(git_repo, "checkout", "-q", "main")
    approvals = forge.approvals(1)
    assert approvals.counted == []
    assert approvals.ignored[0].user == "grace" and "not the head" in approvals.ignored[0].reason


def test_an_unsigned_opening_cannot_merge_but_the_bots_own_can(
    git_repo: Path, keys: dict[str, Path]
) -> None:
    """The opening names the author, so that their approval is known for theirs: a pull
    request opened unsigned has no known author and cannot merge; the bot holds no key, and
    its own pull requests (promotions, rollbacks, winners) count others' approvals as ever."""
    _branch_with_change(git_repo)
    forge = LocalForge(git_repo, user="ada")
    forge.open_pr("bigger-batch", "t")
    forge.approve(1, "grace", key=keys["grace"])
    approvals = forge.approvals(1)
    assert approvals.counted == []
    assert approvals.opening == "its opening is not signed by its author ada (denv pr open --key)"
    assert merge_blockers(approvals, 0, []) == [approvals.opening]  # whatever the gates ask

    _branch_with_change(git_repo, "denv/bot-change")
    bot = forge.open_pr("denv/bot-change", "bot", author=forge.bot.name)
    forge.approve(bot.number, "grace", key=keys["grace"])
    approvals = forge.approvals(bot.number)
    assert (approvals.counted, approvals.opening) == (["grace"], None)


def test_merge_refuses_a_moved_head_and_conflicts(git_repo: Path) -> None:
    head = _branch_with_change(git_repo)
    forge = LocalForge(git_repo, user="ada")
    forge.open_pr("bigger-batch", "t")
    text = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 64")
    commit_file(git_repo, RELEASE, text, "main moves the same line")
    assert "head moved" in forge.merge(1, head_sha="0" * 40).reason
    outcome = forge.merge(1, head_sha=head)
    assert outcome.status == MergeStatus.REFUSED and RELEASE in outcome.reason
    assert forge.pull_request(1).state == PrState.OPEN


def test_comment_commands(git_repo: Path) -> None:
    _branch_with_change(git_repo)
    forge = LocalForge(git_repo, user="ada")
    forge.open_pr("bigger-batch", "t")
    forge.comment(1, "/denv bench --fleet local\nplease", author="grace")
    forge.comment(1, "looks good; /denv plan later", author="grace")
    forge.comment(1, "/denv deploy", author="grace")
    commands = forge.comment_commands(1)
    # an unknown name is read too: `denv pr commands` refuses it in the bot's reply
    assert [(c.user, c.command, c.args) for c in commands] == [
        ("grace", "bench", ["--fleet", "local"]),
        ("grace", "deploy", []),
    ]


def _set_batch(value: int) -> object:
    def edit(files: BotFiles) -> None:
        doc = files.yaml(RELEASE)
        doc.set(["release", "overrides", "settings", "max_batch"], value)

    return edit


def _change(value: int) -> BotChange:
    return BotChange(
        branch="denv/optimize-chat-8b",
        title=f"chat-8b: max_batch {value}",
        body="The optimizer found a faster recipe.",
        message=f"chat-8b: max_batch {value}",
        edit=_set_batch(value),  # type: ignore[arg-type]
    )


def test_bot_pr_open_update_and_comments_survive(git_repo: Path) -> None:
    forge = LocalForge(git_repo, user="ada")
    pr = forge.open_or_update_bot_pr(_change(256))
    assert pr.author == "denv-bot" and pr.head_branch == "denv/optimize-chat-8b"
    shown = git(git_repo, "show", f"{pr.head_sha}:{RELEASE}")
    assert "settings: { max_batch: 256 }" in shown
    assert "# the name clients ask for" in shown  # comments survive the edit
    assert git(git_repo, "log", "-1", "--format=%an <%ae>", pr.head_sha) == (
        "denv-bot <denv-bot@users.noreply.github.com>"
    )
    assert forge.open_or_update_bot_pr(_change(256)).head_sha == pr.head_sha  # nothing new

    commit_file(git_repo, "NOTES.md", "main moves on\n", "unrelated")
    updated = forge.open_or_update_bot_pr(_change(320))
    assert updated.number == pr.number and updated.title == "chat-8b: max_batch 320"
    parents = git(git_repo, "log", "-1", "--format=%P", updated.head_sha).split()
    assert parents[0] == pr.head_sha and len(parents) == 2  # fast-forward: base merged in
    diff = git(git_repo, "diff", "--name-only", f"main...{updated.head_sha}")
    assert diff == RELEASE
    assert len(forge.pull_requests()) == 1


def test_a_bot_pr_goes_into_the_default_branch(git_repo: Path) -> None:
    git(git_repo, "branch", "-q", "trunk")
    commit_file(git_repo, "NOTES.md", "main only\n", "a commit trunk lacks")
    forge = LocalForge(git_repo, user="ada", default_branch="trunk")
    pr = forge.open_or_update_bot_pr(_change(256))
    assert pr.base_branch == "trunk"
    assert git(git_repo, "diff", "--name-only", f"trunk...{pr.head_sha}") == RELEASE


def test_bot_never_overwrites_a_human_commit(git_repo: Path) -> None:
    forge = LocalForge(git_repo, user="ada")
    pr = forge.open_or_update_bot_pr(_change(256))
    git(git_repo, "checkout", "-q", pr.head_branch)
    human = commit_file(git_repo, "NOTES.md", "my tweak\n", "a human fix on the bot branch")
    git(git_repo, "checkout", "-q", "main")
    with pytest.raises(BotBranchTaken, match="Ada Lovelace"):
        forge.open_or_update_bot_pr(_change(320))
    assert git(git_repo, "rev-parse", pr.head_branch) == human


def test_an_edit_that_changes_nothing_is_refused(git_repo: Path) -> None:
    with pytest.raises(ForgeError, match="nothing to propose"):
        LocalForge(git_repo).open_or_update_bot_pr(_change(128))
