"""Leases: one reconciler at a time per fleet. The lease lives on the fleet's first host,
taken and renewed under a file lock; a holder that stops renewing loses it at expiry.

A lease file that cannot be read is never taken for a free lease: every call (take, renew,
release, peek) refuses with the file's path, and leaves it as it is (it may hold another
bot's lease, and the rollout state kept in its note). `repair` moves it aside."""

import fcntl
import os
import time

from common import HOME, AgentError, Unreadable, aside, read_record, write_atomic

LEASES = os.path.join(HOME, "leases")
REPAIR = "`denv fleet repair FLEET` moves it aside (the lease is free again; its note is lost)"


def lease(name, holder, ttl, release=False, note=None, peek=False):
    """Take or renew the lease `name` for `holder` (with the holder's `note`: its last pass);
    answer who holds it and until when. `peek` only reads."""
    path = lease_path(name)
    os.makedirs(LEASES, exist_ok=True)
    with open(path + ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        now = time.time()
        current = _read(path)
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


def lease_path(name):
    if not name or "/" in name or name.startswith("."):
        raise AgentError(f"bad lease name: {name!r}")
    return os.path.join(LEASES, name + ".json")


def _read(path):
    """The lease as recorded, None when there is none; Unreadable when the file is there and
    is not one."""
    current = read_record(path, REPAIR, "lease file")
    if current is not None:
        expires, holder = current.get("expires"), current.get("holder")
        if not isinstance(expires, (int, float)) or not isinstance(holder, (str, type(None))):
            raise Unreadable(path, "a JSON object, not a lease", REPAIR, "lease file")
    return current


def unreadable():
    """The lease files that cannot be read, as [{"record", "path", "why"}]."""
    found = []
    for name in sorted(os.listdir(LEASES)) if os.path.isdir(LEASES) else ():
        if name.endswith(".json") and not name.startswith("."):
            try:
                _read(os.path.join(LEASES, name))
            except Unreadable as exc:
                found.append({"record": "lease", "path": exc.path, "why": str(exc)})
    return found


def repair():
    """Move every unreadable lease file aside, each under its lease's lock; what went where."""
    moved = []
    for found in unreadable():
        path = found["path"]
        with open(path + ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                _read(path)  # mended meanwhile, or gone: nothing to do
            except Unreadable:
                moved.append({"record": "lease", "path": path, "moved_to": aside(path)})
    return moved
