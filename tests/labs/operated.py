"""`denv` on a lab as its operator runs it: a subprocess on the lab's repository (the lab says
how: its `denv`), one reconcile pass with the lab's timing, the status read from --json."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any, ClassVar


class Operated:
    """A lab's `reconcile` and `status`, on top of the lab's own `denv`."""

    timing: ClassVar[tuple[str, ...]] = ()  # reconcile's --ready-timeout and --drain here

    def denv(self, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        raise NotImplementedError

    def reconcile(
        self, *args: str, fault: str | None = None, ok: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`denv reconcile --once`; with `ok`, it must have exited 0."""
        done = self.denv("reconcile", "--once", *self.timing, *args, fault=fault)
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def status(self) -> dict[str, Any]:
        done = self.denv("status", "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer


def actions_done(summary: str) -> dict[str, int]:
    """What a reconcile pass's summary line says it did (`done: router-add 1, start 3;`), by
    action. Which actions a pass takes beside the planned ones depends on timing: a router
    started before a replica was ready adds it in the same pass."""
    found = re.search(r"; done: ([^;]*);", summary)
    assert found, summary
    if found.group(1) == "nothing":
        return {}
    return {
        kind: int(n) for kind, n in (part.rsplit(" ", 1) for part in found.group(1).split(", "))
    }
