"""Adapter: what the bot keeps with its lease note (the `checks` of its last pass: parity's
verdicts, the rollout's state, the autoscaler's counts and decisions), read without taking
the lease — for `denv status` and `denv rollout status`, which show what the bot runs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.reconcile.snapshot import LEASE
from reconciler.spec.repo import Repo


def release_fleets(repo: Repo, release: str | None = None) -> list[str]:
    """The fleets of every stage of a release (of every release when None)."""
    chosen = [r for n, r in repo.releases.items() if release in (None, n)]
    return sorted({f for r in chosen for s in r.stages for f in s.fleets})


def bot_checks(
    repo: Repo, fleets: Iterable[str], drivers: Drivers
) -> tuple[dict[str, Any] | None, str]:
    """(the checks of the first fleet whose note has the rollout's state, or None and why)."""
    why = "no fleet of the release answered"
    for name in fleets:
        spec = repo.fleets.get(name)
        if spec is None or not spec.hosts:
            continue
        try:
            note = drivers.get(spec).lease(LEASE, "status", 0, peek=True).note
        except DenvError as exc:
            why = f"fleet {name}: {exc}"
            continue
        checks = (note or {}).get("checks") or {}
        if checks.get("rollout"):
            return dict(checks), ""
        why = "no bot has run the stages yet"
    return None, why


def fleet_notes(repo: Repo, fleets: Iterable[str], drivers: Drivers) -> dict[str, Any]:
    """fleet -> the note of the bot's last pass there (None: no bot ran there; {'error': …}:
    the note was not read)."""
    notes: dict[str, Any] = {}
    for name in fleets:
        spec = repo.fleets.get(name)
        if spec is None:
            continue
        try:
            notes[name] = drivers.get(spec).lease(LEASE, "status", 0, peek=True).note
        except DenvError as exc:
            notes[name] = {"error": str(exc)}  # not a pass: the note is not known
    return notes
