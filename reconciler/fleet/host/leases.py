"""Leases: one reconciler at a time per fleet. The lease lives on the fleet's first host,
taken and renewed under a file lock; a holder that stops renewing loses it at expiry."""

import fcntl
import os
import time

from common import HOME, AgentError, read_json, write_atomic

LEASES = os.path.join(HOME, "leases")


def lease(name, holder, ttl, release=False, note=None, peek=False):
    """Take or renew the lease `name` for `holder` (with the holder's `note`: its last pass);
    answer who holds it and until when. `peek` only reads."""
    if not name or "/" in name or name.startswith("."):
        raise AgentError(f"bad lease name: {name!r}")
    os.makedirs(LEASES, exist_ok=True)
    path = os.path.join(LEASES, name + ".json")
    with open(path + ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        now = time.time()
        current = read_json(path)
        free = current is None or current["expires"] <= now or current["holder"] in (holder, None)
        if peek:
            return dict(current or {}, name=name, held=False, now=now)
        if release:  # the note (the last pass) stays for `denv status`
            if current is not None and current["holder"] == holder:
                write_atomic(path, dict(current, holder=None, expires=0))
            return {"name": name, "held": False, "holder": None, "expires": None}
        if not free:
            return dict(current, name=name, held=False, now=now)
        since = current["since"] if current and current["holder"] == holder else now
        taken = {"holder": holder, "expires": now + ttl, "since": since}
        taken["note"] = note if note is not None else (current or {}).get("note")
        write_atomic(path, taken)
        return dict(taken, name=name, held=True, now=now)
