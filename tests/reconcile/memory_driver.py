"""What in-memory test drivers share: the FleetDriver verbs a reconcile pass needs but these
tests do not look at (logs, runtimes, a lease always held, nothing to close)."""

from __future__ import annotations

from typing import Any


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
