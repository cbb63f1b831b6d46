"""Pure logic: hosts that do not answer, and since when.

Each look at the fleets (a bot's pass, a `denv status`) ends or extends every host's streak of
failed observations: a host that failed keeps the time of the first failure of its streak, a
host that answered ends it. The bot keeps its streaks in memory between passes and writes them
with its lease note on every fleet it reaches (`unreachable` in the note), so a bot started
again, and `denv status` from anywhere, continue them; `denv status` keeps its own too, for
when no fleet holding the bot's note answers. A fleet is unreachable when none of its hosts
answers, since its last host stopped answering.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from reconciler.spec.base import Spec


class Unreached(Spec):
    """A host in a streak of failed observations."""

    since: float  # epoch seconds of the streak's first failed observation
    cause: str  # the latest failure, in a word (refused, timed out, …)


# fleet -> host -> its streak; hosts that answered are absent
Streaks = dict[str, dict[str, Unreached]]


def track(
    previous: Mapping[str, Mapping[str, Unreached]],
    failed: Mapping[str, Mapping[str, str]],
    looked_at: Iterable[str],
    at: float,
) -> Streaks:
    """The streaks after a look at the fleets `looked_at` at time `at` (`failed`: fleet ->
    host -> cause, for the hosts that did not answer). A fleet not looked at has no streak:
    nothing is known of it now."""
    found: Streaks = {}
    for fleet in sorted(set(looked_at)):
        before = previous.get(fleet, {})
        hosts = {
            host: Unreached(since=before[host].since if host in before else at, cause=cause)
            for host, cause in sorted(failed.get(fleet, {}).items())
        }
        if hosts:
            found[fleet] = hosts
    return found


def earliest(current: Streaks, *others: Mapping[str, Mapping[str, Unreached]]) -> Streaks:
    """`current` (what the latest look found), each streak starting at the earliest time any
    other record has for the same host."""
    return {
        fleet: {
            host: seen.model_copy(
                update={
                    "since": min(
                        [seen.since]
                        + [o[fleet][host].since for o in others if host in o.get(fleet, {})]
                    )
                }
            )
            for host, seen in hosts.items()
        }
        for fleet, hosts in current.items()
    }


def parse(data: Any) -> Streaks:
    """Streaks as written in a note or a state file; nothing for what does not read as one
    (a note from an older bot)."""
    if not isinstance(data, dict):
        return {}
    found: Streaks = {}
    for fleet, hosts in data.items():
        if not isinstance(hosts, dict):
            continue
        try:
            found[str(fleet)] = {str(h): Unreached.model_validate(v) for h, v in hosts.items()}
        except ValidationError:
            continue
    return found


def dump(streaks: Streaks) -> dict[str, dict[str, dict[str, Any]]]:
    return {f: {h: u.model_dump() for h, u in hosts.items()} for f, hosts in streaks.items()}


class FleetReach(Spec):
    """What `denv status` says of a fleet with hosts that did not answer."""

    fleet: str
    hosts: int  # hosts the fleet declares
    unreached: dict[str, Unreached]

    @property
    def whole(self) -> bool:
        """No host answered: nothing is known of what runs."""
        return len(self.unreached) >= self.hosts

    @property
    def since(self) -> float:
        """When the fleet became unreachable (its last host stopped answering), or, for some
        hosts, when the first of them did."""
        times = [u.since for u in self.unreached.values()]
        return max(times) if self.whole else min(times)

    def text(self, now: float) -> str:
        hosts = ", ".join(
            f"{host} ({u.cause}" + (f", since {stamp(u.since)})" if u.since != self.since else ")")
            for host, u in self.unreached.items()
        )
        if self.whole:
            return (
                f"{self.fleet}: UNREACHABLE since {stamp(self.since)} ({ago(now - self.since)}): "
                f"no host answered, what runs there is not known: {hosts}"
            )
        return (
            f"{self.fleet}: {len(self.unreached)} of {self.hosts} hosts unreachable since "
            f"{stamp(self.since)} ({ago(now - self.since)}): {hosts}"
        )


def stamp(at: float) -> str:
    """An instant for people, in UTC: 2026-12-02 01:58:53 UTC."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def ago(seconds: float) -> str:
    """A duration for people: 42s ago, 12m ago, 3.5h ago, 2.0d ago."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f}m ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f}h ago"
    return f"{seconds / 86400:.1f}d ago"
