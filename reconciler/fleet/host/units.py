"""Units: processes the agent starts detached, supervises, stops and keeps records of.

A unit launched with `restart` (a router: the endpoint clients connect to) is started again
by its supervisor as soon as it exits, without waiting for the reconciler's next pass; while
it keeps exiting within STABLE_S of its start, after RESTART_BASE_S, doubling up to
RESTART_MAX_S. `stop` ends that (a marker file first, then the signal).
Other units are restarted by the reconciler, which also backs off (reconcile/steps/start.py).

A unit record that is there and cannot be read (truncated, garbled) is never taken for no
unit: `units` lists its path apart, every verb that needs the whole picture (probe, runtimes,
prune) refuses with it, and so do `launch`, `stop` and `logs` of that unit. Every unit's
processes carry DENV_UNIT=<id> in their environment, so `repair` finds them without the
record (recovery.py).
"""

import contextlib
import os
import shutil
import signal
import subprocess
import time

import claims
import runtimes
import supervisors
import users
from common import (
    HOME,
    LOG_CAP,
    LOGS,
    UNITS,
    AgentError,
    Unreadable,
    alive,
    child_environment,
    file_lock,
    read_json,
    read_record,
    record_path,
    running,
    start_time,
    supervising,
    write_atomic,
)

STABLE_S = 60.0  # a run this long ends a crash loop: the next exit restarts it at once
RESTART_BASE_S = 1.0  # the second exit in a row after short runs waits 1 s, then 2, 4 …
RESTART_MAX_S = 60.0


REPAIR = "`denv fleet repair FLEET` stops the unit's processes and moves the record aside"
MARKER = "DENV_UNIT"  # in every unit's environment: its id


def read_unit(path):
    """A unit record: present, None (absent), or Unreadable raised."""
    return read_record(path, REPAIR, "unit record")


def scan(folder=UNITS):
    """(every readable record, `alive` checked; every unreadable one as {"id", "path", "why"});
    `folder`: another agent home's units, on this machine."""
    records, unreadable = [], []
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            if name.endswith(".json") and not name.startswith("."):
                path = os.path.join(folder, name)
                try:
                    record = read_unit(path)
                except Unreadable as exc:
                    unit_id = name[: -len(".json")]
                    unreadable.append({"id": unit_id, "path": path, "why": exc.why})
                    continue
                if record is not None:  # else removed since listed
                    records.append(_observed(record))
    return records, unreadable


def _observed(record):
    record["alive"] = running(record)
    # exited, and its supervisor, still running, has not written the exit code yet: ask
    # again rather than report an exit without its code
    record["exiting"] = bool(
        not record["alive"]
        and record.get("pid")
        and record.get("exit_code") is None
        and supervising(record)
    )
    return record


def list_units():
    """Every unit record; Unreadable when one cannot be read: what runs here is not known."""
    records, unreadable = scan()
    if unreadable:
        first = unreadable[0]
        more = f" (and {len(unreadable) - 1} more unit record(s))" if len(unreadable) > 1 else ""
        raise Unreadable(first["path"], first["why"] + more, REPAIR, "unit record")
    return records


def launch(unit):
    """Start a unit unless it already runs with the same digest (then do nothing). One
    launch or stop of a unit at a time, across agents: a launch that a lost channel cut off
    goes on in its agent, and the bot's retry, in a new agent, waits for it and finds it."""
    with file_lock(UNITS, unit["id"]):
        return _launch(unit)


def _launch(unit):
    path = record_path(unit["id"])
    previous = read_unit(path)
    if previous is not None and running(previous):
        if previous.get("digest") == unit["digest"]:
            previous["alive"] = True
            previous["changed"] = False
            return previous
        raise AgentError(
            "unit {} runs another spec ({}); stop it first".format(
                unit["id"], previous.get("digest")
            )
        )
    cpus = unit.get("cpus") or []
    allowed = os.sched_getaffinity(0)
    if not set(cpus) <= allowed:
        raise AgentError(
            "unit {} is given cores {} that this host does not let its processes run on "
            "(its cores: {})".format(unit["id"], sorted(set(cpus) - allowed), sorted(allowed))
        )
    switch, cwd, own = None, unit.get("cwd") or HOME, {}
    if unit.get("user"):  # a trial's unit: as its unprivileged user, never as ours
        switch, cwd, own = users.prepare(unit["id"], unit["user"])
    if previous is not None:  # e.g. a container the killed client left behind
        run_cleanup(previous)
    for stale in (path + ".stop", path + ".refused"):
        if os.path.exists(stale):
            os.unlink(stale)
    os.makedirs(LOGS, exist_ok=True)
    log = os.path.join(LOGS, unit["id"] + ".log")
    if previous is None:  # a new unit starts a new log; a restart appends to its last one
        for stale in (log, log + ".1"):
            if os.path.exists(stale):
                os.unlink(stale)
    record = {
        "id": unit["id"],
        "digest": unit["digest"],
        "argv": pinned(unit),
        "port": unit.get("port"),
        "metrics": unit.get("metrics"),  # how to ask it for requests in flight (a drain)
        "gpus": unit.get("gpus", []),
        "gpu_scope": unit.get("gpu_scope"),  # a simulated fleet's GPUs (claims.py)
        "cpus": cpus,
        "labels": unit.get("labels", {}),
        "env": unit.get("env", {}),  # the unit's own env: what a rollback relaunches with
        "user": unit.get("user"),
        "cleanup": unit.get("cleanup"),
        "log": log,
        "restart": bool(unit.get("restart")),
        "restarts": (previous.get("restarts", 0) + 1) if previous else 0,
        "started_at": time.time(),
        "pid": None,
        "start_time": None,
        "exit_code": None,
    }
    env = child_environment("engine", dict(unit.get("env", {}), **own, **{MARKER: unit["id"]}))
    spec_file = path + ".launch"
    write_atomic(spec_file, {"record": record, "env": env, "cwd": cwd, "switch": switch})
    # The supervisor runs in its own session, so the unit outlives this SSH session.
    exited = supervisors.start(unit["id"])
    deadline = time.time() + 10
    while time.time() < deadline:  # the record is written before we answer
        current = read_json(path)
        if (
            current is not None
            and current.get("pid")
            and current.get("started_at") == record["started_at"]
        ):
            current["alive"] = running(current)
            current["changed"] = True
            return current
        refused = read_json(path + ".refused")
        if refused is not None:  # its GPUs are another engine's (claims.py)
            os.unlink(path + ".refused")
            raise AgentError(str(refused.get("error")))
        if exited() is not None:
            break
        time.sleep(0.01)
    raise AgentError("unit {} did not start (supervisor exit {})".format(unit["id"], exited()))


def pinned(unit):
    """A container unit runs the digest its image resolved to here, not a moving tag."""
    image = unit.get("image")
    argv = [runtimes.pinned_image(part) if part == image else part for part in unit["argv"]]
    runtimes.note_use(argv)
    return argv


def supervise(unit_id):
    """Run one unit: its output into a size-capped log, its exit code into its record; a
    `restart` unit again each time it exits, until it is stopped or launched anew."""
    path = record_path(unit_id)
    launch_spec = read_json(path + ".launch")
    os.unlink(path + ".launch")
    record = launch_spec["record"]
    try:  # held by this process and its engine, let go by the kernel when both are gone
        claimed = claims.claim(unit_id, record.get("gpus", []), record.get("gpu_scope"))
    except (AgentError, OSError) as exc:
        write_atomic(path + ".refused", {"error": f"unit {unit_id} not started: {exc}"})
        return
    children, stopping = [], []

    def on_term(*_):
        stopping.append(True)
        for child in children:
            if child.poll() is None:
                child.terminate()

    signal.signal(signal.SIGTERM, on_term)
    if record.get("cpus"):
        # Inherited by everything the unit starts: vLLM's frontend processes as well as its
        # worker, and the math library that, while torch loads, visits each core it may use.
        os.sched_setaffinity(0, record["cpus"])
    quick = 0  # exits in a row after short runs
    while True:
        child = subprocess.Popen(
            record["argv"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=launch_spec["env"],
            cwd=launch_spec["cwd"],
            preexec_fn=users.switcher(launch_spec.get("switch")),
            pass_fds=claimed,
        )
        children[:] = [child]
        began = time.time()
        record["pid"] = child.pid
        record["pgid"] = os.getpgid(0)
        record["supervisor_pid"] = os.getpid()
        record["supervisor_start"] = start_time(os.getpid())
        record["start_time"] = start_time(child.pid)
        try:
            write_atomic(path, record)
        except OSError:  # a disk full now: no record would say this process runs, so it ends
            child.kill()
            child.wait()
            raise
        if stopping:
            child.terminate()
        log_error = copy_capped(
            child.stdout, record["log"], lambda error, r=record: note(path, r, error)
        )
        code = child.wait()
        final = read_json(path)
        if final is None or final.get("started_at") != record["started_at"]:
            return  # stopped and removed, or launched anew
        final["exit_code"] = code
        final["exited_at"] = time.time()
        if log_error:
            final["log_error"] = log_error
        write_atomic(path, final)
        quick = 0 if final["exited_at"] - began >= STABLE_S else quick + 1
        delay = 0.0 if quick <= 1 else min(RESTART_BASE_S * 2 ** (quick - 2), RESTART_MAX_S)
        if not record.get("restart") or not _wait_to_restart(path, delay, stopping):
            return
        record = dict(final, restarts=final.get("restarts", 0) + 1, pid=None, start_time=None)
        record["exit_code"] = None


def _wait_to_restart(path, delay, stopping):
    """Wait `delay` seconds; False as soon as the unit is being stopped."""
    deadline = time.time() + delay
    while True:
        if stopping or os.path.exists(path + ".stop"):
            return False
        if time.time() >= deadline:
            return True
        time.sleep(min(0.1, max(deadline - time.time(), 0.0)))


def note(path, record, error):
    """Put a log error into the record at once, so `units` shows it while the unit runs."""
    current = read_json(path)
    if current is not None and current.get("started_at") == record["started_at"]:
        current["log_error"] = error
        write_atomic(path, current)


def copy_capped(stream, log_path, on_error):
    """Copy output to the log, rotating once to .1 past LOG_CAP; on a write error (disk full)
    keep draining so the unit never blocks on its output, and report the error."""
    error = None
    log = open(log_path, "ab")  # noqa: SIM115 - reopened on rotation
    written = log.tell()
    for chunk in iter(lambda: stream.read1(65536), b""):
        if error is not None:
            continue
        try:
            while chunk:
                if written >= LOG_CAP:
                    log.close()
                    os.replace(log_path, log_path + ".1")
                    log, written = open(log_path, "ab"), 0  # noqa: SIM115
                part, chunk = chunk[: LOG_CAP - written], chunk[LOG_CAP - written :]
                log.write(part)
                written += len(part)
            log.flush()
        except OSError as exc:
            error = f"log write failed: {exc.strerror}"
            on_error(error)
    try:
        log.close()
    except OSError as exc:
        error = error or f"log write failed: {exc.strerror}"
    return error


def stop(unit_id, grace):
    with file_lock(UNITS, unit_id):
        return _stop(unit_id, grace)


def _stop(unit_id, grace):
    path = record_path(unit_id)
    record = read_unit(path)
    if record is None:
        return {"id": unit_id, "stopped": False, "reason": "no such unit"}
    was_alive = running(record)

    def still():  # the newest record: a supervisor may have started the unit again
        latest = read_json(path) or record
        return alive(latest) or supervising(latest)

    if was_alive:  # never signal a group whose leader may be a reused pid
        with open(path + ".stop", "w"):
            pass  # a supervisor does not start it again
        group = record.get("pgid")
        with contextlib.suppress(OSError, TypeError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.time() + grace
        while time.time() < deadline and still():
            time.sleep(0.05)
        if still():
            with contextlib.suppress(OSError, TypeError):
                os.killpg(group, signal.SIGKILL)
            while alive(read_json(path) or record):
                time.sleep(0.01)
    supervisor = record.get("supervisor_pid")
    deadline = time.time() + 5
    while supervisor and time.time() < deadline and start_time(supervisor) is not None:
        time.sleep(0.01)  # it writes the exit code last; let it finish before the record goes
    run_cleanup(record)
    if record.get("user"):  # a trial's own folder goes with it
        shutil.rmtree(os.path.join(users.TRIALS, unit_id), ignore_errors=True)
    for done in (path, path + ".stop"):
        if os.path.exists(done):
            os.unlink(done)
    return {"id": unit_id, "stopped": was_alive, "exit_code": record.get("exit_code")}


def run_cleanup(record):
    """The unit's own cleanup command (a container runtime removes the container), best effort:
    a container that is already gone is what we want."""
    argv = record.get("cleanup")
    if argv:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, capture_output=True, timeout=60)


def tail_lines(path, tail):
    """The last `tail` lines of a log (read from its last 256 KiB), and why not when it cannot
    be read."""
    try:
        with open(path, "rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - 256 * 1024))
            return stream.read().decode("utf-8", "replace").splitlines()[-tail:], None
    except OSError as exc:
        return [], f"cannot read log: {exc.strerror}"


def logs(unit_id, tail):
    record = read_unit(record_path(unit_id))
    if record is None:
        raise AgentError(f"no unit {unit_id} on this host")
    lines, error = tail_lines(record["log"], tail)
    if error:
        record["log_error"] = record.get("log_error") or error
    return {
        "id": unit_id,
        "lines": lines,
        "log": record["log"],
        "log_error": record.get("log_error"),
    }
