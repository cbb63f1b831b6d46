"""Repairing the records the agent cannot read (`repair`): a lease file is moved aside (the
lease is free again), a fence record too (the next epoch shown is the newest), and a unit
record, once the unit's processes, found by the DENV_UNIT marker every unit starts with
(/proc/PID/environ), are stopped. The bot starts the unit again from git at its next pass, as
it would a unit that exited. Each file is kept as `<file>.unreadable-<UTC time>` for a
post-mortem; nothing readable is touched."""

import contextlib
import os
import signal
import time

import fences
import leases
import units
from common import HOME, UNITS, Unreadable, aside, file_lock, record_path, start_time


def repair(grace):
    """Every unreadable lease and unit record of this host, mended; what was done."""
    repaired = leases.repair() + fences.repair()
    _, unreadable = units.scan()
    for found in unreadable:
        with file_lock(UNITS, found["id"]):
            path = record_path(found["id"])
            try:
                units.read_unit(path)
                continue  # mended meanwhile (a supervisor wrote it), or gone
            except Unreadable:
                pass
            stopped = stop_marked(found["id"], grace)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path + ".stop")
            moved = aside(path)
            repaired.append(
                {"record": "unit", "id": found["id"], "path": path, "moved_to": moved,
                 "stopped": stopped}
            )  # fmt: skip
    return {"host": os.uname()[1], "repaired": repaired}


def marked(unit_id):
    """This home's processes of the unit, as (pid, start time): those whose environment says
    DENV_UNIT=<unit_id>, and a supervisor started as `agent supervise <unit_id>` (a unit an
    agent before the marker started: its supervisor leads the unit's process group). Another
    home's units on the same machine are not this one's; other users' processes cannot be
    read unless the agent runs as root."""
    wanted = (units.MARKER + "=" + unit_id).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as stream:
                environ = stream.read().split(b"\0")
            with open(f"/proc/{name}/cmdline", "rb") as stream:
                argv = stream.read().split(b"\0")[:-1]
        except OSError:
            continue
        ours = wanted in environ or argv[-2:] == [b"supervise", unit_id.encode()]
        started = start_time(int(name))
        if ours and started is not None and _home_of(environ) == HOME:
            found.append((int(name), started))
    return found


def _home_of(environ):
    """The agent home a process belongs to, from its environment (as common.HOME is found)."""
    values = dict(item.split(b"=", 1) for item in environ if b"=" in item)
    home = values.get(b"DENV_HOME") or os.path.join(values.get(b"HOME", b"~"), b".denv")
    return os.fsdecode(home)


def stop_marked(unit_id, grace):
    """SIGTERM to the process groups of the unit's processes (its supervisor's too), SIGKILL
    after `grace` seconds; the pids stopped."""
    found = marked(unit_id)
    ours = os.getpgid(0)
    groups = set()
    for pid, _ in found:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(pid))
    groups -= {ours, 0, 1}

    def left():
        return [pid for pid, started in found if start_time(pid) == started]

    for sent in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, sent)
        for pid in left():  # one in no group of its own (ours)
            with contextlib.suppress(OSError):
                os.kill(pid, sent)
        deadline = time.time() + (grace if sent == signal.SIGTERM else 5)
        while left() and time.time() < deadline:
            time.sleep(0.05)
        if not left():
            break
    return sorted(pid for pid, _ in found)
