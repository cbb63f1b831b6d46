"""Leases: one reconciler at a time per fleet. The lease lives on the fleet's first host
(a local fleet's: in a folder of this machine's, whatever the agent's home), taken and renewed
under a file lock; a holder that stops renewing loses it at expiry. Each
taking gives it a greater epoch, which the holder's every call to the fleet's agents carries
(fences.py): a bot that lost the lease is refused at its next call.

A lease file that cannot be read is never taken for a free lease: every call (take, renew,
release, peek) refuses with the file's path, and leaves it as it is (it may hold another
bot's lease, and the rollout state kept in its note). `repair` moves it aside."""

import fcntl
import os
import stat
import time

import units
from common import HOME, AgentError, Unreadable, read_record, repair_records, write_atomic

LEASES = os.path.join(HOME, "leases")
REPAIR = "`denv fleet repair FLEET` moves it aside (the lease is free again; its note is lost)"


def lease(name, holder, ttl, release=False, note=None, peek=False, machine=False):
    """Take or renew the lease `name` for `holder` (with the holder's `note`: its last pass);
    answer who holds it and until when. `peek` only reads. `machine`: a local fleet's lease,
    kept for this machine whatever the agent's home (machine_leases)."""
    folder = machine_leases() if machine else LEASES
    path = lease_path(name, folder)
    os.makedirs(folder, exist_ok=True)
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
        if machine and current is not None and current.get("home") not in (None, HOME):
            _refuse_another_home(current["home"])
        renewed = current is not None and current["holder"] == holder
        since = current["since"] if renewed else now
        taken = {"holder": holder, "expires": now + ttl, "since": since, "home": HOME}
        taken["epoch"] = _epoch(current, renewed, now)
        taken["note"] = note if note is not None else (current or {}).get("note")
        write_atomic(path, taken)
        return dict(taken, name=name, held=True, now=now)


def _epoch(current, renewed, now):
    """The lease's epoch: kept while its holder renews it; taken anew, greater than any before
    it — the last one's plus one, or the time in milliseconds when that is more, so that a
    lease file moved aside by `repair` does not start the count again below what the hosts'
    fences (fences.py) have seen."""
    before = (current or {}).get("epoch")
    before = before if isinstance(before, int) and not isinstance(before, bool) else 0
    if renewed and before:
        return before
    return max(before + 1, int(now * 1000))


def lease_path(name, folder=LEASES):
    if not name or "/" in name or name.startswith("."):
        raise AgentError(f"bad lease name: {name!r}")
    return os.path.join(folder, name + ".json")


def machine_leases():
    """Where the leases of local fleets are kept: one folder for this user on this machine,
    whatever DENV_HOME, so that two bots with different homes never both drive its GPUs
    ($DENV_MACHINE_DIR moves it; /var/tmp keeps a lease's note across a reboot)."""
    folder = _machine_folder()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise AgentError(f"{folder} is not a folder of this user's: no lease is kept there")
    return os.path.join(folder, "leases")


def _machine_folder():
    return os.environ.get("DENV_MACHINE_DIR") or f"/var/tmp/denv-machine-{os.getuid()}"


def _refuse_another_home(home):
    """The last holder of this machine's lease kept its units in another agent home: while any
    of them runs (or cannot be read), its GPUs are that home's, and the lease is not given."""
    records, unreadable = units.scan(os.path.join(home, "units"))
    held = [r.get("id") or "?" for r in records if r["alive"]] + [u["id"] for u in unreadable]
    if held:
        more = f" and {len(held) - 3} more" if len(held) > 3 else ""
        raise AgentError(
            f"this machine's local fleets are driven from the agent home {home}, where "
            f"{', '.join(held[:3])}{more} run: one controller per GPU; run the bot with "
            f"DENV_HOME={home}, or stop those units first"
        )


def _read(path):
    """The lease as recorded, None when there is none; Unreadable when the file is there and
    is not one."""
    current = read_record(path, REPAIR, "lease file")
    if current is not None:
        expires, holder = current.get("expires"), current.get("holder")
        epoch, home = current.get("epoch", 0), current.get("home")
        numbers = isinstance(expires, (int, float)) and isinstance(epoch, int)
        texts = all(isinstance(text, (str, type(None))) for text in (holder, home))
        if not numbers or not texts:
            raise Unreadable(path, "a JSON object, not a lease", REPAIR, "lease file")
    return current


def repair():
    """Move every unreadable lease file aside (this home's, and this machine's local fleets'),
    each under its lease's lock; what went where."""
    folders = [LEASES] + ([machine_leases()] if os.path.isdir(_machine_folder()) else [])
    return [moved for folder in folders for moved in repair_records(folder, _read, "lease")]
