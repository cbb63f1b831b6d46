"""The trial user: a unit launched with `user` (a trial's engine, code a pull request may have
chosen) runs as that unprivileged user, never as the agent's. Stdlib only, Python 3.8+.

Before such a unit starts, the agent refuses when the user could change anything the agent
keeps: the agent's file and folders, unit records and logs, prepare jobs, engines' environments,
the weights cache (every file), the agent user's ~/.ssh, or a folder above them (it could move
them aside). The unit runs in its own folder, `trials/<unit id>/`, owned by the user, which is
also its HOME. Switching users needs the agent to run as root (docs/hosts.md).
"""

import os
import pwd
import shutil
import stat

from common import ENGINES, HOME, JOBS, LOGS, UNITS, WEIGHTS, AgentError, agent_path

TRIALS = os.path.join(HOME, "trials")


def account(name):
    """(uid, gid, groups) of the trial user `name`, or an AgentError saying what to do."""
    host = os.uname()[1]
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise AgentError(
            f"{host}: the trial user {name} does not exist: create it "
            f"(useradd --system --user-group --no-create-home --shell /usr/sbin/nologin {name}; "
            "docs/hosts.md)"
        ) from None
    if entry.pw_uid in (0, os.geteuid()):
        raise AgentError(f"{host}: the trial user {name} is root or the agent's own user")
    if os.geteuid() != 0:
        raise AgentError(
            f"{host}: the agent runs as {pwd.getpwuid(os.geteuid()).pw_name}, not root: it "
            f"cannot start a trial's units as {name} (docs/hosts.md)"
        )
    return entry.pw_uid, entry.pw_gid, sorted(set(os.getgrouplist(name, entry.pw_gid)))


def writable_by(path, uid, gids):
    """Whether `uid` (with `gids`) may change `path`: its owner, or its group or others may
    write it (ACLs are not read: keep them off the agent's folders)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if st.st_uid == uid:
        return True
    if st.st_mode & stat.S_IWGRP and st.st_gid in gids:
        return True
    return bool(st.st_mode & stat.S_IWOTH)


def above(path, uid, gids):
    """A folder above `path` from which `uid` could move it aside (a sticky folder, like
    /tmp, lets nobody move another's entry), or None."""
    folder = os.path.dirname(path)
    while True:
        try:
            st = os.stat(folder)
        except OSError:
            return None
        sticky = st.st_mode & stat.S_ISVTX and st.st_uid != uid
        if writable_by(folder, uid, gids) and not sticky:
            return folder
        if folder == os.path.dirname(folder):
            return None
        folder = os.path.dirname(folder)


def protected():
    """Everything a trial must not change: the agent's own files, and every cached file."""
    agent = os.path.realpath(agent_path())
    paths = [agent, os.path.dirname(agent), HOME, UNITS, LOGS, JOBS, ENGINES, WEIGHTS]
    paths += [os.path.join(os.path.expanduser("~"), ".ssh"), TRIALS]
    if os.path.isdir(ENGINES):
        paths += [os.path.join(ENGINES, name) for name in os.listdir(ENGINES)]
    for root, dirs, files in os.walk(WEIGHTS):
        paths += [os.path.join(root, name) for name in dirs + files]
    return paths


def check(name, uid, gids):
    """Refuse to start anything as `uid` while it could change what the agent keeps."""
    for path in protected():
        if writable_by(path, uid, gids):
            raise AgentError(
                f"{os.uname()[1]}: the trial user {name} can write {path}: refusing to start "
                "a trial (docs/hosts.md)"
            )
    for path in (HOME, os.path.realpath(agent_path())):
        folder = above(path, uid, gids)
        if folder is not None:
            raise AgentError(
                f"{os.uname()[1]}: the trial user {name} can write {folder}, above {path}: "
                "refusing to start a trial (docs/hosts.md)"
            )


def prepare(unit_id, name):
    """Check, then make the unit's own folder: (settings the supervisor switches with, the
    unit's cwd, its environment's HOME, USER and LOGNAME)."""
    uid, gid, groups = account(name)
    check(name, uid, groups)
    os.makedirs(TRIALS, exist_ok=True)
    os.chmod(TRIALS, 0o711)  # the user may enter its own folder, not list the others
    folder = os.path.join(TRIALS, unit_id)
    shutil.rmtree(folder, ignore_errors=True)  # a new launch starts clean
    os.mkdir(folder, 0o700)
    os.chown(folder, uid, gid)
    switch = {"user": name, "uid": uid, "gid": gid, "groups": groups}
    return switch, folder, {"HOME": folder, "USER": name, "LOGNAME": name}


def switcher(switch):
    """What the supervisor runs in the child before the unit's program: drop to the user."""
    if not switch:
        return None

    def drop():
        os.setgroups(switch["groups"])
        os.setgid(switch["gid"])
        os.setuid(switch["uid"])

    return drop
