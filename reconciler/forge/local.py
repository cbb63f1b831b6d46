"""Adapter: the local forge, the embedded default — pull requests as branches of this repository.

A pull request is a head branch and a base branch of the local git repository; its title,
description, comments, reviews and the checks of its commits are kept beside them in
`.git/denv-forge/` (localstore.py). Merging writes a merge commit (the git adapter), as GitHub's
merge button does, and brings the work tree along when the base is checked out. Everyone
who can write to this repository has write permission here, so an opening names its author
and an approval its approver by an SSH signature, checked against the default branch's
`policies/allowed_signers` (localsigs.py); the approvers policy, when it names users, narrows
whose counts. Its security boundary is the filesystem: who can write `.git` can write
records, branches and the default branch itself (docs/github.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from reconciler.adapters.git import Author, GitFailure, GitRepo
from reconciler.errors import ForgeError, NotFound
from reconciler.faults import fault_point
from reconciler.forge import sshsig
from reconciler.forge.botgit import bot_commit, contains
from reconciler.forge.commands import (
    APPROVAL_NAMESPACE,
    OPENING_NAMESPACE,
    approval_candidates,
    approval_message,
    approver_rule,
    comment_commands,
    opening_message,
)
from reconciler.forge.comments import post
from reconciler.forge.localsigs import Signers, approval_problem, opening_problem, read_signers
from reconciler.forge.localstore import LocalPr, LocalStore, UnreadableRecord
from reconciler.forge.markers import Create, Delete, Edit, read_marker, split_body, upsert_ops
from reconciler.forge.models import (
    Approvals,
    CheckRun,
    Comment,
    CommentCommand,
    Ignored,
    MergeOutcome,
    MergeStatus,
    PrState,
    PullRequest,
    Review,
    ReviewState,
)
from reconciler.forge.protocol import (
    DEFAULT_BRANCH,
    DENV_BOT,
    BotChange,
    BotIdentity,
)
from reconciler.forge.views import ClosedView

_SHA = re.compile(r"^[0-9a-f]{40}$")


def utc_now() -> datetime:
    return datetime.now(UTC)


class LocalForge:
    def __init__(
        self,
        root: Path,
        user: str | None = None,
        bot: BotIdentity = DENV_BOT,
        clock: Callable[[], datetime] = utc_now,
        default_branch: str = DEFAULT_BRANCH,
    ) -> None:
        self.repo = GitRepo.open(root, ForgeError)
        self._default_branch = default_branch
        self.root = root
        self.store = LocalStore(self.repo.git_dir)
        self.bot = bot
        self.clock = clock
        self.user = user or self._git_user()

    def _git_user(self) -> str:
        name = self.repo.config("user.name")
        return "local" if name is None else name

    def default_branch(self) -> str:
        return self._default_branch

    def _tip(self, branch: str) -> str | None:
        return self.repo.branch_tip(branch)

    def _view(self, pr: LocalPr) -> PullRequest:
        tip = self._tip(pr.head_branch) if pr.state == PrState.OPEN else None
        return PullRequest(
            number=pr.number,
            title=pr.title,
            body=pr.body,
            author=pr.author,
            head_branch=pr.head_branch,
            head_sha=str(tip) if tip is not None else pr.head_sha,
            base_branch=pr.base_branch,
            state=pr.state,
            url=f"file://{self.root.resolve()}#pr/{pr.number}",
        )

    # -- pull requests ---------------------------------------------------------------------

    def open_pr(
        self,
        head: str,
        title: str,
        body: str = "",
        base: str = "main",
        author: str | None = None,
        key: Path | None = None,
    ) -> PullRequest:
        """Open a pull request; with `key`, its opening signed by that SSH key as `author`'s
        (unsigned, only the bot's own can merge: localsigs.py)."""
        who = author or self.user
        number, tip = self._next_number(), self._tip(head)
        for branch, found in ((head, tip), (base, self._tip(base))):
            if found is None:
                raise NotFound(f"no branch '{branch}' in {self.root}")
        opening = None
        if key is not None:  # signed before the lock: ssh-keygen may ask for a passphrase
            message = opening_message(number, head, base, str(tip), who)
            opening = sshsig.sign(key, OPENING_NAMESPACE, message)
        with self.store.locked():
            known = self._open_on(head)
            if known is not None:
                already = f"branch '{head}' already has an open pull request: #{known.number}"
                raise ForgeError(already)
            if (self._next_number(), self._tip(head)) != (number, tip):
                raise ForgeError(f"#{number} was taken or '{head}' moved while signing; open again")
            pr = LocalPr(
                number=number,
                title=title,
                body=body,
                author=who,
                head_branch=head,
                base_branch=base,
                created_at=self.clock(),
                opening=opening,
                opened_head=str(tip),
            )
            self.store.save(pr)
        return self._view(pr)

    def _next_number(self) -> int:
        return max(self.store.numbers(), default=0) + 1

    def pull_request(self, number: int) -> PullRequest:
        return self._view(self.store.load(number))

    def pull_requests(self, state: PrState = PrState.OPEN) -> list[PullRequest]:
        """The readable ones; `unreadable()` names the others."""
        prs, _ = self.store.records()
        return [self._view(pr) for pr in prs if pr.state == state]

    def unreadable(self) -> list[str]:
        return [str(problem) for problem in self.store.records()[1]]

    def _open_on(self, branch: str) -> LocalPr | None:
        """The open pull request from `branch`; None when there is none. While a record is
        unreadable, it may be that branch's: `UnreadableRecord`, never a second one."""
        prs, unreadable = self.store.records()
        for pr in prs:
            if pr.head_branch == branch and pr.state == PrState.OPEN:
                return pr
        if unreadable:
            raise unreadable[0]
        return None

    def repair(self, number: int) -> Path:
        """Set an unreadable record aside and record #`number` as closed in its place; the
        bot opens a new pull request for its branch if its change is still wanted."""
        with self.store.locked():
            try:
                self.store.load(number)
            except UnreadableRecord:
                kept = self.store.set_aside(number)
            else:
                raise ForgeError(f"the record of #{number} is readable: nothing to repair")
            lost = f"(record lost: the unreadable file is kept as {kept.name})"
            self.store.save(
                LocalPr(
                    number=number, title=lost, body="", author="", head_branch="",
                    base_branch="", state=PrState.CLOSED, created_at=self.clock(),
                )
            )  # fmt: skip
        return kept

    def open_or_update_bot_pr(self, change: BotChange) -> PullRequest:
        base = change.base or self.default_branch()
        base_tip = self._tip(base)
        if base_tip is None:
            raise NotFound(f"no branch '{base}' in {self.root}")
        branch_tip = self._tip(change.branch)
        new = bot_commit(
            self.repo, change.branch, base_tip, branch_tip, self.bot, change.message, change.edit
        )
        if new != branch_tip:
            self.repo.set_branch(change.branch, new)
        fault_point("forge-branch")
        with self.store.locked():
            pr = self._open_on(change.branch)
            if pr is not None:
                pr.title, pr.body = change.title, change.body
                self.store.save(pr)
                return self._view(pr)
        opened = self.open_pr(change.branch, change.title, change.body, base, self.bot.name)
        fault_point("forge-opened")
        return opened

    # -- comments --------------------------------------------------------------------------

    def comments(self, pr: int) -> list[Comment]:
        return list(self.store.load(pr).comments)

    def own_comments(self, pr: int) -> list[Comment]:
        return [c for c in self.comments(pr) if c.author == self.bot.name]

    def comment(self, pr: int, body: str, author: str | None = None) -> Comment:
        with self.store.locked():
            record = self.store.load(pr)
            tip = self._tip(record.head_branch) if record.state == PrState.OPEN else None
            head = None if tip is None else str(tip)  # what the commenter saw
            comment = self._add(record, body, author or self.user, head)
            self.store.save(record)
        return comment

    def _add(self, record: LocalPr, body: str, author: str, head: str | None = None) -> Comment:
        number = max((c.id for c in record.comments), default=0) + 1
        comment = Comment(id=number, author=author, body=body, at=self.clock(), head_sha=head)
        record.comments.append(comment)
        return comment

    def upsert_comment(self, pr: int, kind: str, body: str) -> list[int]:
        with self.store.locked():
            record = self.store.load(pr)
            mine = [c for c in record.comments if c.author == self.bot.name]
            for op in upsert_ops(mine, kind, split_body(kind, body)):
                if isinstance(op, Create):
                    self._add(record, op.body, self.bot.name)
                elif isinstance(op, Edit):
                    record.comments = [
                        c.model_copy(update={"body": op.body}) if c.id == op.comment_id else c
                        for c in record.comments
                    ]
                elif isinstance(op, Delete):
                    record.comments = [c for c in record.comments if c.id != op.comment_id]
            self.store.save(record)
        return [
            c.id
            for c in record.comments
            if c.author == self.bot.name and (read_marker(c.body) or ("",))[0] == kind
        ]

    def close_pr(self, pr: int, comment: str) -> PullRequest:
        if self.store.load(pr).state != PrState.OPEN:
            return self.pull_request(pr)
        post(self, pr, ClosedView(reason=comment))
        with self.store.locked():
            record = self.store.load(pr)
            if record.state == PrState.OPEN:
                tip = self._tip(record.head_branch)
                record.head_sha = str(tip) if tip is not None else record.head_sha
                record.state = PrState.CLOSED
                self.store.save(record)
        return self._view(record)

    def comment_commands(self, pr: int) -> list[CommentCommand]:
        # everyone who can write to this repository has write permission on its local forge
        return comment_commands(self.comments(pr), lambda author: author != self.bot.name)

    # -- checks ----------------------------------------------------------------------------

    def set_check(self, head_sha: str, check: CheckRun) -> None:
        if not _SHA.match(head_sha):
            raise ForgeError(f"'{head_sha}' is not a full commit id")
        with self.store.locked():
            checks = self.store.checks(head_sha)
            checks.checks[check.name] = check
            self.store.save_checks(head_sha, checks)

    def checks(self, head_sha: str) -> list[CheckRun]:
        if not _SHA.match(head_sha):
            return []
        return sorted(self.store.checks(head_sha).checks.values(), key=lambda c: c.name)

    # -- reviews and approvals -------------------------------------------------------------

    def _open_tip(self, pr: int) -> tuple[LocalPr, str]:
        record = self.store.load(pr)
        if record.state != PrState.OPEN:
            raise ForgeError(f"pull request #{pr} is {record.state}, not open")
        tip = self._tip(record.head_branch)
        if tip is None:
            raise NotFound(f"pull request #{pr}: its branch '{record.head_branch}' is gone")
        return record, str(tip)

    def review(
        self, pr: int, state: ReviewState, user: str | None = None, key: Path | None = None
    ) -> Review:
        """Review the head; with `key`, signed by that SSH key (approvals count only so)."""
        who = user or self.user
        signature = None
        if key is not None:  # signed before the lock: ssh-keygen may ask for a passphrase
            record, head = self._open_tip(pr)
            message = approval_message(pr, record.base_branch, head, who)
            signature = sshsig.sign(key, APPROVAL_NAMESPACE, message)
        with self.store.locked():
            record, tip = self._open_tip(pr)
            if signature is not None and tip != head:
                raise ForgeError(
                    f"#{pr}: the head moved to {tip[:12]} while signing; approve again"
                )
            review = Review(user=who, state=state, commit=tip, at=self.clock(), signature=signature)
            record.reviews.append(review)
            self.store.save(record)
        return review

    def approve(self, pr: int, user: str | None = None, key: Path | None = None) -> Review:
        return self.review(pr, ReviewState.APPROVED, user, key)

    def signing_key(self) -> Path | None:
        """git's `user.signingKey` (what `git commit -S` signs with when gpg.format is ssh)."""
        value = self.repo.config("user.signingkey")
        return Path(value).expanduser() if value else None

    def approvals(self, pr: int, approvers: Sequence[str] = ()) -> Approvals:
        record = self.store.load(pr)
        head = self._view(record).head_sha
        found = approval_candidates(record.reviews, head, record.author)
        users, teams = approver_rule(approvers)
        counted, ignored = [], list(found.ignored)
        # who may sign what is the default branch's to say, never the base the author chose
        default = self.default_branch()
        needed = bool(found.users) or record.opening is not None
        signers = read_signers(self.repo, default) if needed else Signers(None, default)
        opening = opening_problem(signers, record, self.bot.name)
        for user in found.users:
            if opening is not None:
                ignored.append(Ignored(user=user, reason=f"its author is not known: {opening}"))
            elif (users or teams) and user.lower() not in users:
                why = "not named in the approvers policy"
                if teams:
                    why += " (the local forge cannot look up team members)"
                ignored.append(Ignored(user=user, reason=why))
            elif (unsigned := approval_problem(signers, record, head, user)) is not None:
                ignored.append(Ignored(user=user, reason=unsigned))
            else:
                counted.append(user)
        return Approvals(head_sha=head, counted=counted, ignored=ignored, opening=opening)

    # -- merging ---------------------------------------------------------------------------

    def merge(self, pr: int, head_sha: str | None = None, auto: bool = False) -> MergeOutcome:
        # `auto`: the local forge has no required checks of its own, so it merges now
        with self.store.locked():
            record = self.store.load(pr)
            if record.state != PrState.OPEN:
                return _refused(f"pull request #{pr} is {record.state}")
            head, base = self._tip(record.head_branch), self._tip(record.base_branch)
            if head is None or base is None:
                return _refused(f"branch '{record.head_branch}' or '{record.base_branch}' is gone")
            if head_sha is not None and str(head) != head_sha:
                return _refused(f"the head moved to {str(head)[:12]}; it was {head_sha[:12]}")
            if contains(self.repo, base, head):
                # merged before, and the record not written (a crash between the two): what
                # the merge left is recorded, never a second merge commit
                merged: str | MergeOutcome = base
            else:
                merged = self._merge_commit(record, base, head)
            if isinstance(merged, MergeOutcome):
                return merged
            fault_point("forge-merged")  # main moved; the record still says open
            record.state, record.head_sha, record.merged_sha = (
                PrState.MERGED,
                str(head),
                str(merged),
            )
            self.store.save(record)
        fault_point("forge-recorded")  # merged and recorded; the bot's note does not know
        return MergeOutcome(status=MergeStatus.MERGED, sha=str(merged))

    def bot_author(self) -> str:
        return self.bot.name

    def landed(self, shas: Sequence[str]) -> set[str]:
        tip = self._tip(self.default_branch())
        if tip is None:
            return set()
        return {sha for sha in shas if contains(self.repo, tip, sha)}

    def _merge_commit(self, record: LocalPr, base: str, head: str) -> str | MergeOutcome:
        tree = self.repo.merged_tree(base, head)
        if isinstance(tree, list):
            return _refused(f"conflicts with {record.base_branch} in {', '.join(tree)}")
        message = (
            f"Merge pull request #{record.number} from {record.head_branch}\n\n{record.title}\n"
        )
        commit = self.repo.create_commit(tree, [base, head], self._author(), message)
        ref = f"refs/heads/{record.base_branch}"
        try:
            if self.repo.checked_out_branch() == ref:
                # the base is checked out: bring its files along; refuses to clobber local edits
                self.repo.checkout(commit)
        except GitFailure as exc:
            return _refused(f"the work tree has changes the merge would overwrite ({exc})")
        self.repo.move_ref(ref, commit, f"denv: merge pull request #{record.number}")
        return commit

    def _author(self) -> Author:
        email = self.repo.config("user.email")
        return Author(self.user, f"{self.user}@localhost" if email is None else email)


def _refused(reason: str) -> MergeOutcome:
    return MergeOutcome(status=MergeStatus.REFUSED, reason=reason)
