"""Starting a unit's supervisor. A one-shot agent starts it as a Python of its own
(`agent supervise UNIT`, about 0.1 s of a core with its imports). The resident agent forks it
instead, from a spawner process it forks before its first thread (a fork from a threaded
process may inherit a lock another thread held): on a host starting many engines at once, a
Python start per unit competes with the engines for the cores, and delays each launch's
answer by as much.

A forked supervisor is the same code in a new session with nothing inherited open but what
it opens itself: the SSH channel closes when the agent ends, whatever units still run. In
`ps` it shows the agent's `serve` command line.
"""

import contextlib
import os
import threading

from common import detach

_spawner = None  # (pid, pipe to it, lock) in a resident agent; None: supervisors are started


def start_spawner(supervise):
    """Fork the process that forks each unit's supervisor (`supervise(unit_id)` in it); call
    before any thread starts. It ends when the agent does (its pipe closes)."""
    global _spawner
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write)
        _serve(read, supervise)
    os.close(read)
    _spawner = (pid, write, threading.Lock())


def start(unit_id):
    """Have `unit_id`'s supervisor started; a function that tells its exit code once a started
    one ended early (None while it may still run, and always for a forked one, which the
    launch's wait for the unit's record covers)."""
    if _spawner is not None:
        _, write, lock = _spawner
        try:
            with lock:
                os.write(write, (unit_id + "\n").encode())
            return lambda: None
        except OSError:  # the spawner is gone (killed): start one the one-shot way
            pass
    supervisor = detach("supervise", unit_id)
    return supervisor.poll


def _serve(read, supervise):
    """The spawner: for each unit id read, a supervisor in a session of its own, reparented
    (a double fork, so that the spawner never waits on it)."""
    try:
        _only_open(read)
        with os.fdopen(read, "rb", buffering=0) as requests:
            for line in iter(requests.readline, b""):
                unit_id = line.decode("utf-8", "replace").strip()
                if unit_id:
                    _fork_supervisor(unit_id, read, supervise)
    finally:
        os._exit(0)


def _fork_supervisor(unit_id, read, supervise):
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.close(read)
                supervise(unit_id)
        except BaseException:  # nothing to report to; the launch times out
            pass
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def _only_open(keep):
    """Standard streams on /dev/null and every other descriptor closed but `keep`: the
    agent's SSH channel is not the spawner's, nor its units'. (Nothing buffered is flushed
    here: what the agent had not written yet is the agent's to write.)"""
    null = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(null, stream)
    try:
        found = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        found = range(3, max(os.sysconf("SC_OPEN_MAX"), 256))
    for descriptor in found:
        if descriptor > 2 and descriptor != keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, gone with it
                os.close(descriptor)
