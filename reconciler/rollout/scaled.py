"""Pure logic: what `denv status`, `denv status --events` and the UI show of elastic
deployments, from what the bots keep with their lease notes (`checks.scaling`, written by
rollout/autoscale.py): the count each keeps, why, the signals behind it, and every decision
with the signal values that caused it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.fleet.model.labels import DeploymentKey

# what one decision recorded beside its count (rollout/scaling.Signals.as_dict)
SIGNALS = ("serving", "arrival_rps", "waiting", "kv_usage", "firing", "capacity_rps")


def _deployments(checks: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """'release/stage/fleet' -> what one bot's checks keep of that elastic deployment."""
    scaling = (checks or {}).get("scaling")
    found = scaling.get("deployments") if isinstance(scaling, dict) else None
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, dict)}


def _key(name: str) -> DeploymentKey | None:
    parts = name.split("/")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts) else None


def kept_counts(checks: Mapping[str, Any] | None) -> dict[DeploymentKey, int]:
    """The count the bot keeps for each elastic deployment (its last decision), from its
    checks: what `denv status` plans at, as the bot does."""
    counts: dict[DeploymentKey, int] = {}
    for name, kept in _deployments(checks).items():
        count, key = kept.get("count"), _key(name)
        if key is not None and isinstance(count, int) and not isinstance(count, bool):
            counts[key] = max(0, count)
    return counts


def kept_scaling(notes: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """'release/stage/fleet' -> its last decision, from the bots' notes (one per fleet; a bot
    writes the same checks into each fleet's note it holds): the newest decision wins."""
    found: dict[str, dict[str, Any]] = {}
    for note in notes:
        checks = note.get("checks") if isinstance(note, dict) else None
        for name, kept in _deployments(checks if isinstance(checks, dict) else None).items():
            before = found.get(name)
            if before is None or _at(kept, "decided_at") > _at(before, "decided_at"):
                found[name] = kept
    return found


def scaling_of(kept: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A `denv status` row's `scaling`: why the bot keeps its count, the signals it read then,
    and when the count last changed; None where no bot has decided."""
    if not kept or not isinstance(kept.get("reason"), str):
        return None
    signals = kept.get("signals")
    return {
        "reason": kept["reason"],
        "signals": signals if isinstance(signals, dict) else None,
        "changed_at": kept.get("changed_at"),
    }


def scale_events(notes: Iterable[Any]) -> list[dict[str, Any]]:
    """Every scaling decision the bots' notes keep, oldest first, each once (`denv status
    --events`): {at, deployment, from, to, reason, and the signal values that caused it}."""
    events: dict[tuple[str, float, Any, Any], dict[str, Any]] = {}
    for note in notes:
        checks = note.get("checks") if isinstance(note, dict) else None
        for name, kept in _deployments(checks if isinstance(checks, dict) else None).items():
            for event in kept.get("events") or []:
                if not isinstance(event, dict) or not isinstance(event.get("at"), int | float):
                    continue
                found = {"at": event["at"], "deployment": name, "from": event.get("from"),
                         "to": event.get("to"), "reason": event.get("reason", "")}  # fmt: skip
                found |= {s: event.get(s) for s in SIGNALS}
                events[(name, float(event["at"]), event.get("from"), event.get("to"))] = found
    return sorted(events.values(), key=lambda e: (e["at"], e["deployment"]))


def scale_line(row: Mapping[str, Any]) -> str | None:
    """`denv status`'s line for an elastic deployment: its count within git's bounds, why,
    and the replicas that are pending; None for a fixed count."""
    if row.get("scale") is None:
        return None
    key = f"{row['release']}/{row['stage']}/{row['fleet']}"
    scaling = row.get("scaling")
    why = scaling["reason"] if scaling else "no bot has decided yet: the count that runs"
    line = f"{key}: replicas {row['scale']}: {why}"
    if row.get("pending_replicas"):
        line += "; the pending ones wait for free GPUs and are never counted"
    return line


def event_line(event: Mapping[str, Any]) -> str:
    """One decision as `denv status --events` prints it."""
    at = dt.datetime.fromtimestamp(event["at"], dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    said = signal_words(event)
    return f"{at}  {event['deployment']}: {event['from']} → {event['to']}: {event['reason']}" + (
        f" ({said})" if said else ""
    )


def signal_words(signals: Mapping[str, Any]) -> str:
    """The signal values of a decision, in words."""
    words = []
    if isinstance(signals.get("arrival_rps"), int | float):
        words.append(f"arrival {signals['arrival_rps']:.3g} req/s")
    if isinstance(signals.get("capacity_rps"), int | float):
        words.append(f"capacity {signals['capacity_rps']:.3g} req/s per replica")
    if isinstance(signals.get("waiting"), int | float):
        words.append(f"waiting {signals['waiting']:g}")
    if isinstance(signals.get("kv_usage"), int | float):
        words.append(f"KV {signals['kv_usage']:.0%}")
    if isinstance(signals.get("serving"), int):
        words.append(f"{signals['serving']} serving")
    if signals.get("firing"):
        words.append("firing " + ", ".join(str(a) for a in signals["firing"]))
    return ", ".join(words)


def _at(kept: Mapping[str, Any], name: str) -> float:
    value = kept.get(name)
    return float(value) if isinstance(value, int | float) else float("-inf")
