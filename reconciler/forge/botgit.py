"""Adapter: the bot's commits with pygit2, never touching a work tree.

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

import pygit2
from pygit2.enums import FileMode, SortMode

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

    repo: pygit2.Repository
    tree: pygit2.Tree
    docs: dict[str, YamlDoc] = field(default_factory=dict)
    written: dict[str, bytes] = field(default_factory=dict)

    def _blob(self, path: str) -> bytes | None:
        try:
            obj = self.tree[_clean(path)]
        except KeyError:
            return None
        return bytes(obj.data) if isinstance(obj, pygit2.Blob) else None

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


def edited_tree(repo: pygit2.Repository, base: pygit2.Commit, edit: Edit) -> pygit2.Oid:
    """The base commit's tree with the edit applied."""
    files = TreeFiles(repo, base.tree)
    edit(files)
    index = pygit2.Index()
    index.read_tree(base.tree)
    for path, data in sorted(files.changes().items()):
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), FileMode.BLOB))
    return index.write_tree(repo)


def foreign_commits(
    repo: pygit2.Repository, tip: pygit2.Oid, base: pygit2.Oid, bot: BotIdentity
) -> list[pygit2.Commit]:
    """Commits on the branch (not on the base) whose author is not the bot."""
    walker = repo.walk(tip, SortMode.TOPOLOGICAL)
    walker.hide(base)
    return [c for c in walker if c.author.email.lower() != bot.email.lower()]


def refuse_foreign(
    repo: pygit2.Repository, branch: str, tip: pygit2.Oid, base: pygit2.Oid, bot: BotIdentity
) -> None:
    foreign = foreign_commits(repo, tip, base, bot)
    if foreign:
        who = ", ".join(sorted({f"{c.author.name} <{c.author.email}>" for c in foreign}))
        raise BotBranchTaken(
            f"branch '{branch}' has {len(foreign)} commit(s) not by the bot ({who}), e.g. "
            f"{str(foreign[0].id)[:12]}; the bot never overwrites them: merge that work or "
            "delete the branch, then run again"
        )


def bot_commit(
    repo: pygit2.Repository,
    branch: str,
    base_tip: pygit2.Oid,
    branch_tip: pygit2.Oid | None,
    bot: BotIdentity,
    message: str,
    edit: Edit,
) -> pygit2.Oid:
    """The commit the branch should point to: `branch_tip` itself when nothing changed."""
    base = repo[base_tip].peel(pygit2.Commit)
    tree = edited_tree(repo, base, edit)
    if branch_tip is not None and (
        branch_tip == base_tip or repo.descendant_of(base_tip, branch_tip)
    ):
        branch_tip = None  # merged already: start again from the base (still a fast-forward)
    if branch_tip is None:
        if tree == base.tree.id:
            raise ForgeError(f"nothing to propose: the edit leaves '{branch}' as the base is")
        parents = [base_tip]
    else:
        refuse_foreign(repo, branch, branch_tip, base_tip, bot)
        current = repo[branch_tip].peel(pygit2.Commit)
        up_to_date = repo.descendant_of(branch_tip, base_tip)
        if up_to_date and current.tree.id == tree:
            return branch_tip
        # a merge when the base moved keeps the PR's diff to the edit, without a force push
        parents = [branch_tip] if up_to_date else [branch_tip, base_tip]
    signature = pygit2.Signature(bot.name, bot.email)
    return repo.create_commit(None, signature, signature, message, tree, parents)
