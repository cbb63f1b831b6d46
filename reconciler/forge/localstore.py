"""Adapter: the local forge's records, JSON files in `.git/denv-forge/`.

They sit in the git directory, beside the branches they describe: never in the work tree (no
untracked files, nothing committed by accident), and per clone, as local branches are.
One file per pull request and one per commit that has checks; every change is a
read-modify-write under an exclusive lock and lands by atomic rename, so two `denv`
processes never lose each other's comment or approval.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from reconciler.errors import NotFound
from reconciler.forge.models import CheckRun, Comment, PrState, Review


class LocalPr(BaseModel):
    model_config = ConfigDict(extra="forbid")

    number: int
    title: str
    body: str
    author: str
    head_branch: str
    base_branch: str
    state: PrState = PrState.OPEN
    created_at: datetime
    head_sha: str = ""  # kept from the merge; while open, the branch says
    merged_sha: str | None = None
    # the author's SSH signature of the opening (commands.opening_message) and the head it
    # was opened at; None: unsigned (the bot's own pull requests; any other cannot merge)
    opening: str | None = None
    opened_head: str = ""
    comments: list[Comment] = []
    reviews: list[Review] = []


class CommitChecks(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checks: dict[str, CheckRun] = {}


class LocalStore:
    def __init__(self, git_dir: Path) -> None:
        self.root = git_dir / "denv-forge"

    @contextmanager
    def locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _pr_path(self, number: int) -> Path:
        return self.root / "prs" / f"{number}.json"

    def numbers(self) -> list[int]:
        folder = self.root / "prs"
        if not folder.is_dir():
            return []
        return sorted(int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit())

    def load(self, number: int) -> LocalPr:
        path = self._pr_path(number)
        if not path.is_file():
            known = ", ".join(f"#{n}" for n in self.numbers()) or "none yet"
            raise NotFound(f"no local pull request #{number} (known: {known})")
        return LocalPr.model_validate_json(path.read_text())

    def save(self, pr: LocalPr) -> None:
        self._write(self._pr_path(pr.number), pr.model_dump_json(indent=2))

    def checks(self, sha: str) -> CommitChecks:
        path = self.root / "checks" / f"{sha}.json"
        if not path.is_file():
            return CommitChecks()
        return CommitChecks.model_validate_json(path.read_text())

    def save_checks(self, sha: str, checks: CommitChecks) -> None:
        self._write(self.root / "checks" / f"{sha}.json", checks.model_dump_json(indent=2))

    def _write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(text)
        os.replace(temporary, path)
