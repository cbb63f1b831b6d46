"""GPU claims: one engine per GPU on this machine, whatever the agent's home or user.

A unit's supervisor holds an exclusive `flock` on one file per GPU it is given, in a folder
every user of the machine shares (sticky, like /tmp), and hands the descriptors to its engine:
the kernel keeps the claim while either process lives and lets it go when both are gone, so
a killed bot, agent or supervisor never leaves a stale claim, and a second home or another
user's bot cannot start a second engine on that GPU. The claim file names its holder (user,
home, unit) for the refusal; what it says was written by another user: bounded and shown,
never acted on. Slurm's jobs are not claimed here: the scheduler owns those GPUs."""

import contextlib
import errno
import fcntl
import json
import os
import pwd
import re
import stat
import time

from common import HOME, AgentError

SHARED = "/var/tmp/denv-gpus"  # where claims are kept; $DENV_GPU_CLAIMS moves them
SCOPE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$")
HOLDER_BYTES = 4096  # what is read of a claim file's holder
WAIT_S = 1.0  # a unit of this home stopped a moment ago may still be letting its GPUs go


def folder():
    """The machine's claims folder, made sticky and writable by every user when created."""
    path = os.environ.get("DENV_GPU_CLAIMS") or SHARED
    try:
        with contextlib.suppress(FileExistsError):
            os.makedirs(path, mode=0o700)
            os.chmod(path, 0o1777)
        found = os.lstat(path)
    except OSError as exc:
        raise AgentError(f"cannot keep GPU claims in {path}: {exc.strerror}") from None
    if not stat.S_ISDIR(found.st_mode):
        raise AgentError(f"{path} is not a folder: no GPU can be claimed there")
    return path


def claim(unit_id, gpus, scope=None, wait=WAIT_S):
    """Claim every GPU of `gpus` (indices) for `unit_id`: the open descriptors, which the
    caller keeps open (and passes to its engine) for as long as the unit runs. Raises
    AgentError naming the holder of a GPU another process holds; nothing stays claimed then.
    `scope`: a simulated fleet's "FLEET.HOST", whose GPUs are its own (two simulated fleets on
    one machine share none); None: this machine's GPUs."""
    if not gpus:
        return []
    if scope is not None and not SCOPE.match(scope):
        raise AgentError(f"bad GPU scope: {scope[:80]!r}")
    where = folder()
    taken = []
    try:
        for index in sorted(set(gpus)):
            name = f"gpu-{int(index)}" if scope is None else f"sim-{scope}-{int(index)}"
            what = f"GPU {int(index)} of " + (f"{scope} (simulated)" if scope else "this machine")
            taken.append(_claim_one(where, name, what, unit_id, time.monotonic() + wait))
    except BaseException:
        for descriptor in taken:
            os.close(descriptor)
        raise
    return taken


def _claim_one(where, name, what, unit_id, deadline):
    path = os.path.join(where, name + ".lock")
    descriptor = _open(path)
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            said = _said(descriptor)
            # only a unit of this home, stopped a moment ago, is waited for: another home's
            # or user's is refused at once (within any call timeout the bot gives a launch)
            if said.get("home") != HOME or time.monotonic() >= deadline:
                os.close(descriptor)
                raise AgentError(
                    f"{what} runs another engine ({_holder(said)}): one controller per GPU"
                ) from None
            time.sleep(0.05)
    mine = {"user": _user(os.getuid()), "home": HOME, "unit": unit_id, "pid": os.getpid()}
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, json.dumps(mine).encode(), 0)
    return descriptor


def _open(path):
    """The claim file, made by whoever came first and writable by every user. Opened without
    O_CREAT first: in a sticky folder, the kernel refuses O_CREAT on another user's file."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            pass
        try:
            descriptor = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
            os.fchmod(descriptor, 0o666)  # whatever the umask
            return descriptor
        except FileExistsError:
            continue  # made by another claim meanwhile: open it
        except OSError as exc:
            raise AgentError(f"cannot claim {path}: {exc.strerror}") from None
    raise AgentError(f"cannot claim {path}: {os.strerror(errno.EEXIST)}")


def _said(descriptor):
    """What a claim's file says of its holder (another user may have written it): a dict."""
    try:
        said = json.loads(os.pread(descriptor, HOLDER_BYTES, 0).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return {}
    return said if isinstance(said, dict) else {}


def _holder(said):
    """Who holds a claim, as its file says: 'user alice, home /home/alice/.denv, unit X'."""
    words = [
        f"{name} {_printable(said[name])}"
        for name in ("user", "home", "unit")
        if isinstance(said.get(name), str)
    ]
    return ", ".join(words) or "its holder does not say who it is"


def _printable(text):
    kept = "".join(c if c.isprintable() else "?" for c in text[:200])
    return kept + ("…" if len(text) > 200 else "")


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
