"""Engine runtimes on this host: per-version Python environments and container images.

An environment is built in `engines/.build-<name>-<pid>` and renamed to `engines/<name>` only
once pip has finished and the completion marker is written, under a lock per name: a build
that was killed leaves only a `.build-` folder, which is never used and is removed by the
next build. Images are pulled once and pinned to the digest the pull resolved.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import time

from common import ENGINES, AgentError, child_environment, file_lock, read_json, write_atomic

MARKER = ".denv-complete"  # written last, inside the build folder, before the rename
USED = ".denv-used"  # created when a unit first runs from the environment
IMAGES = os.path.join(ENGINES, "images.json")


def locked(name, wait=True):
    """The lock of one runtime name; with wait=False, it yields False when a build holds it."""
    return file_lock(ENGINES, name, wait)


def run_step(argv, what, kind, timeout=3600):
    """Run one build step in the environment its kind of child gets (never the token)."""
    done = subprocess.run(argv, capture_output=True, timeout=timeout, env=child_environment(kind))
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[-800:]
        raise AgentError(f"{what} failed (exit {done.returncode}): {tail}")
    return done.stdout.decode("utf-8", "replace")


def ensure_venv(need, report, pause_point):
    """The environment `need` names, built when missing; its marker's contents."""
    name = need["name"]
    final = os.path.join(ENGINES, name)
    marker = os.path.join(final, MARKER)
    ready = read_json(marker)
    if ready is not None:
        return ready
    with locked(name):
        ready = read_json(marker)
        if ready is not None:  # another job built it while we waited
            return ready
        for entry in os.listdir(ENGINES):  # we hold the lock: every build of this name is dead
            if entry.startswith(".build-" + name + "-"):
                shutil.rmtree(os.path.join(ENGINES, entry), ignore_errors=True)
        if os.path.isdir(final):  # a folder without a marker is nothing we built
            shutil.rmtree(final)
        build = os.path.join(ENGINES, f".build-{name}-{os.getpid()}")
        report("venv " + name, 0, 0)
        run_step([sys.executable, "-m", "venv", build], "python3 -m venv", "venv")
        pause_point("pip")
        report("pip install " + " ".join(need["packages"]), 0, 0)
        argv = [os.path.join(build, "bin", "python"), "-m", "pip", "install", "--no-input"]
        argv += ["--disable-pip-version-check", "--no-cache-dir"]
        for url in need.get("index_urls", []):
            argv += ["--extra-index-url", url]
        run_step(argv + list(need["packages"]), "pip install", "venv")
        if need.get("uninstall"):  # what the install pulled in that the build cannot load
            python = os.path.join(build, "bin", "python")
            report("pip uninstall " + " ".join(need["uninstall"]), 0, 0)
            run_step(
                [python, "-m", "pip", "uninstall", "-y", *need["uninstall"]],
                "pip uninstall",
                "venv",
            )
        ready = {
            "kind": "venv",
            "name": name,
            "packages": list(need["packages"]),
            "uninstalled": list(need.get("uninstall", [])),
            "built_at": time.time(),
        }
        write_atomic(os.path.join(build, MARKER), ready)
        os.rename(build, final)
        return ready


def ensure_image(need, report):
    """The image pulled once, and the digest it resolved to (what units then run)."""
    engine, image = need.get("container_engine") or "docker", need["name"]
    images = read_json(IMAGES) or {}
    known = images.get(image)
    if known is not None:
        with contextlib.suppress(AgentError):
            run_step([engine, "image", "inspect", known["digest"]], "image inspect", "image")
            return known
    report("pull " + image, 0, 0)
    run_step([engine, "pull", image], engine + " pull " + image, "image", timeout=6 * 3600)
    out = run_step(
        [engine, "image", "inspect", "--format", "{{index .RepoDigests 0}}", image],
        "image inspect",
        "image",
    )
    known = {"kind": "container", "name": image, "digest": out.strip(), "engine": engine}
    known["pulled_at"] = time.time()
    with locked("images"):
        images = read_json(IMAGES) or {}
        images[image] = known
        write_atomic(IMAGES, images)
    return known


def pinned_image(image):
    """The digest an image resolved to when it was pulled here, else the image itself."""
    known = (read_json(IMAGES) or {}).get(image)
    return known["digest"] if known else image


def note_use(argv):
    """Mark the environment a unit runs from as used (first use only: prune's clock)."""
    if argv and argv[0].startswith(ENGINES + os.sep):
        name = argv[0][len(ENGINES) + 1 :].split(os.sep, 1)[0]
        used = os.path.join(ENGINES, name, USED)
        if os.path.isdir(os.path.dirname(used)) and not os.path.exists(used):
            with open(used, "w"):
                pass


def folder_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def version_key(name):
    """(package, version tuple) of `vllm-0.33.0`; unknown parts sort first."""
    package, _, version = name.rpartition("-")
    parts = []
    for piece in version.replace("post", ".").replace("rc", ".-1.").split("."):
        parts.append(int(piece) if piece.lstrip("-").isdigit() else -2)
    return package, tuple(parts)


def in_use(units):
    names = set()
    for record in units:
        argv = record.get("argv") or []
        if record.get("alive") and argv and argv[0].startswith(ENGINES + os.sep):
            names.add(argv[0][len(ENGINES) + 1 :].split(os.sep, 1)[0])
    return names


def environments(units):
    """What is ready: each environment with its packages, size and whether a unit uses it."""
    used = in_use(units)
    found = []
    if os.path.isdir(ENGINES):
        for name in sorted(os.listdir(ENGINES)):
            folder = os.path.join(ENGINES, name)
            ready = read_json(os.path.join(folder, MARKER))
            if name.startswith(".") or ready is None:
                continue
            first_use = os.path.join(folder, USED)
            found.append(
                {
                    "kind": "venv",
                    "name": name,
                    "packages": ready.get("packages", []),
                    "bytes": folder_bytes(folder),
                    "in_use": name in used,
                    "first_used": os.path.getmtime(first_use)
                    if os.path.exists(first_use)
                    else None,
                }
            )
    for image, known in sorted((read_json(IMAGES) or {}).items()):
        found.append(
            {
                "kind": "container",
                "name": image,
                "digest": known.get("digest"),
                "bytes": None,
                "in_use": any(
                    known.get("digest") in (r.get("argv") or []) for r in units if r.get("alive")
                ),
                "first_used": None,
            }
        )
    return found


def prune(units, keep_seconds, now=None):
    """Remove environments no unit uses once a newer one of the same package has run for
    `keep_seconds`, and the leftovers of killed builds."""
    now = time.time() if now is None else now
    present = environments(units)
    removed = []
    venvs = [e for e in present if e["kind"] == "venv"]
    for env in venvs:
        package, version = version_key(env["name"])
        newer = [
            other
            for other in venvs
            if version_key(other["name"])[0] == package
            and version_key(other["name"])[1] > version
            and other["first_used"] is not None
            and now - other["first_used"] >= keep_seconds
        ]
        if not env["in_use"] and newer:
            with locked(env["name"]):
                shutil.rmtree(os.path.join(ENGINES, env["name"]))
            removed.append(env["name"])
    if os.path.isdir(ENGINES):
        for entry in os.listdir(ENGINES):
            if entry.startswith(".build-"):
                name = entry[len(".build-") :].rsplit("-", 1)[0]
                with locked(name, wait=False) as free:  # a live build holds its lock
                    if free and os.path.isdir(os.path.join(ENGINES, entry)):
                        shutil.rmtree(os.path.join(ENGINES, entry), ignore_errors=True)
                        removed.append(entry)
    return removed
