"""What every verb of the host agent shares: where state lives, JSON files written atomically,
and whether a recorded process still runs. Stdlib only, Python 3.8+."""

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

HOME = os.environ.get("DENV_HOME") or os.path.join(os.path.expanduser("~"), ".denv")
UNITS = os.path.join(HOME, "units")
LOGS = os.path.join(HOME, "logs")
JOBS = os.path.join(HOME, "jobs")
ENGINES = os.path.join(HOME, "engines")
WEIGHTS = os.path.join(HOME, "weights")
LOG_CAP = int(os.environ.get("DENV_LOG_CAP", str(64 * 1024 * 1024)))  # bytes, then rotate once


# What every child of the agent takes from the agent's own environment: where things are and
# how to reach the network, never the bot's credentials (a local fleet's agent runs in the
# bot's environment). Each kind of child adds its own prefixes (CHILD_PREFIXES) and what its
# caller passes as `extra`; nothing else reaches it. The one secret the agent ever holds, the
# weights token, is passed as `extra` to the weights fetch only (and to the prepare job that
# runs it, which hands it to no other child).
PASSED_NAMES = frozenset(
    (
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
        "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CUDA_HOME", "ROCM_PATH",
        "DENV_HOME", "DENV_LOG_CAP", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    )
)  # fmt: skip
# PIP_* (an index URL with a password in it, a client certificate) is pip's: it reaches the
# prepare job and its venv builds, never an engine, a weights fetch or an s3 command.
CHILD_PREFIXES = {
    "engine": ("LC_", "NCCL_"),  # a unit: an engine, a router, a simulator
    # the prepare job (builds venvs, pulls images, fetches weights): what its children take
    "job": ("LC_", "PIP_", "HF_ENDPOINT"),
    "venv": ("LC_", "PIP_"),  # python -m venv, pip install
    "image": ("LC_",),  # docker or podman pull and inspect, as a container unit's `run`
    "weights": ("LC_", "HF_ENDPOINT"),  # the hf-fetch child: the token comes as `extra`
    "s3": ("LC_",),  # the fleet's s3_command
    # sbatch, squeue, scancel, sinfo; a submitted job starts from this and its units from it
    "scheduler": ("LC_", "NCCL_", "SLURM_CONF"),
}


def child_environment(kind, extra=None):
    """The environment a child of `kind` starts with: the passed names and its kind's
    prefixes from ours, then `extra`."""
    prefixes = CHILD_PREFIXES[kind]
    env = {
        name: value
        for name, value in os.environ.items()
        if name in PASSED_NAMES or name.startswith(prefixes)
    }
    env.update(extra or {})
    return env


def agent_path():
    """This agent's own file (the .pyz on the host), for the processes it starts of itself."""
    return os.path.abspath(sys.argv[0])


class AgentError(Exception):
    pass


def emit(value):
    sys.stdout.write(json.dumps(value, sort_keys=True) + "\n")
    sys.stdout.flush()


def write_atomic(path, value):
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(value, stream, sort_keys=True)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
        _sync_folder(folder)
    except BaseException as exc:
        if os.path.exists(temporary):
            os.unlink(temporary)
        if isinstance(exc, OSError) and exc.filename is None:  # a write's: name the file
            raise OSError(exc.errno, exc.strerror, path) from exc
        raise


class Unreadable(AgentError):
    """A record that is there but cannot be read (garbled, truncated, NUL bytes, no
    permission): never taken for absent. `path` names it; `repair` says how to mend it."""

    def __init__(self, path, why, repair, what="record"):
        super().__init__(f"{what} {path} is unreadable ({why}); left as it is; repair: {repair}")
        self.path = path
        self.why = why


def read_record(path, repair="`denv fleet repair FLEET`", what="record"):
    """A record's three states, for every verb that acts on it: its value (present), None
    (absent: no such file), or Unreadable raised (anything else; the file is left as it is).
    A record is a JSON object."""
    try:
        with open(path, "rb") as stream:
            raw = stream.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise Unreadable(path, exc.strerror or str(exc), repair, what) from None
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError too
        raise Unreadable(path, _why(raw, exc), repair, what) from None
    if not isinstance(value, dict):
        raise Unreadable(path, f"a JSON {type(value).__name__}, not an object", repair, what)
    return value


def _why(raw, error):
    if not raw:
        return "empty"
    if b"\0" in raw:
        return f"{len(raw)} bytes with NUL bytes"
    return f"{len(raw)} bytes, not JSON: {str(error)[:80]}"


def read_json(path):
    """For files whose loss costs a rebuild only (caches, markers, a job's progress): absent
    and unreadable both read as None. A record the agent acts on is read with read_record."""
    try:
        return read_record(path)
    except Unreadable:
        return None


def aside(path, now=None):
    """Move an unreadable record out of the way, kept for a post-mortem, as
    `<path>.unreadable-<UTC time>`; the new path. fsynced, as a write."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    moved = f"{path}.unreadable-{stamp}"
    os.replace(path, moved)
    _sync_folder(os.path.dirname(path))
    return moved


def repair_records(folder, read, record):
    """Move every unreadable `*.json` record of `folder` aside, each under its `.lock` (`read`
    raises Unreadable for one that cannot be read); what went where."""
    moved = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(folder, name)
        with open(path + ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                read(path)  # readable, mended meanwhile, or gone: nothing to do
            except Unreadable:
                moved.append({"record": record, "path": path, "moved_to": aside(path)})
    return moved


def _sync_folder(folder):
    """A rename is durable once its folder is synced."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def record_path(unit_id):
    if not unit_id or "/" in unit_id or unit_id.startswith("."):
        raise AgentError(f"bad unit id: {unit_id!r}")
    return os.path.join(UNITS, unit_id + ".json")


# --- processes -------------------------------------------------------------------------------


def start_time(pid):
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or
    None when there is no such process: with the pid it names one process, whatever reuse."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            stat = stream.read()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19]) if fields[0] != "Z" else None  # a zombie has exited


def alive(record):
    pid, started = record.get("pid"), record.get("start_time")
    return bool(pid) and started is not None and start_time(pid) == started


def supervising(record):
    """Whether the unit's supervisor still runs (it starts a `restart` unit again)."""
    pid, started = record.get("supervisor_pid"), record.get("supervisor_start")
    return bool(pid) and started is not None and start_time(pid) == started


def running(record):
    """The unit runs, or its supervisor is about to start it again (a `restart` unit that
    exited): nobody else should start it."""
    return alive(record) or (bool(record.get("restart")) and supervising(record))


def option(args, name, default):
    if name in args:
        index = args.index(name)
        if index + 1 >= len(args):
            raise AgentError(f"{name} needs a value")
        return args[index + 1]
    return default


@contextlib.contextmanager
def file_lock(folder, name, wait=True):
    """Hold the lock `folder/.lock-<name>`; with wait=False, yield False when another holds it."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, ".lock-" + name), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def detach(verb, argument, env=None):
    """Start this agent's `verb argument` in its own session: it outlives the SSH call."""
    return subprocess.Popen(
        [sys.executable, agent_path(), verb, argument],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env=env,
    )
