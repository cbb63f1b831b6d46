"""Pure logic: how the reconciler names the units it starts and labels them, and how it reads
those labels back from the agents' unit records. A record without them is not the
reconciler's (a bench run, an optimizer trial) and is never touched."""

from __future__ import annotations

from reconciler.engines.units import Unit
from reconciler.fleet.model.observed import UnitRecord

DeploymentKey = tuple[str, str, str]  # release, stage, fleet


def unit_id(release: str, stage: str, fleet: str, name: str) -> str:
    """A unit's id on its host: stable across passes, unique per host, safe as a file name."""
    return f"{release}.{stage}.{fleet}.{name}"


def unit_labels(key: DeploymentKey, revision: str, unit: Unit) -> dict[str, str]:
    release, stage, fleet = key
    return {
        "release": release,
        "stage": stage,
        "fleet": fleet,
        "revision": revision,
        "role": unit.role,
        "replica": str(unit.replica),
        "node": str(unit.node),
    }


def record_key(record: UnitRecord) -> DeploymentKey | None:
    """The deployment a unit record belongs to, from its labels; None when it has none."""
    labels = record.labels
    if not all(labels.get(k) for k in ("release", "stage", "fleet")):
        return None
    return labels["release"], labels["stage"], labels["fleet"]


def fleet_key(record: UnitRecord, fleet: str) -> DeploymentKey | None:
    """record_key, for records of `fleet` only: on a machine that hosts of two fleets share,
    each fleet's plan leaves the other's units alone."""
    key = record_key(record)
    return key if key is not None and key[2] == fleet else None


def router_key(record: UnitRecord, fleet: str) -> DeploymentKey | None:
    """fleet_key, for the routers of `fleet`'s deployments only (their endpoints)."""
    return fleet_key(record, fleet) if record.labels.get("role") == "router" else None
