"""Adapter: where `denv optimize` keeps its state, and the lock of a running study.

The state lives in the repository's git directory, `.git/denv-optimize/` (as the local
forge's records do): never in the work tree, so nothing is committed by accident, and it
survives between runs of a self-hosted CI runner, which keeps `.git`. `DENV_OPTIMIZE_HOME`
names another folder. Inside it, per RELEASE/STAGE (`<release>.<stage>/`):

- `candidates.json`: the StudyState (candidates.py), rewritten by atomic rename;
- `run.lock`: held (flock) by the process running the study, with its pid inside, which
  `denv optimize stop` signals;
- optuna's storage `studies.db` (SQLite) one level up, shared by every study, unless
  `--storage URL` names another (a PostgreSQL URL lets workers on several fleets share one).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path

from reconciler.adapters.git import GitRepo
from reconciler.errors import DenvError, NotFound, UsageError
from reconciler.optimize.candidates import StudyState
from reconciler.spec.base import Spec


class StudyBusy(DenvError):
    """Another process runs the study already."""


def split_target(text: str) -> tuple[str, str]:
    """`RELEASE/STAGE`, the key of a study, as its two parts."""
    release, _, stage = text.partition("/")
    if not release or not stage or "/" in stage:
        raise UsageError(f"'{text}': give RELEASE/STAGE, e.g. chat-8b/prod")
    return release, stage


def state_home(root: Path, env: Mapping[str, str]) -> Path:
    chosen = env.get("DENV_OPTIMIZE_HOME")
    if chosen:
        return Path(chosen)
    try:
        git_dir = GitRepo.open(root).git_dir
    except DenvError:
        git_dir = root / ".git"  # not a repository: beside it, still out of the way
    return git_dir / "denv-optimize"


def default_storage(home: Path) -> str:
    return f"sqlite:///{home / 'studies.db'}"


def shown_storage(url: str) -> str:
    """The storage URL without a password (it may land in JSON output and files)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    credentials, _, host = rest.partition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


class StateStore:
    def __init__(self, home: Path) -> None:
        self.home = home

    def folder(self, release: str, stage: str) -> Path:
        return self.home / f"{release}.{stage}"

    def keys(self) -> list[tuple[str, str]]:
        if not self.home.is_dir():
            return []
        found = []
        for path in sorted(self.home.glob("*/candidates.json")):
            release, _, stage = path.parent.name.rpartition(".")
            found.append((release, stage))
        return found

    def load(self, release: str, stage: str) -> StudyState | None:
        path = self.folder(release, stage) / "candidates.json"
        if not path.is_file():
            return None
        return StudyState.model_validate_json(path.read_text())

    def require(self, release: str, stage: str) -> StudyState:
        found = self.load(release, stage)
        if found is None:
            raise NotFound(
                f"no study for {release}/{stage} yet: start one with "
                f"`denv optimize start {release}/{stage}`"
            )
        return found

    def save(self, state: StudyState) -> None:
        path = self.folder(state.release, state.stage) / "candidates.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.parent / "candidates.json.tmp"
        temporary.write_text(state.model_dump_json(indent=2))
        os.replace(temporary, path)

    def all(self) -> list[StudyState]:
        return [s for s in (self.load(r, st) for r, st in self.keys()) if s is not None]

    def find_candidate(self, candidate: str) -> StudyState:
        """The study holding `candidate` (`ID` or `RELEASE/STAGE:ID`)."""
        where, _, wanted = candidate.rpartition(":")
        studies = self.all()
        if where:
            studies = [s for s in studies if s.key == where]
        holding = [s for s in studies if s.row(wanted) is not None]
        if not holding:
            raise NotFound(f"no candidate '{candidate}' (see `denv optimize candidates`)")
        if len(holding) > 1:
            keys = ", ".join(f"{s.key}:{wanted}" for s in holding)
            raise DenvError(f"candidate '{wanted}' is in several studies: name one of {keys}")
        return holding[0]

    @contextlib.contextmanager
    def running(self, release: str, stage: str) -> Iterator[None]:
        """Hold the study's run lock for the `with` block; StudyBusy when another holds it."""
        folder = self.folder(release, stage)
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "run.lock").open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                pid = lock.read().strip() or "?"
                raise StudyBusy(
                    f"{release}/{stage} is being optimized by process {pid}; "
                    f"`denv optimize stop {release}/{stage}` stops it"
                ) from None
            lock.seek(0)
            lock.truncate()
            lock.write(str(os.getpid()))
            lock.flush()
            try:
                yield
            finally:
                lock.truncate(0)
                fcntl.flock(lock, fcntl.LOCK_UN)

    def runner_pid(self, release: str, stage: str) -> int | None:
        """The pid of the process running the study, or None when none runs it."""
        path = self.folder(release, stage) / "run.lock"
        if not path.is_file():
            return None
        with path.open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                text = lock.read().strip()
                return int(text) if text.isdigit() else None
            fcntl.flock(lock, fcntl.LOCK_UN)
            return None

    def stop(self, release: str, stage: str) -> int | None:
        """SIGTERM to the process running the study (it tears its trial down and marks the
        study stopped); its pid, or None when none was running."""
        pid = self.runner_pid(release, stage)
        if pid is None:
            return None
        (self.folder(release, stage) / "stop").touch()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        return pid

    def stop_requested(self, release: str, stage: str) -> bool:
        return (self.folder(release, stage) / "stop").exists()

    def clear_stop(self, release: str, stage: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder(release, stage) / "stop").unlink()


class StudyStatus(Spec):
    target: str
    goal: str
    study: str
    state: str  # running (pid N), finished, stopped, failed, interrupted
    trials: int
    candidates: int
    verified: list[str]
    inconclusive: list[str] = []  # verification undecided: `--verify` retries them
    pull_requests: list[int]
    started: dt.datetime
    storage: str


def study_status(store: StateStore, state: StudyState) -> StudyStatus:
    """`denv optimize status`'s row: the study's state in words (a runner that ended without
    saying so is `interrupted`), its trials, verified (and inconclusive) candidates and pull
    requests."""
    pid = store.runner_pid(state.release, state.stage)
    shown = f"running (pid {pid})" if pid else state.state
    if pid is None and state.state == "running":
        shown = "interrupted"  # its process ended without saying so (SIGKILL, a crash)
    return StudyStatus(
        target=state.key,
        goal=state.goal,
        study=state.study,
        state=shown,
        trials=state.trials,
        candidates=len(state.candidates),
        verified=[r.id for r in state.candidates if r.status == "verified"],
        inconclusive=[r.id for r in state.candidates if r.status == "inconclusive"],
        pull_requests=sorted(r.pr for r in state.candidates if r.pr is not None),
        started=state.started,
        storage=state.storage,
    )
