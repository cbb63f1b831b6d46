"""What in-memory test drivers share: the record of a launched unit, and the FleetDriver verbs
a reconcile pass needs but these tests do not look at (logs, runtimes, a lease always held,
nothing to close)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.fleet.model.observed import UnitRecord


def launched(unit: Mapping[str, Any]) -> UnitRecord:
    """The record an agent reports for a launch payload it started."""
    return UnitRecord(
        id=unit["id"],
        digest=unit["digest"],
        argv=tuple(unit["argv"]),
        port=unit["port"],
        gpus=tuple(unit["gpus"]),
        restart=bool(unit.get("restart")),
        alive=True,
        labels=unit["labels"],
    )


class QuietVerbs:
    def logs(self, host: str, unit_id: str, tail: int = 100) -> dict[str, Any]:
        return {"lines": []}

    def runtimes(self, host: str) -> dict[str, Any]:
        return {"runtimes": [], "weights": []}

    def lease(
        self,
        name: str,
        holder: str,
        ttl: float,
        release: bool = False,
        note: Any = None,
        peek: bool = False,
    ) -> dict[str, Any]:
        return {"held": True, "holder": holder, "note": None, "expires": ttl, "now": 0}

    def close(self) -> None:
        return None
