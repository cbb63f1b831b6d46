"""Weights on this host: a content-addressed cache of model weights, filled once per source.

`weights/<sha256(source)[:16]>/` holds one source's files; it is filled in
`weights/.partial-<key>/` and renamed into place only once every file has the size the source
lists and the manifest (`.denv-manifest.json`, the completion marker) is written, so a
half-downloaded tree is never used. An interrupted download resumes from the partial folder.

  hf://org/repo@commit  huggingface_hub in a child process (`hf_python AGENT hf-fetch REQUEST`:
                        the agent's own python needs nothing installed); the token reaches the
                        child as HF_TOKEN only, never a file or a message
  file:///abs/path      copied (never linked: the cache holds only its own files), and only
                        from under one of the fleet's roots, symlinks resolved
  s3://bucket/key       the fleet's command (e.g. `aws s3 sync {source} {dest}`), only under one
                        of the fleet's roots; verified only against what the command wrote, see
                        docs/hosts.md

The roots come with the request from the bot, read from the trusted fleet (`weights.roots`):
a file:// or s3:// source outside every root is refused before anything is read or cached.
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from common import (
    HOME,
    WEIGHTS,
    AgentError,
    agent_path,
    child_environment,
    emit,
    file_lock,
    read_json,
    write_atomic,
)

MANIFEST = ".denv-manifest.json"  # written last, inside the tree, before the rename
HF_SOURCE = re.compile(r"^hf://([A-Za-z0-9._-]+/[A-Za-z0-9._-]+)@([0-9a-f]{7,40})$")
POLL = 0.5  # seconds between progress reports of downloads we cannot count ourselves
CHUNK = 8 * 1024 * 1024


def weights_key(source):
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def weights_dir(source):
    return os.path.join(WEIGHTS, weights_key(source))


def partial_dir(source):
    return os.path.join(WEIGHTS, ".partial-" + weights_key(source))


def weights_ready(source):
    """The manifest when the tree is complete and every file still has its size, else None."""
    folder = weights_dir(source)
    stored = read_json(os.path.join(folder, MANIFEST))
    if stored is None or stored.get("source") != source:
        return None
    if mismatched(folder, stored["listing"]):
        return None
    return summary(stored)


def summary(stored):
    """The manifest as callers see it: the file list stays in the marker file."""
    answer = {k: v for k, v in stored.items() if k != "listing"}
    answer["files"] = len(stored["listing"])
    return answer


def mismatched(folder, listing):
    """Paths of `listing` ({path: size}) missing from `folder` or of another size."""
    wrong = []
    for path, size in sorted(listing.items()):
        try:
            if os.path.getsize(os.path.join(folder, path)) != size:
                wrong.append(path)
        except OSError:
            wrong.append(path)
    return wrong


def fetch_weights(spec, progress):
    """Make `spec["source"]` ready in the cache (idempotent); its manifest.

    progress(done_bytes, total_bytes) is called while bytes arrive (total 0 when unknown)."""
    source = spec["source"]
    allowed_origin(spec)  # before the cache is even looked at: a foreign entry is never used
    ready = weights_ready(source)
    if ready is not None:
        return ready
    with locked(weights_key(source)):
        ready = weights_ready(source)  # another job may have finished it while we waited
        if ready is not None:
            return ready
        if source.startswith("hf://"):
            return fetch_hf(spec, progress)
        if source.startswith("file://"):
            return fetch_file(spec, progress)
        if source.startswith("s3://"):
            return fetch_s3(spec, progress)
        raise AgentError(f"{host_of(spec)}: weights {source}: unknown scheme")


def locked(key, wait=True):
    """The lock of one cache entry; with wait=False, it yields False when a fetch holds it."""
    return file_lock(WEIGHTS, key, wait)


def host_of(spec):
    return spec.get("host") or os.uname()[1]


# --- space, staging, completion --------------------------------------------------------------


def human(count):
    """Decimal units, as disks are sold and `df -H` shows them: 15.2 GB."""
    if count < 1000:
        return f"{count} B"
    for unit in ("kB", "MB", "GB", "TB"):
        count /= 1000.0
        if count < 1000 or unit == "TB":
            break
    return f"{count:.1f} {unit}"


def check_space(spec, need):
    """Refuse, changing nothing, when `need` bytes do not fit on the cache's filesystem."""
    free = shutil.disk_usage(existing(WEIGHTS)).free
    if need > free:
        raise AgentError(
            f"{host_of(spec)}: weights {spec['source']} need {human(need)}, "
            f"{human(free)} free on {WEIGHTS}"
        )


def existing(path):
    """`path` or its nearest folder that exists: where the cache's filesystem is measured."""
    while not os.path.isdir(path):
        path = os.path.dirname(path)
    return path


def staged_bytes(source, listing):
    """Bytes of `listing` already present with the right size (a resumed or damaged tree)."""
    for folder in (partial_dir(source), weights_dir(source)):
        if os.path.isdir(folder):
            wrong = set(mismatched(folder, listing))
            return sum(size for path, size in listing.items() if path not in wrong)
    return 0


def stage(source, listing):
    """The partial folder, holding what a damaged or interrupted tree had, wrong files removed."""
    partial, final = partial_dir(source), weights_dir(source)
    if os.path.isdir(final):  # damaged: it goes back to staging, so nothing uses it meanwhile
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(final, MANIFEST))
        shutil.rmtree(partial, ignore_errors=True)
        os.rename(final, partial)
    os.makedirs(partial, exist_ok=True)
    for path in mismatched(partial, listing):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(partial, path))
    for root, _, files in os.walk(os.path.join(partial, ".cache")):
        for name in files:  # a killed download's pieces (we hold the lock: none is live)
            if name.endswith(".incomplete"):
                os.unlink(os.path.join(root, name))
    return partial


def complete(spec, listing, extra):
    """Verify the partial tree against `listing`, mark it complete and rename it into place."""
    source = spec["source"]
    partial, final = partial_dir(source), weights_dir(source)
    wrong = mismatched(partial, listing)
    if wrong:
        raise AgentError(
            f"{host_of(spec)}: weights {source}: verification failed: "
            f"{describe(partial, listing, wrong)} (the cache is not marked complete)"
        )
    stored = dict(extra, source=source, path=final, bytes=sum(listing.values()), listing=listing)
    stored["verified"] = "sizes"
    stored["fetched_at"] = time.time()
    write_atomic(os.path.join(partial, MANIFEST), stored)
    os.rename(partial, final)
    return summary(stored)


def describe(folder, listing, wrong):
    parts = []
    for path in wrong[:3]:
        full = os.path.join(folder, path)
        have = f"{os.path.getsize(full)} bytes" if os.path.exists(full) else "missing"
        parts.append(f"{path} is {have}, expected {listing[path]} bytes")
    more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
    return "; ".join(parts) + more


def folder_listing(folder):
    """{relative path: size} of every regular file under `folder` (symlinked files followed)."""
    listing = {}
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            relative = os.path.relpath(full, folder)
            if relative != MANIFEST and os.path.isfile(full):
                listing[relative] = os.path.getsize(full)
    return listing


class Poller:
    """Reports the bytes under a folder while something else (a library, a command) fills it."""

    def __init__(self, folder, total, report):
        self.folder, self.total, self.report = folder, total, report
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        last = None
        while not self.stopped.wait(POLL):
            done = sum(folder_listing(self.folder).values()) if os.path.isdir(self.folder) else 0
            if done != last:
                last = done
                self.report(min(done, self.total) if self.total else done, self.total)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join()


# --- where file:// and s3:// weights may come from -------------------------------------------


def allowed_origin(spec):
    """The root a file:// or s3:// source lies under (a file:// root as its real path), or an
    AgentError; hf:// needs none. A file:// source is compared by its real path, symlinks
    followed, so neither `..` nor a link leaves the root; `/` is never a root."""
    source, roots = spec["source"], spec.get("roots") or []
    if source.startswith("file://"):
        real = os.path.realpath(source[len("file://") :] or ".")
        if source[len("file://") :].startswith("/"):
            for root in roots:
                if root.startswith("file:///"):
                    folder = os.path.realpath(root[len("file://") :])
                    if folder != "/" and inside(real, folder):
                        return folder
        raise outside(spec, roots, "file://")
    if source.startswith("s3://"):
        parts = source[len("s3://") :].rstrip("/").split("/")
        if all(part not in ("", ".", "..") for part in parts):
            for root in roots:
                if root.startswith("s3://") and inside("/".join(parts), root[len("s3://") :]):
                    return root
        raise outside(spec, roots, "s3://")
    return None


def inside(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def outside(spec, roots, scheme):
    declared = [root for root in roots if root.startswith(scheme)]
    where = ", ".join(declared) if declared else f"the fleet declares no {scheme} root"
    return AgentError(
        f"{host_of(spec)}: weights {spec['source']}: outside the fleet's weights roots ({where})"
    )


# --- file:// ---------------------------------------------------------------------------------


def fetch_file(spec, progress):
    """Copy the source's files into the cache. Never a hard link: a linked file is the source's
    own inode (what writes the cache writes the source), and the cache would hold what the
    source's owner changes later."""
    source, root = spec["source"], allowed_origin(spec)
    origin = os.path.realpath(source[len("file://") :])
    if not os.path.isdir(origin):
        raise AgentError(f"{host_of(spec)}: weights {source}: no such folder")
    listing = folder_listing(origin)
    if not listing:
        raise AgentError(f"{host_of(spec)}: weights {source}: the folder has no files")
    for path in listing:  # a symlinked file is followed: it too must stay under the root
        if not inside(os.path.realpath(os.path.join(origin, path)), root):
            raise AgentError(
                f"{host_of(spec)}: weights {source}: {path} links outside the root {root}"
            )
    total = sum(listing.values())
    check_space(spec, total - staged_bytes(source, listing))
    partial = stage(source, listing)
    done = 0
    for path, size in sorted(listing.items()):
        target = os.path.join(partial, path)
        if not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            copy_file(os.path.join(origin, path), target, progress, done, total)
        done += size
        progress(done, total)
    return complete(spec, listing, {"kind": "file"})


def copy_file(origin, target, progress, done, total):
    """Copy through a temporary name, so an interrupted copy never looks like a whole file."""
    temporary = target + ".copying"
    count = done
    with open(origin, "rb") as reader, open(temporary, "wb") as writer:
        while True:
            chunk = reader.read(CHUNK)
            if not chunk:
                break
            writer.write(chunk)
            count += len(chunk)
            progress(count, total)
    shutil.copystat(origin, temporary)
    os.chmod(temporary, 0o644)  # read by engines of any user (a trial's), written by none
    os.rename(temporary, target)


# --- s3:// -----------------------------------------------------------------------------------


def fetch_s3(spec, progress):
    """Run the configured command into the partial folder. Its size is unknown beforehand, so
    no space check precedes it; the manifest lists what the command wrote."""
    source, template = spec["source"], spec.get("s3_command")
    if not template:
        raise AgentError(
            f"{host_of(spec)}: weights {source}: no s3 command configured (the fleet's "
            'weights s3_command, e.g. ["aws", "s3", "sync", "{source}", "{dest}"])'
        )
    shutil.rmtree(partial_dir(source), ignore_errors=True)  # a partial sync is not resumable
    partial = stage(source, {})
    argv = [part.replace("{source}", source).replace("{dest}", partial) for part in template]
    with Poller(partial, 0, progress), tempfile.TemporaryFile() as errors:
        try:
            code = subprocess.call(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=errors,
                stderr=errors,
                env=child_environment("s3"),
            )
        except OSError as exc:
            raise AgentError(
                f"{host_of(spec)}: weights {source}: cannot run {argv[0]}: {exc}"
            ) from exc
        if code != 0:
            raise AgentError(
                f"{host_of(spec)}: weights {source}: {argv[0]} failed (exit {code}): {tail(errors)}"
            )
    listing = folder_listing(partial)
    if not listing:
        raise AgentError(f"{host_of(spec)}: weights {source}: {argv[0]} wrote no files")
    progress(sum(listing.values()), sum(listing.values()))
    return complete(spec, listing, {"kind": "s3"})


def tail(stream, secret=None, size=800):
    stream.seek(0)
    text = stream.read().decode("utf-8", "replace").strip()[-size:]
    return text.replace(secret, "***") if secret else text


# --- hf:// -----------------------------------------------------------------------------------


def parse_hf(spec):
    """(repo, commit) of `hf://org/repo@commit`; the cache is keyed by source, so a branch
    name (whose files change under the same key) is refused."""
    found = HF_SOURCE.match(spec["source"])
    if found is None:
        raise AgentError(
            f"{host_of(spec)}: weights {spec['source']}: not hf://org/repo@<commit> (the cache "
            "needs weights pinned to a commit of 7 to 40 hex digits)"
        )
    return found.group(1), found.group(2)


def fetch_hf(spec, progress):
    """Run `hf-fetch` under the python that has huggingface_hub, relaying its progress."""
    source, token = spec["source"], spec.get("token")
    repo, commit = parse_hf(spec)
    python = spec.get("hf_python")
    if not python:
        raise AgentError(f"{host_of(spec)}: weights {source}: no python with huggingface_hub given")
    request = {"source": source, "host": host_of(spec), "repo": repo, "commit": commit}
    env = child_environment("weights", {"HF_HOME": os.path.join(HOME, "hf")})
    env.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    if token:
        env["HF_TOKEN"] = token  # the child's environment only: never argv, never a file
    if spec.get("hf_endpoint"):
        env["HF_ENDPOINT"] = spec["hf_endpoint"]
    argv = [python, agent_path(), "hf-fetch", json.dumps(request)]
    answer = None
    with tempfile.TemporaryFile() as errors:
        try:
            child = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, env=env
            )
        except OSError as exc:
            raise AgentError(
                f"{host_of(spec)}: weights {source}: cannot run {python}: {exc}"
            ) from exc
        with child:
            for line in child.stdout:
                with contextlib.suppress(ValueError):
                    message = json.loads(line)
                    if not isinstance(message, dict):
                        continue
                    if "progress" in message:
                        progress(*message["progress"])
                    elif "ok" in message:
                        answer = message
        if answer is None:  # it died without a verdict: its stderr says why
            failed = f"the download failed (exit {child.returncode}): {tail(errors, token)}"
            raise AgentError(f"{host_of(spec)}: weights {source}: {failed}")
        if not answer["ok"]:
            raise AgentError(answer["error"].replace(token, "***") if token else answer["error"])
    return answer["result"]


def hf_fetch_main(args):
    """The `hf-fetch` verb, run by fetch_hf under a python with huggingface_hub: list the
    commit's files, check space, download, verify (re-fetching a wrong file once), complete."""
    request = json.loads(args[0])
    spec = {"source": request["source"], "host": request["host"]}
    repo, commit = request["repo"], request["commit"]
    try:
        import huggingface_hub
    except ImportError as exc:
        raise AgentError(fail(spec, f"{sys.executable} has no huggingface_hub")) from exc
    try:
        info = huggingface_hub.HfApi().model_info(repo, revision=commit, files_metadata=True)
    except Exception as exc:  # the library's errors name the repository and the status
        raise AgentError(fail(spec, hub_error(exc))) from exc
    if not (info.sha or "").startswith(commit):
        raise AgentError(fail(spec, f"the hub answered commit {info.sha}"))
    listing = {}
    for sibling in info.siblings or []:
        size = sibling.lfs.size if sibling.lfs is not None else sibling.size
        path = os.path.normpath(sibling.rfilename)
        if size is None or path != sibling.rfilename or path.startswith(("/", "..")):
            # the listing names files we delete and replace: nothing outside the tree
            raise AgentError(fail(spec, f"the hub listed {sibling.rfilename!r} (size {size})"))
        listing[path] = size
    total = sum(listing.values())
    check_space(spec, total - staged_bytes(spec["source"], listing))
    partial = stage(spec["source"], listing)
    with Poller(partial, total, lambda done, all_: emit({"progress": [done, all_]})):
        try:
            huggingface_hub.snapshot_download(repo, revision=info.sha, local_dir=partial)
            for path in mismatched(partial, listing):  # once, forced: a truncated file
                huggingface_hub.hf_hub_download(
                    repo, path, revision=info.sha, local_dir=partial, force_download=True
                )
        except Exception as exc:
            raise AgentError(fail(spec, hub_error(exc))) from exc
    emit({"progress": [total, total]})
    return complete(spec, listing, {"kind": "hf", "repo": repo, "commit": info.sha})


def fail(spec, problem):
    return f"{host_of(spec)}: weights {spec['source']}: {problem}"


def hub_error(exc):
    text = (str(exc).strip().splitlines() or [""])[0]
    token = os.environ.get("HF_TOKEN")
    text = text.replace(token, "***") if token else text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- what is cached --------------------------------------------------------------------------


def list_weights():
    """Every complete tree in the cache: its manifest (file list left out)."""
    found = []
    if os.path.isdir(WEIGHTS):
        for entry in sorted(os.listdir(WEIGHTS)):
            stored = read_json(os.path.join(WEIGHTS, entry, MANIFEST))
            if not entry.startswith(".") and stored is not None:
                found.append(summary(stored))
    return found


def prune_weights(keep):
    """Remove cached trees whose source is not in `keep`, and partial downloads no fetch holds;
    what was removed (sources, or folders of partial downloads)."""
    keys = {weights_key(source) for source in keep}
    removed = []
    if not os.path.isdir(WEIGHTS):
        return removed
    for entry in sorted(os.listdir(WEIGHTS)):
        key = entry[len(".partial-") :] if entry.startswith(".partial-") else entry
        folder = os.path.join(WEIGHTS, entry)
        if key in keys or entry.startswith(".lock-") or not os.path.isdir(folder):
            continue
        if entry.startswith(".") and not entry.startswith(".partial-"):
            continue
        with locked(key, wait=False) as free:  # a running fetch holds its lock
            if free:
                stored = read_json(os.path.join(folder, MANIFEST))
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(stored["source"] if stored else folder)
    return removed
