"""What the UI's pages read: the latest look at git and the fleets (the same gathering as
`denv status` and `denv rollout status`, rollout/overview.py), the optimizer's studies, and
a short history of each stage's alarm readings that the UI keeps while it runs. A refresher
thread takes a new look every `refresh` seconds; pages read the last one and never wait."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.errors import DenvError
from reconciler.rollout.overview import Overview
from reconciler.spec.repo import Repo

HISTORY = 240  # readings kept per stage: 2 minutes at the default refresh of 0.5 s


@dataclass
class AlarmReading:
    at: float
    values: dict[str, float | None]  # alarm -> value (None: too few requests yet)
    firing: list[str]


@dataclass
class UiState:
    """The last look; `error` says why the latest one failed (the previous look stays)."""

    refresh: float = 2.0
    label: str = ""  # the repository, as the CLI names it
    overview: Overview | None = None
    repo: Repo | None = None  # the head's repository: releases, fleets, results, catalog
    studies: list[Any] = field(default_factory=list)  # optimize.state.StudyState
    study_rows: list[Any] = field(default_factory=list)  # optimize.state.StudyStatus
    history: dict[str, deque[AlarmReading]] = field(default_factory=dict)  # 'release/stage'
    trials: dict[str, list[Any]] = field(default_factory=dict)  # fleet -> trials.owner.FoundTrial
    root: Path | None = None  # the repository's folder, where --repo is one: its local forge
    github: str | None = None  # https://github.com/OWNER/NAME where the forge is GitHub
    error: str | None = None
    at: float | None = None  # when the last successful look ended
    looks: int = 0
    # held while a look is recorded and while a page reads the state
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, overview: Overview) -> None:
        """Keep `overview` as the last look, and its alarm readings in the history."""
        with self.lock:
            self._record(overview)

    def _record(self, overview: Overview) -> None:
        for release, stages in overview.stages.items():
            for stage in stages:
                if not stage.alarms:
                    continue
                kept = self.history.setdefault(f"{release}/{stage.stage}", deque(maxlen=HISTORY))
                kept.append(
                    AlarmReading(
                        overview.at,
                        {a.name: a.value for a in stage.alarms},
                        [a.name for a in stage.alarms if a.firing],
                    )
                )
        self.overview, self.repo = overview, overview.repo
        self.at, self.error = overview.at, None
        self.looks += 1


class Gather:
    """One look as `denv status` takes it, with each release's stages, and the optimizer's
    studies where the repository is a local folder (they live in its git directory)."""

    def __init__(self, location: str, cache: Path) -> None:
        from reconciler.fleet.drivers.registry import Drivers
        from reconciler.reconcile.source import GitSource

        self.source = GitSource(location, cache, branch="main")
        self.drivers = Drivers(warn=lambda message: None)  # a failure shows as the page's error
        local = "://" not in location and Path(location).is_dir()
        self.root = Path(location) if local else None
        self.label = folder_label(self.root) if self.root is not None else self.source.label
        self.github = github_site(os.environ)

    def __call__(self, state: UiState) -> None:
        from reconciler.rollout.overview import look

        seen = look(self.source, self.drivers, stages=True)
        studies = _studies(self.root) if self.root is not None else ([], [])
        trials = _trials(seen)
        with state.lock:
            state.label = self.label
            state.studies, state.study_rows = studies
            state.trials, state.root, state.github = trials, self.root, self.github
        state.record(seen)

    def close(self) -> None:
        self.drivers.close()


def folder_label(root: Path) -> str:
    """A local repository as the pages name it: its folder's name (`--repo .` is the current
    folder's), never '.' nor a path that says where a throwaway clone happens to be."""
    return root.resolve().name or str(root.resolve())


def _studies(root: Path) -> tuple[list[Any], list[Any]]:
    """The optimizer's studies of the repository at `root`, and their rows as `denv optimize
    status` shows them."""
    from reconciler.optimize.state import StateStore, state_home, study_status

    store = StateStore(state_home(root, os.environ))
    studies = store.all()
    return studies, [study_status(store, s) for s in studies]


def _trials(seen: Overview) -> dict[str, list[Any]]:
    """The trials on each fleet the look observed, with their owners' state (`denv fleet
    trials`' gathering; it reads this machine's processes)."""
    from reconciler.trials.owner import found_trials, owner_state

    return {
        fleet: found_trials(observed, owner_state)
        for fleet, observed in seen.snap.observations.items()
    }


def github_site(env: Mapping[str, str]) -> str | None:
    """The repository's page on GitHub where the forge is GitHub (forge/config.py's
    variables): its pull requests link there."""
    from reconciler.forge.config import DEFAULT_SERVER, forge_kind

    try:
        github = forge_kind(env) == "github"
    except DenvError:
        return None  # a bad DENV_FORGE: the CLI says so where it matters; no links here
    repository = env.get("DENV_GITHUB_REPOSITORY") or env.get("GITHUB_REPOSITORY")
    if not github or not repository or repository.count("/") != 1:
        return None
    return f"{env.get('GITHUB_SERVER_URL', DEFAULT_SERVER).rstrip('/')}/{repository}"


class Refresher:
    """Takes a look now and then every `state.refresh` seconds, in a thread, until stopped."""

    def __init__(self, state: UiState, gather: Callable[[UiState], None]) -> None:
        self.state, self.gather = state, gather
        self.stopped = threading.Event()
        self.first = threading.Event()  # the first look ended (well or not)
        self.thread = threading.Thread(target=self._run, name="denv-ui-refresh", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def once(self) -> None:
        try:
            self.gather(self.state)
        except DenvError as exc:
            with self.state.lock:
                self.state.error = str(exc)
        except Exception as exc:  # a bug must not stop the pages: they say what failed
            with self.state.lock:
                self.state.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.first.set()

    def _run(self) -> None:
        while not self.stopped.is_set():
            began = time.monotonic()
            self.once()
            self.stopped.wait(max(0.0, self.state.refresh - (time.monotonic() - began)))

    def stop(self) -> None:
        """Safe to call whether or not it started (a server that could not listen never
        starts its refresher)."""
        self.stopped.set()
        if self.thread.ident is not None:
            self.thread.join(timeout=30)
