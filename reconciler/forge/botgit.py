"""Adapter: the bot's commits with the git adapter, never touching a work tree.

The bot edits files of the base branch in memory (YAML through the round-trip writer, so
comments survive), writes one commit, and moves its branch. It never rewrites history:
when its branch exists, the new commit goes on top of it (a merge of the base when the base
moved), so the branch only fast-forwards, and a push that finds someone else's commit there
is rejected by git itself. Before that, any commit on the branch that is not the bot's stops
it with `BotBranchTaken`: a human's work on the bot's branch is never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from reconciler.adapters.git import Author, CommitInfo, GitRepo, Snapshot
from reconciler.errors import BotBranchTaken, ForgeError, SpecError
from reconciler.forge.protocol import BotIdentity, Edit
from reconciler.spec.yamlio import YamlDoc, parse_yaml


def _clean(path: str) -> str:
    posix = PurePosixPath(path)
    if posix.is_absolute() or ".." in posix.parts or not posix.parts or path != str(posix):
        raise ForgeError(f"'{path}' is not a plain path inside the repository")
    return path


@dataclass
class TreeFiles:
    """`BotFiles` over a commit's tree; what the edit changed, as bytes by path."""

    commit: Snapshot
    docs: dict[str, YamlDoc] = field(default_factory=dict)
    written: dict[str, bytes] = field(default_factory=dict)

    def _blob(self, path: str) -> bytes | None:
        found = self.commit.blob(_clean(path))
        return None if found is None else found.data

    def exists(self, path: str) -> bool:
        return path in self.written or self._blob(path) is not None

    def yaml(self, path: str) -> YamlDoc:
        if path in self.docs:
            return self.docs[path]
        data = self.written.get(path) or self._blob(path)
        if data is None:
            raise ForgeError(f"{path}: no such file on the base branch")
        doc, problem = parse_yaml(path, data)
        if doc is None:
            assert problem is not None
            raise SpecError([problem])
        self.docs[path] = doc
        return doc

    def write(self, path: str, text: str) -> None:
        self.docs.pop(path, None)
        self.written[_clean(path)] = text.encode()

    def changes(self) -> dict[str, bytes]:
        changed = dict(self.written)
        for path, doc in self.docs.items():
            text = doc.dumps()
            if text != doc.text:
                changed[path] = text.encode()
        return changed


def edited_tree(repo: GitRepo, base: Snapshot, edit: Edit) -> str:
    """The base commit's tree with the edit applied."""
    files = TreeFiles(base)
    edit(files)
    return repo.tree_with(base.id, files.changes())


def foreign_commits(repo: GitRepo, tip: str, base: str, bot: BotIdentity) -> list[CommitInfo]:
    """Commits on the branch (not on the base) whose author is not the bot."""
    return [
        c for c in repo.commits_between(tip, base) if c.author.email.lower() != bot.email.lower()
    ]


def refuse_foreign(repo: GitRepo, branch: str, tip: str, base: str, bot: BotIdentity) -> None:
    foreign = foreign_commits(repo, tip, base, bot)
    if foreign:
        who = ", ".join(sorted({f"{c.author.name} <{c.author.email}>" for c in foreign}))
        raise BotBranchTaken(
            f"branch '{branch}' has {len(foreign)} commit(s) not by the bot ({who}), e.g. "
            f"{foreign[0].id[:12]}; the bot never overwrites them: merge that work or "
            "delete the branch, then run again"
        )


def contains(repo: GitRepo, tip: str, sha: str) -> bool:
    """Whether the branch at `tip` holds commit `sha` (here; a commit not here: it does not)."""
    return sha == tip or (repo.lookup(sha) is not None and repo.descendant_of(tip, sha))


def bot_commit(
    repo: GitRepo,
    branch: str,
    base_tip: str,
    branch_tip: str | None,
    bot: BotIdentity,
    message: str,
    edit: Edit,
) -> str:
    """The commit the branch should point to: `branch_tip` itself when nothing changed."""
    base = repo.revparse(base_tip)
    tree = edited_tree(repo, base, edit)
    if branch_tip is not None and contains(repo, base_tip, branch_tip):
        branch_tip = None  # merged already: start again from the base (still a fast-forward)
    if branch_tip is None:
        if tree == base.tree_id:
            raise ForgeError(f"nothing to propose: the edit leaves '{branch}' as the base is")
        parents = [base_tip]
    else:
        refuse_foreign(repo, branch, branch_tip, base_tip, bot)
        current = repo.revparse(branch_tip)
        up_to_date = repo.descendant_of(branch_tip, base_tip)
        if up_to_date and current.tree_id == tree:
            return branch_tip
        # a merge when the base moved keeps the PR's diff to the edit, without a force push
        parents = [branch_tip] if up_to_date else [branch_tip, base_tip]
    return repo.create_commit(tree, parents, Author(bot.name, bot.email), message)
