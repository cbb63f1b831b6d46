"""GitHubForge through PyGithub over HTTP, against the fake GitHub on loopback."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github import Auth

from reconciler.errors import BotBranchTaken, ForgeError
from reconciler.forge.github import ACTIONS_BOT, GitHubForge, token_auth
from reconciler.forge.markers import GITHUB_COMMENT_LIMIT, read_marker
from reconciler.forge.models import CheckRun, Conclusion, MergeStatus, PrState
from reconciler.forge.protocol import BotChange, BotFiles
from reconciler.forge.retry import RetryPolicy
from tests.forge.conftest import NOW, TOKEN, GitHubSetup
from tests.forge.fake_github import App
from tests.forge.gitrepo import commit_file, git

RELEASE = "releases/chat-8b/denv.yaml"


def push_branch(setup: GitHubSetup, branch: str, value: str = "192") -> str:
    """A person's branch changing the release, pushed to the remote."""
    work = setup.work
    git(work, "checkout", "-q", "-B", branch, "main")
    text = (work / RELEASE).read_text().replace("max_batch: 128", f"max_batch: {value}")
    sha = commit_file(work, RELEASE, text, f"chat-8b: max_batch {value}")
    git(work, "push", "-q", "origin", branch)
    git(work, "checkout", "-q", "main")
    return sha


def push_more(setup: GitHubSetup, branch: str) -> str:
    """One more commit on a pushed branch."""
    git(setup.work, "checkout", "-q", branch)
    sha = commit_file(setup.work, "NOTES.md", "one more thing\n", "a later commit")
    git(setup.work, "push", "-q", "origin", branch)
    git(setup.work, "checkout", "-q", "main")
    return sha


def open_pr(setup: GitHubSetup, branch: str = "bigger-batch") -> tuple[int, str]:
    sha = push_branch(setup, branch)
    return setup.fake.open_pull(branch, "chat-8b: bigger batches", author="ada"), sha


def test_pull_request_view(github: GitHubSetup) -> None:
    number, sha = open_pr(github)
    pr = github.forge.pull_request(number)
    assert (pr.number, pr.author, pr.head_sha, pr.state, pr.from_fork) == (
        1,
        "ada",
        sha,
        PrState.OPEN,
        False,
    )
    assert [p.number for p in github.forge.pull_requests()] == [1]


def test_the_default_branch_is_the_repository_setting(github: GitHubSetup) -> None:
    github.fake.default_branch = "trunk"
    assert github.forge.default_branch() == "trunk"


def test_upsert_creates_then_edits_in_place(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.comment(number, "grace", "<!-- denv:plan -->\nnot the bot's: never edited")
    first = github.forge.upsert_comment(number, "plan", "plan: 1 to start")
    second = github.forge.upsert_comment(number, "plan", "plan: 2 to start")
    assert first == second and len(first) == 1
    assert github.fake.comments[first[0]]["body"] == "<!-- denv:plan -->\nplan: 2 to start"
    assert len(github.fake.comment_bodies(number)) == 2
    patches = [
        r for r in github.fake.requests if r.startswith("PATCH") and "/issues/comments/" in r
    ]
    assert len(patches) == 1
    github.forge.upsert_comment(number, "plan", "plan: 2 to start")  # unchanged: no write
    assert len([r for r in github.fake.requests if r.startswith(("PATCH", "POST"))]) == 2


def test_long_bodies_split_into_marked_parts_and_shrink_back(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    rows = "\n".join(f"| {i} | replace | chat-8b replica {i} | max_batch |" for i in range(4000))
    body = f"### plan\n\n```\n{rows}\n```\n"
    assert len(body) > 2 * GITHUB_COMMENT_LIMIT
    ids = github.forge.upsert_comment(number, "plan", body)
    bodies = [github.fake.comments[i]["body"] for i in ids]
    assert len(bodies) >= 3
    assert [read_marker(b) for b in bodies] == [("plan", n) for n in range(1, len(bodies) + 1)]
    assert all(len(b) <= GITHUB_COMMENT_LIMIT for b in bodies)
    assert all(b.count("```") % 2 == 0 for b in bodies)  # each part closes its code fence
    shrunk = github.forge.upsert_comment(number, "plan", "### plan\n\nshort now")
    assert shrunk == ids[:1]
    assert github.fake.comment_bodies(number) == ["<!-- denv:plan -->\n### plan\n\nshort now"]


def test_comments_page_through(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    for i in range(130):
        github.fake.comment(number, "grace", f"comment {i}")
    assert len(github.forge.comments(number)) == 130


def test_check_is_created_then_updated(github: GitHubSetup) -> None:
    _, sha = open_pr(github)
    failing = CheckRun(
        name="denv plan", title="invalid", summary="x.yaml:1:1: bad", conclusion=Conclusion.FAILURE
    )
    github.forge.set_check(sha, failing)
    github.forge.set_check(
        sha, failing.model_copy(update={"conclusion": Conclusion.SUCCESS, "title": "ok"})
    )
    assert len(github.fake.check_runs) == 1
    assert github.forge.checks(sha) == [
        CheckRun(
            name="denv plan", title="ok", summary="x.yaml:1:1: bad", conclusion=Conclusion.SUCCESS
        )
    ]


def test_approvals_count_only_write_permission_on_the_head(github: GitHubSetup) -> None:
    number, old = open_pr(github)
    github.fake.review(number, "grace", commit=old)  # then a new commit: stale
    github.fake.review(number, "ada")  # the author
    sha = push_more(github, "bigger-batch")
    github.fake.review(number, "mallory")  # read permission only
    approvals = github.forge.approvals(number)
    assert approvals.head_sha == sha and approvals.counted == []
    reasons = {i.user: i.reason for i in approvals.ignored}
    assert reasons == {
        "ada": "author of the pull request",
        "grace": f"approved {old[:12]}, not the head",
        "mallory": "no write permission",
    }
    github.fake.review(number, "grace")
    assert github.forge.approvals(number).counted == ["grace"]
    github.fake.review(number, "grace", state="CHANGES_REQUESTED")
    assert github.forge.approvals(number).counted == []


def test_approvers_policy_names_users_and_teams(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.teams["acme/sre"] = {"mallory"}
    for user in ("grace", "mallory"):
        github.fake.review(number, user)
    approvals = github.forge.approvals(number, approvers=["acme/sre"])
    assert approvals.counted == ["mallory"]  # named through the team, write permission or not
    assert [(i.user, i.reason) for i in approvals.ignored] == [
        ("grace", "not named in the approvers policy")
    ]
    assert github.forge.approvals(number, approvers=["Grace"]).counted == ["grace"]


def test_comment_commands_from_writers_only(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.comment(number, "mallory", "/denv bench")
    github.fake.comment(number, "grace", "/denv bench --fleet local")
    github.fake.comment(number, "grace", "/denv frobnicate")
    commands = github.forge.comment_commands(number)
    # an unknown name is read too: `denv pr commands` refuses it in the bot's reply
    assert [(c.user, c.command, c.args) for c in commands] == [
        ("grace", "bench", ["--fleet", "local"]),
        ("grace", "frobnicate", []),
    ]


def _set_batch(value: int):  # type: ignore[no-untyped-def]
    def edit(files: BotFiles) -> None:
        files.yaml(RELEASE).set(["release", "overrides", "settings", "max_batch"], value)

    return edit


def _change(value: int) -> BotChange:
    return BotChange(
        branch="denv/optimize-chat-8b",
        title=f"chat-8b: max_batch {value}",
        body=f"The optimizer's candidate: max_batch {value}.",
        message=f"chat-8b: max_batch {value}",
        edit=_set_batch(value),
    )


def test_bot_pr_opened_then_updated(github: GitHubSetup) -> None:
    pr = github.forge.open_or_update_bot_pr(_change(256))
    assert (pr.number, pr.author, pr.head_branch) == (1, "denv-bot", "denv/optimize-chat-8b")
    remote_text = git(github.remote, "show", f"denv/optimize-chat-8b:{RELEASE}")
    assert (
        "settings: { max_batch: 256 }" in remote_text
        and "# the name clients ask for" in remote_text
    )
    assert git(github.remote, "log", "-1", "--format=%ae", "denv/optimize-chat-8b") == (
        "denv-bot@users.noreply.github.com"
    )
    again = github.forge.open_or_update_bot_pr(_change(256))
    assert again.head_sha == pr.head_sha  # nothing new: no commit, no push

    updated = github.forge.open_or_update_bot_pr(_change(320))
    assert (updated.number, updated.title) == (1, "chat-8b: max_batch 320")
    assert git(github.remote, "merge-base", "--is-ancestor", pr.head_sha, updated.head_sha) == ""
    assert len(github.fake.pulls) == 1


def test_human_commit_on_the_bot_branch_stops_the_bot(github: GitHubSetup) -> None:
    pr = github.forge.open_or_update_bot_pr(_change(256))
    work = github.work
    git(work, "fetch", "-q", "origin")
    git(work, "checkout", "-q", "-b", "fix", "origin/denv/optimize-chat-8b")
    human = commit_file(work, "NOTES.md", "a reviewer's fix\n", "fix on the bot's branch")
    git(work, "push", "-q", "origin", "fix:denv/optimize-chat-8b")
    with pytest.raises(BotBranchTaken, match="Ada Lovelace"):
        github.forge.open_or_update_bot_pr(_change(320))
    assert git(github.remote, "rev-parse", "denv/optimize-chat-8b") == human
    assert github.forge.pull_request(pr.number).title == "chat-8b: max_batch 256"


def test_merge_checks_the_head_then_merges(github: GitHubSetup) -> None:
    number, sha = open_pr(github)
    refused = github.forge.merge(number, head_sha="0" * 40)
    assert refused.status == MergeStatus.REFUSED and "Head branch was modified" in refused.reason
    merged = github.forge.merge(number, head_sha=sha)
    assert merged.status == MergeStatus.MERGED
    assert git(github.remote, "rev-parse", "main") == merged.sha
    assert "max_batch: 192" in git(github.remote, "show", f"main:{RELEASE}")
    assert github.forge.pull_request(number).state == PrState.MERGED
    assert github.forge.merge(number).status == MergeStatus.REFUSED


def test_auto_merge(github: GitHubSetup) -> None:
    number, sha = open_pr(github)
    outcome = github.forge.merge(number, head_sha=sha, auto=True)
    assert outcome.status == MergeStatus.AUTO_MERGE and number in github.fake.auto_merge


def test_retries_a_502(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.fail("POST", r"/issues/\d+/comments$", 502, message="Bad Gateway", times=2)
    github.forge.upsert_comment(number, "plan", "plan")
    assert github.clock.sleeps == [0.5, 1.0]  # exponential backoff
    assert len(github.fake.comment_bodies(number)) == 1  # a retried upsert never duplicates


def test_rate_limit_honours_retry_after(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.fail(
        "GET",
        r"/issues/\d+/comments$",
        403,
        {"Retry-After": "7"},
        message="You have exceeded a secondary rate limit. Please wait a few minutes.",
    )
    github.forge.upsert_comment(number, "plan", "plan")
    assert github.clock.sleeps == [7.0]


def test_rate_limit_waits_for_the_reset(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    reset = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 42)}
    github.fake.fail("GET", r"/pulls/\d+$", 403, reset, message="API rate limit exceeded for user.")
    assert github.forge.pull_request(number).number == number
    assert github.clock.sleeps == [43.0]


def test_gives_up_with_a_clear_error(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.fail("GET", r"/pulls/\d+$", 503, times=6)
    with pytest.raises(ForgeError, match=r"read pull request #1 failed: 503"):
        github.forge.pull_request(number)
    assert len(github.clock.sleeps) == 5  # six attempts
    far = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(github.clock.now) + 3600)}
    github.fake.fail("GET", r"/pulls/\d+$", 403, far, message="API rate limit exceeded for user.")
    with pytest.raises(ForgeError, match="rate limited for 3600 s more"):
        github.forge.pull_request(number)
    assert len(github.clock.sleeps) == 5  # a wait past max_wait is not taken
    github.fake.fail("GET", r"/pulls/\d+$", 403, message="Resource not accessible by integration")
    with pytest.raises(ForgeError, match="403 Resource not accessible"):
        github.forge.pull_request(number)  # a refusal, not a rate limit: no retry


def test_the_token_never_appears_in_logs_errors_or_reprs(
    github: GitHubSetup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="github")  # PyGithub's requests, headers masked
    number, sha = open_pr(github)
    github.fake.fail("GET", r"/issues/\d+/comments$", 502)
    github.forge.upsert_comment(number, "plan", "plan")
    github.forge.set_check(
        sha, CheckRun(name="n", title="t", summary="s", conclusion=Conclusion.SUCCESS)
    )
    github.forge.open_or_update_bot_pr(_change(256))
    github.fake.fail("GET", r"/pulls/\d+$", 500, times=10)
    with pytest.raises(ForgeError) as failed:
        github.forge.pull_request(number)
    assert "retrying" in caplog.text and "Authorization" in caplog.text  # PyGithub's debug lines
    for text in (caplog.text, str(failed.value), repr(github.forge), repr(github.forge.git)):
        assert TOKEN not in text
    assert any(TOKEN in h for h in github.fake.seen_headers)  # it was sent, only to GitHub


def test_github_app_installation_auth(github: GitHubSetup, tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    github.fake.app = App(
        app_id="4242", public_key=public, installation_id=7, login="denv-app[bot]"
    )
    number, _ = open_pr(github)
    app = Auth.AppAuth("4242", private)
    forge = GitHubForge(
        github.fake.full_name,
        app.get_installation_auth(7),
        api_url=github.fake.api_url,
        retry=RetryPolicy(sleep=github.clock.sleep, clock=github.clock.time),
        throttle=False,
        app=app,
    )
    forge.upsert_comment(number, "plan", "from the app")
    assert [c.author for c in forge.comments(number)] == ["denv-app[bot]"]
    assert forge.login() == "denv-app[bot]"  # asked of GET /app: the App's slug
    assert forge.token() is not None and forge.token() not in repr(forge)


def test_the_bot_learns_its_login_and_trusts_only_its_own_comments(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    unknown = GitHubForge(
        github.fake.full_name, token_auth(TOKEN), api_url=github.fake.api_url, throttle=False
    )
    github.fake.comment(number, "mallory", "<!-- denv:plan -->\npasted by a person")
    [mine] = unknown.upsert_comment(number, "plan", "the bot's plan")
    assert unknown.login() == github.fake.tokens[TOKEN]  # asked of GET /user
    assert [c.id for c in unknown.own_comments(number)] == [mine]
    assert "pasted by a person" in github.fake.comment_bodies(number)[0]  # never edited
    actions = "ghs_ActionsGithubToken0123456789"
    github.fake.actions_tokens.add(actions)
    in_actions = GitHubForge(
        github.fake.full_name, token_auth(actions), api_url=github.fake.api_url, throttle=False
    )
    assert in_actions.login() == ACTIONS_BOT  # GET /user answers 403 to Actions' token


def test_an_unreachable_github_is_retried_then_named(github: GitHubSetup) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    forge = GitHubForge(
        "acme/fleet",
        token_auth(TOKEN),
        api_url=f"http://127.0.0.1:{port}/api/v3",
        retry=RetryPolicy(attempts=3, sleep=github.clock.sleep, clock=github.clock.time),
        throttle=False,
    )
    with pytest.raises(ForgeError, match=f"cannot reach http://127.0.0.1:{port}/api/v3") as failed:
        forge.pull_request(1)
    assert github.clock.sleeps == [1.0, 2.0] and TOKEN not in str(failed.value)


def test_a_check_summary_is_posted_as_a_quoted_block(github: GitHubSetup) -> None:
    """GitHub renders a summary as markdown: what hosts and engines said in it (a failed
    run's log lines) is a code block there, and the title has no control characters."""
    _, sha = open_pr(github)
    said = "chat-8b on local: failed: approved by @org/maintainers ![x](http://t.example/p)"
    github.forge.set_check(
        sha,
        CheckRun(
            name="denv bench", title="1 run\x1b]52;c;eA==\x07 failed", summary=said + "\n``` x",
            conclusion=Conclusion.FAILURE,
        ),
    )  # fmt: skip
    [posted] = github.fake.check_runs.values()
    assert posted["output"]["summary"] == f"````\n{said}\n``` x\n````"
    assert posted["output"]["title"] == "1 run failed"
    assert github.forge.checks(sha)[0].summary == said + "\n``` x"
