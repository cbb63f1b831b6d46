"""Adapter: the local forge's records, JSON files in `.git/denv-forge/`.

They sit in the git directory, beside the branches they describe: never in the work tree (no
untracked files, nothing committed by accident), and per clone, as local branches are.
One file per pull request and one per commit that has checks; every change is a
read-modify-write under an exclusive lock and lands by atomic rename of an fsynced file, so
two `denv` processes never lose each other's comment or approval, and a crash leaves the old
record or the new one. A record that cannot be read (garbled, truncated) is neither absent nor
a crash: `UnreadableRecord` names its file and how to repair it (`denv pr repair N`).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from reconciler.errors import ForgeError, NotFound
from reconciler.forge.models import CheckRun, Comment, PrState, Review

M = TypeVar("M", bound=BaseModel)


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


class UnreadableRecord(ForgeError):
    """A pull request's record is there but cannot be read: what depends on it stops."""

    def __init__(self, path: Path, number: int, why: str) -> None:
        self.path, self.number = path, number
        super().__init__(
            f"{path}: the record of local pull request #{number} is unreadable ({why}); denv "
            f"leaves #{number} alone until it is repaired: restore the file, or run "
            f"`denv pr repair {number}` (moves it aside, records #{number} as closed)"
        )


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
        found = _read(path, LocalPr)
        if isinstance(found, str):
            raise UnreadableRecord(path, number, found)
        return found

    def records(self) -> tuple[list[LocalPr], list[UnreadableRecord]]:
        """Every pull request's record, and those that cannot be read."""
        found: list[LocalPr] = []
        unreadable: list[UnreadableRecord] = []
        for number in self.numbers():
            try:
                found.append(self.load(number))
            except UnreadableRecord as exc:
                unreadable.append(exc)
        return found, unreadable

    def set_aside(self, number: int) -> Path:
        """Keep pull request `number`'s record file beside it, for a post-mortem, under a name
        never read again: `<n>.json.unreadable-<UTC time>`."""
        path = self._pr_path(number)
        kept = path.with_name(
            f"{path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        )
        os.replace(path, kept)
        _sync_folder(path.parent)
        return kept

    def save(self, pr: LocalPr) -> None:
        self._write(self._pr_path(pr.number), pr.model_dump_json(indent=2))

    def checks(self, sha: str) -> CommitChecks:
        path = self.root / "checks" / f"{sha}.json"
        if not path.is_file():
            return CommitChecks()
        found = _read(path, CommitChecks)
        if isinstance(found, str):
            raise ForgeError(
                f"{path}: the checks of commit {sha[:12]} are unreadable ({found}); remove the "
                "file: the bot sets its checks again on its next pass"
            )
        return found

    def save_checks(self, sha: str, checks: CommitChecks) -> None:
        self._write(self.root / "checks" / f"{sha}.json", checks.model_dump_json(indent=2))

    def _write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        with temporary.open("w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """A rename survives a power loss once its folder is synced."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _read(path: Path, model: type[M]) -> M | str:
    """The record in `path`, or why it cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if not raw:
            return "empty"
        if b"\0" in raw:
            return f"{len(raw)} bytes with NUL bytes"
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
