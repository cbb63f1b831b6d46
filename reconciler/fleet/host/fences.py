"""Fences: the newest lease epoch (leases.py) that each fleet's bot has shown this host. The
bot that holds a fleet's lease sends `--fence FLEET:EPOCH` with every call that observes or
acts; a call whose epoch is older than one seen here comes from a bot that lost the lease
since (stalled past its expiry while another took it) and is refused, whatever it asks, so
that it stops at its next call, not at the end of its pass.

A fence record that cannot be read refuses every fenced call for its fleet (an older epoch
is never taken for the newest); `repair` moves it aside."""

import fcntl
import os

from common import HOME, AgentError, Unreadable, read_record, repair_records, write_atomic

FENCES = os.path.join(HOME, "fences")
REPAIR = "`denv fleet repair FLEET` moves it aside (the next epoch shown is the newest)"


def check(token):
    """Refuse `token` ("fleet:epoch") when this host has seen a newer epoch of that fleet;
    keep it when it is the newest."""
    fleet, _, number = token.rpartition(":")
    if not fleet or "/" in fleet or fleet.startswith(".") or not number.isdigit():
        raise AgentError(f"bad fence: {token!r}")
    epoch = int(number)
    path = os.path.join(FENCES, fleet + ".json")
    os.makedirs(FENCES, exist_ok=True)
    with open(path + ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        seen = _read(path)
        if epoch < seen:
            raise AgentError(
                f"fenced: fleet {fleet}'s lease epoch {epoch} is older than {seen}, which "
                "the bot that took the lease since has shown this host: this bot lost the "
                "lease and acts here no more"
            )
        if epoch > seen:
            write_atomic(path, {"epoch": epoch})


def _read(path):
    """The newest epoch seen (0: none); Unreadable when the record is there and is not one."""
    current = read_record(path, REPAIR, "fence record")
    if current is None:
        return 0
    epoch = current.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise Unreadable(path, "a JSON object, not a fence", REPAIR, "fence record")
    return epoch


def repair():
    """Move every unreadable fence record aside, under its lock; what went where."""
    return repair_records(FENCES, _read, "fence")
