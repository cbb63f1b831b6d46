"""Adapter: the forge on GitHub or GitHub Enterprise, through PyGithub (only this module).

Every call goes through `_call`: tenacity retries 5xx answers and rate limits as retry.py
decides (PyGithub's own retries and sleeps are off, so waits are ours and injectable), and
what is left becomes a `ForgeError` naming the operation. Tokens never reach a log line, an
error or a repr: PyGithub masks its Authorization header in debug logs, and nothing here
formats one. Each operation is safe to repeat, which is what makes retrying it safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from github import Auth, Consts, Github, GithubException, GithubIntegration
from github.GithubObject import NotSet
from github.PullRequest import PullRequest as GhPull
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from reconciler.errors import ForgeError
from reconciler.forge.botgit import bot_commit, contains
from reconciler.forge.commands import approval_candidates, approver_rule, comment_commands
from reconciler.forge.comments import post
from reconciler.forge.gitremote import GitRemote
from reconciler.forge.markers import Create, Delete, Edit, read_marker, split_body, upsert_ops
from reconciler.forge.models import (
    Approvals,
    CheckRun,
    Comment,
    CommentCommand,
    Conclusion,
    Ignored,
    MergeOutcome,
    MergeStatus,
    PrState,
    PullRequest,
    Review,
    ReviewState,
)
from reconciler.forge.protocol import DENV_BOT, BotChange, BotIdentity
from reconciler.forge.render import quoted, unquoted
from reconciler.forge.retry import RetryPolicy, wait_before_retry
from reconciler.forge.views import ClosedView
from reconciler.shown import shown

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_API = "https://api.github.com"
WRITE = ("admin", "maintain", "write")


def token_auth(token: str) -> Auth.Auth:
    return Auth.Token(token)


def app_auth(app_id: str, key: str, installation: int) -> tuple[Auth.Auth, Auth.AppAuth | None]:
    """A GitHub App installation's auth, and the app's own (to read its login)."""
    app = Auth.AppAuth(app_id, key)
    return app.get_installation_auth(installation), app


ACTIONS_BOT = "github-actions[bot]"  # who Actions' GITHUB_TOKEN writes as


class GitHubForge:
    def __init__(
        self,
        repository: str,
        auth: Auth.Auth,
        api_url: str = DEFAULT_API,
        git: GitRemote | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, never mutated
        bot: BotIdentity = DENV_BOT,
        bot_login: str | None = None,
        throttle: bool = True,
        app: Auth.AppAuth | None = None,
    ) -> None:
        """`app`: the App whose installation `auth` is, so the bot can learn its login."""
        # GitHub asks integrations to space writes (secondary rate limits); tests turn it off
        self._gh = Github(
            base_url=api_url,
            auth=auth,
            retry=None,
            per_page=100,
            lazy=True,
            timeout=30,
            seconds_between_requests=Consts.DEFAULT_SECONDS_BETWEEN_REQUESTS if throttle else None,
            seconds_between_writes=Consts.DEFAULT_SECONDS_BETWEEN_WRITES if throttle else None,
        )
        self._auth = auth
        self.app = app
        self.repository = repository
        self.api_url = api_url
        self._repo = self._gh.get_repo(repository)
        self.git = git
        self.retry = retry
        self.bot = bot
        # Only the bot's own comments are edited, or trusted for what their markers say
        # (commands taken); unknown, it is asked of GitHub once (`login()`).
        self.bot_login = bot_login

    def __repr__(self) -> str:
        return f"GitHubForge({self.repository} at {self.api_url})"

    def default_branch(self) -> str:
        return self._call("read the default branch", lambda: str(self._repo.default_branch))

    def token(self) -> str | None:
        """The current token, for git over HTTPS (App tokens are refreshed on the way)."""
        token = getattr(self._auth, "token", None)
        return token if isinstance(token, str) else None

    # -- retries ---------------------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if not isinstance(exc, GithubException):  # could not reach GitHub: back off
            return self.retry.backoff * 2.0 ** (state.attempt_number - 1)
        wait = wait_before_retry(
            exc.status,
            exc.headers or {},
            state.attempt_number,
            self.retry.clock(),
            self.retry.backoff,
        )
        return wait or 0.0

    def _retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, OSError):  # connection refused or reset, timeouts (requests' too)
            return True
        if not isinstance(exc, GithubException):
            return False
        wait = wait_before_retry(exc.status, exc.headers or {}, 1, self.retry.clock(), 0.0)
        return wait is not None and wait <= self.retry.max_wait

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            status = exc.status if isinstance(exc, GithubException) else type(exc).__name__
            seconds = state.upcoming_sleep
            log.warning("GitHub answered %s to %s; retrying in %.1f s", status, what, seconds)

        retrying = Retrying(
            stop=stop_after_attempt(self.retry.attempts),
            wait=self._wait,
            retry=retry_if_exception(self._retryable),
            sleep=self.retry.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(fn)
        except GithubException as exc:
            raise ForgeError(f"GitHub: {what} failed: {_describe(exc, self.retry)}") from None
        except OSError as exc:
            raise ForgeError(
                f"GitHub: {what} failed: cannot reach {self.api_url} ({exc})"
            ) from None

    # -- pull requests ---------------------------------------------------------------------

    def pull_request(self, number: int) -> PullRequest:
        return self._call(f"read pull request #{number}", lambda: self._view(self._pull(number)))

    def _pull(self, number: int) -> GhPull:
        return self._repo.get_pull(number)

    def _view(self, pr: GhPull) -> PullRequest:
        head_repo = pr.head.repo
        state = PrState.MERGED if pr.merged else PrState(pr.state)
        return PullRequest(
            number=pr.number,
            title=pr.title,
            body=pr.body or "",
            author=pr.user.login,
            head_branch=pr.head.ref,
            head_sha=pr.head.sha,
            base_branch=pr.base.ref,
            state=state,
            url=pr.html_url,
            from_fork=head_repo is None or head_repo.full_name != pr.base.repo.full_name,
        )

    def pull_requests(self, state: PrState = PrState.OPEN) -> list[PullRequest]:
        query = "open" if state == PrState.OPEN else "closed"
        return [
            pr
            for pr in self._call(
                f"list {query} pull requests",
                lambda: [self._view(p) for p in self._repo.get_pulls(state=query)],
            )
            if pr.state == state
        ]

    def unreadable(self) -> list[str]:
        return []

    def bot_author(self) -> str:
        return self.login()

    def landed(self, shas: Sequence[str]) -> set[str]:
        """From the bot's clone, once the default branch is fetched: no API call per commit
        (nothing, without a clone: the bot cannot open pull requests then either)."""
        if self.git is None or not shas:
            return set()
        default = self.default_branch()
        repo, tips = self.git.fetch(default)
        tip = tips.get(default)
        if tip is None:
            return set()
        return {sha for sha in shas if contains(repo, tip, sha)}

    def open_or_update_bot_pr(self, change: BotChange) -> PullRequest:
        if self.git is None:
            raise ForgeError("the bot needs a clone to push from (GitRemote); none configured")
        base = change.base or self.default_branch()
        repo, tips = self.git.fetch(base, change.branch)
        if base not in tips:
            raise ForgeError(f"no branch '{base}' on {self.repository}")
        base_tip, branch_tip = tips[base], tips.get(change.branch)
        new = bot_commit(
            repo, change.branch, base_tip, branch_tip, self.bot, change.message, change.edit
        )
        if new != branch_tip:
            self.git.push(repo, change.branch, new)
        owner = self.repository.split("/")[0]

        def upsert() -> PullRequest:
            found = self._repo.get_pulls(state="open", head=f"{owner}:{change.branch}")
            for pr in found:
                if (pr.title, pr.body or "") != (change.title, change.body):
                    pr.edit(title=change.title, body=change.body)
                return self._view(self._pull(pr.number))
            made = self._repo.create_pull(
                base=base, head=change.branch, title=change.title, body=change.body
            )
            return self._view(made)

        return self._call(f"open or update the pull request from '{change.branch}'", upsert)

    # -- comments --------------------------------------------------------------------------

    def comments(self, pr: int) -> list[Comment]:
        return self._call(f"read the comments of #{pr}", lambda: self._comments(pr))

    def _comments(self, pr: int) -> list[Comment]:
        return [
            Comment(id=c.id, author=c.user.login, body=c.body or "", at=c.created_at)
            for c in self._repo.get_issue(pr).get_comments()
        ]

    def own_comments(self, pr: int) -> list[Comment]:
        return self._call(f"read the comments of #{pr}", lambda: self._mine(pr))

    def _mine(self, pr: int) -> list[Comment]:
        login = self.login()
        return [c for c in self._comments(pr) if c.author == login]

    def login(self) -> str:
        """The bot's login: given, else asked once — an App installation writes as
        `<app slug>[bot]`; a token as its user, or as github-actions[bot] when it is Actions'
        GITHUB_TOKEN (which may not read /user)."""
        if self.bot_login is None:
            self.bot_login = self._call("ask GitHub who the bot is", self._ask_login)
        return self.bot_login

    def _ask_login(self) -> str:
        if self.app is not None:
            found = GithubIntegration(auth=self.app, base_url=self.api_url).get_app()
            return f"{found.slug}[bot]"
        try:
            login: str = self._gh.get_user().login
            return login
        except GithubException as exc:
            if exc.status == 403:  # "Resource not accessible by integration"
                return ACTIONS_BOT
            raise

    def upsert_comment(self, pr: int, kind: str, body: str) -> list[int]:
        parts = split_body(kind, body)

        def upsert() -> list[int]:
            issue = self._repo.get_issue(pr)
            for op in upsert_ops(self._mine(pr), kind, parts):
                if isinstance(op, Create):
                    issue.create_comment(op.body)
                elif isinstance(op, Edit):
                    issue.get_comment(op.comment_id).edit(op.body)
                elif isinstance(op, Delete):
                    issue.get_comment(op.comment_id).delete()
            return [c.id for c in self._mine(pr) if (read_marker(c.body) or ("",))[0] == kind]

        return self._call(f"post the {kind} comment on #{pr}", upsert)

    def close_pr(self, pr: int, comment: str) -> PullRequest:
        current = self.pull_request(pr)
        if current.state != PrState.OPEN:
            return current
        post(self, pr, ClosedView(reason=comment))

        def close() -> PullRequest:
            pull = self._pull(pr)
            if pull.state == "open":
                pull.edit(state="closed")
            return self._view(pull)

        return self._call(f"close #{pr}", close)

    def comment_commands(self, pr: int) -> list[CommentCommand]:
        def read() -> list[CommentCommand]:
            return comment_commands(self._comments(pr), self._can_write)

        return self._call(f"read the commands on #{pr}", read)

    # -- checks ----------------------------------------------------------------------------

    def set_check(self, head_sha: str, check: CheckRun) -> None:
        # GitHub renders a check's summary as markdown: denv's summaries are plain lines
        # that quote hosts and engines (a failed run's last log lines), so it is one quoted
        # block; the title is plain text, without control characters
        output: dict[str, str | list[dict[str, str | int]]] = {
            "title": shown(check.title),
            "summary": quoted(check.summary),
        }

        def put() -> None:
            runs = self._repo.get_commit(head_sha).get_check_runs(check_name=check.name)
            for run in runs:
                run.edit(status="completed", conclusion=str(check.conclusion), output=output)
                return
            self._repo.create_check_run(
                name=check.name,
                head_sha=head_sha,
                status="completed",
                conclusion=str(check.conclusion),
                output=output,
            )

        self._call(f"set check '{check.name}' on {head_sha[:12]}", put)

    def checks(self, head_sha: str) -> list[CheckRun]:
        def read() -> list[CheckRun]:
            latest: dict[str, CheckRun] = {}
            for run in self._repo.get_commit(head_sha).get_check_runs():
                if run.name in latest or run.conclusion is None:
                    continue  # GitHub lists the newest run of a name first; skip running ones
                latest[run.name] = CheckRun(
                    name=run.name,
                    title=run.output.title or "",
                    summary=unquoted(run.output.summary or ""),
                    conclusion=_conclusion(run.conclusion),
                )
            return sorted(latest.values(), key=lambda c: c.name)

        return self._call(f"read the checks of {head_sha[:12]}", read)

    # -- approvals -------------------------------------------------------------------------

    def _can_write(self, user: str) -> bool:
        try:
            return self._repo.get_collaborator_permission(user) in WRITE
        except GithubException as exc:
            if exc.status == 404:
                return False
            raise

    def _in_team(self, team: str, user: str) -> bool:
        org, slug = team.split("/", 1)
        try:
            membership = self._gh.get_organization(org).get_team_by_slug(slug)
            return membership.get_team_membership(user).state == "active"
        except GithubException as exc:
            if exc.status == 404:
                return False
            raise

    def approvals(self, pr: int, approvers: Sequence[str] = ()) -> Approvals:
        users, teams = approver_rule(approvers)

        def tally() -> Approvals:
            pull = self._pull(pr)
            reviews = [
                Review(
                    user=r.user.login,
                    state=ReviewState(r.state),
                    commit=r.commit_id,
                    at=r.submitted_at,
                )
                for r in pull.get_reviews()
                if r.state in ReviewState.__members__ and r.user is not None
            ]
            found = approval_candidates(reviews, pull.head.sha, pull.user.login)
            counted, ignored = [], list(found.ignored)
            for user in found.users:
                if users or teams:
                    named = user.lower() in users or any(self._in_team(t, user) for t in teams)
                    if named:
                        counted.append(user)
                    else:
                        ignored.append(
                            Ignored(user=user, reason="not named in the approvers policy")
                        )
                elif self._can_write(user):
                    counted.append(user)
                else:
                    ignored.append(Ignored(user=user, reason="no write permission"))
            return Approvals(head_sha=pull.head.sha, counted=counted, ignored=ignored)

        return self._call(f"count the approvals of #{pr}", tally)

    # -- merging ---------------------------------------------------------------------------

    def merge(self, pr: int, head_sha: str | None = None, auto: bool = False) -> MergeOutcome:
        def attempt() -> MergeOutcome:
            pull = self._pull(pr)
            if pull.merged:
                return MergeOutcome(status=MergeStatus.REFUSED, reason=f"#{pr} is merged already")
            if auto:
                pull.enable_automerge(
                    merge_method="MERGE", expected_head_oid=NotSet if head_sha is None else head_sha
                )
                return MergeOutcome(status=MergeStatus.AUTO_MERGE, sha=pull.head.sha)
            try:
                status = pull.merge(
                    merge_method="merge", sha=NotSet if head_sha is None else head_sha
                )
            except GithubException as exc:
                if exc.status in (405, 409, 422):  # not mergeable, head moved, conflicts
                    return MergeOutcome(status=MergeStatus.REFUSED, reason=_message(exc))
                raise
            return MergeOutcome(status=MergeStatus.MERGED, sha=status.sha)

        return self._call(f"merge #{pr}", attempt)


def _conclusion(text: str) -> Conclusion:
    """GitHub's conclusions that denv does not set read as the nearest one it does."""
    try:
        return Conclusion(text)
    except ValueError:
        return Conclusion.NEUTRAL if text == "stale" else Conclusion.FAILURE


def _message(exc: GithubException) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    return str(data.get("message") or exc.message or "no message")


def _describe(exc: GithubException, retry: RetryPolicy) -> str:
    text = f"{exc.status} {_message(exc)}"
    wait = wait_before_retry(exc.status, exc.headers or {}, 1, retry.clock(), 0.0)
    if exc.status in (403, 429) and wait is not None:
        text += f" (rate limited for {wait:.0f} s more; try again then)"
    return text
