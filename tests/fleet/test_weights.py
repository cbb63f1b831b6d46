"""Weights on a host: the agent's cache filled from file://, a fake hf:// hub of our own on
loopback (HF_ENDPOINT), and an s3 command; cache hits, verification, the full disk, the token.

The cache functions run in a child process, imported from the agent's real zip (as on a host,
where `common`, `weights` … are top-level modules and DENV_HOME is read at import)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.fleet.hostagent import AgentClient, agent_source
from reconciler.fleet.transport import LocalTransport
from tests.fleet.conftest import wait_for
from tests.fleet.hf_server import FakeHub

TOKEN = "hf_denvTestSecret0123456789"
HF_PYTHON = sys.executable  # this venv has huggingface_hub, as the tools venv on a host

DRIVER = r"""
import json, sys
sys.argv[0] = sys.argv[1]  # the agent's own path: what the hf child is started from
sys.path.insert(0, sys.argv[1])
import weights
call, arg = sys.argv[2], json.loads(sys.stdin.read())
seen = []
try:
    if call == "fetch":
        out = weights.fetch_weights(arg, lambda done, total: seen.append([done, total]))
    elif call == "ready":
        out = weights.weights_ready(arg)
    elif call == "prune":
        out = weights.prune_weights(set(arg))
    else:
        out = weights.list_weights()
    print(json.dumps({"result": out, "progress": seen}))
except weights.AgentError as exc:
    print(json.dumps({"error": str(exc), "progress": seen}))
"""


@dataclass
class Host:
    """One host's DENV_HOME and the agent zip that runs there."""

    home: Path
    agent: Path
    roots: tuple[str, ...] = ()  # the fleet's weights roots, sent with every fetch
    output: str = ""  # everything the last call printed, stdout and stderr

    @property
    def cache(self) -> Path:
        return self.home / "weights"

    def call(self, verb: str, arg: Any) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, str(self.agent), verb],
            input=json.dumps(arg),
            capture_output=True,
            text=True,
            env={**os.environ, "DENV_HOME": str(self.home)},
            timeout=120,
            check=False,
        )
        self.output = done.stdout + done.stderr
        assert done.returncode == 0, self.output
        answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return answer

    def start_fetch(self, spec: dict[str, Any]) -> subprocess.Popen[str]:
        """A fetch left running, in its own session (to be killed with its children)."""
        fetch = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(self.agent), "fetch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "DENV_HOME": str(self.home)},
            start_new_session=True,
        )
        assert fetch.stdin is not None
        request = {"host": "h1", "hf_python": HF_PYTHON, "roots": list(self.roots), **spec}
        fetch.stdin.write(json.dumps(request))
        fetch.stdin.close()
        return fetch

    def fetch(self, spec: dict[str, Any]) -> dict[str, Any]:
        request = {"host": "h1", "hf_python": HF_PYTHON, "roots": list(self.roots), **spec}
        return self.call("fetch", request)

    def entries(self) -> list[str]:
        """What the cache holds, lock files aside."""
        if not self.cache.exists():
            return []
        return sorted(e.name for e in self.cache.iterdir() if not e.name.startswith(".lock-"))


@pytest.fixture
def host(tmp_path: Path) -> Host:
    agent = tmp_path / "agent.pyz"
    agent.write_bytes(agent_source()[0])
    return Host(tmp_path / "denv-home", agent, roots=(f"file://{tmp_path}", "s3://models"))


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    server = FakeHub().start()
    yield server
    server.stop()
    assert server.unexpected == [], "the fake hub got requests it does not know"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB filesystem (tmpfs), for running out of space."""
    if os.geteuid() != 0 and not os.environ.get("CI"):
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    folder = tmp_path / "small"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def generated_files(seed: int = 1) -> dict[str, bytes]:
    """A small checkpoint: config, tokenizer in a subfolder, two shards (LFS-sized)."""
    return {
        "config.json": json.dumps({"model_type": "tiny", "seed": seed}).encode(),
        "tokenizer/tokenizer.json": b"t" * 700,
        "model-00001-of-00002.safetensors": bytes(range(256)) * 1200 + bytes([seed]),
        "model-00002-of-00002.safetensors": bytes(reversed(range(256))) * 900,
    }


def write_tree(folder: Path, files: dict[str, bytes]) -> Path:
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return folder


def tree_of(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and ".cache" not in p.parts and p.name != ".denv-manifest.json"
    }


# --- file:// ---------------------------------------------------------------------------------


def test_file_source_is_copied_once_then_a_cache_hit(host: Host, tmp_path: Path) -> None:
    files = generated_files()
    origin = write_tree(tmp_path / "ckpt", files)
    source = f"file://{origin}"
    first = host.fetch({"source": source})["result"]
    cached = Path(first["path"])
    assert first["files"] == 4 and first["bytes"] == sum(map(len, files.values()))
    assert tree_of(cached) == files
    shard = "model-00001-of-00002.safetensors"
    assert (cached / shard).stat().st_ino != (origin / shard).stat().st_ino  # never linked

    again = host.fetch({"source": source})
    assert again["result"] == first  # the same manifest, read back
    assert again["progress"] == []  # nothing copied
    assert host.entries() == [cached.name]


def test_file_source_on_another_filesystem_is_copied(host: Host, small_disk: Path) -> None:
    files = generated_files()
    origin = write_tree(small_disk / "ckpt", files)
    answer = host.fetch({"source": f"file://{origin}"})
    manifest = answer["result"]
    assert tree_of(Path(manifest["path"])) == files
    assert answer["progress"][-1] == [manifest["bytes"], manifest["bytes"]]
    assert host.fetch({"source": f"file://{origin}"})["progress"] == []


# --- hf:// -----------------------------------------------------------------------------------


def test_hf_source_is_downloaded_once_then_a_cache_hit(host: Host, hub: FakeHub) -> None:
    files = generated_files()
    commit = hub.add_repo("org/tiny", files)
    spec = {"source": f"hf://org/tiny@{commit[:7]}", "hf_endpoint": hub.endpoint}
    first = host.fetch(spec)
    manifest = first["result"]
    assert manifest["commit"] == commit and manifest["files"] == 4
    assert tree_of(Path(manifest["path"])) == files
    assert first["progress"][-1] == [manifest["bytes"], manifest["bytes"]]
    assert dict(hub.downloads) == dict.fromkeys(files, 1)

    assert host.fetch(spec)["result"] == manifest
    assert sum(hub.downloads.values()) == 4  # zero downloads the second time
    assert hub.api_calls["model_info"] == 1  # not even a listing: the cache answers
    assert host.call("list", None)["result"] == [manifest]


def test_truncated_cached_file_is_detected_and_refetched(host: Host, hub: FakeHub) -> None:
    files = generated_files()
    commit = hub.add_repo("org/tiny", files)
    spec = {"source": f"hf://org/tiny@{commit}", "hf_endpoint": hub.endpoint}
    cached = Path(host.fetch(spec)["result"]["path"])
    shard = cached / "model-00002-of-00002.safetensors"
    with shard.open("r+b") as stream:
        stream.truncate(1000)

    assert host.call("ready", spec["source"])["result"] is None
    repaired = host.fetch(spec)["result"]
    assert tree_of(Path(repaired["path"])) == files
    assert hub.downloads["model-00002-of-00002.safetensors"] == 2  # only that file again
    assert sum(hub.downloads.values()) == 5


def test_wrong_size_from_the_hub_fails_and_is_never_used(host: Host, hub: FakeHub) -> None:
    files = generated_files()
    commit = hub.add_repo("org/tiny", files)
    shard = "model-00001-of-00002.safetensors"
    hub.repos["org/tiny"].served[shard] = files[shard][:-500]  # listed size, shorter body
    source = f"hf://org/tiny@{commit}"
    failed = host.fetch({"source": source, "hf_endpoint": hub.endpoint})
    assert failed["error"] == (
        f"h1: weights {source}: verification failed: {shard} is 306701 bytes, "
        "expected 307201 bytes "
        "(the cache is not marked complete)"
    )
    assert hub.downloads[shard] == 2  # fetched, found short, forced once more
    assert host.call("ready", source)["result"] is None
    assert [e for e in host.entries() if not e.startswith(".partial-")] == []

    del hub.repos["org/tiny"].served[shard]  # the hub is fixed: the retry resumes
    resumed = host.fetch({"source": source, "hf_endpoint": hub.endpoint})["result"]
    assert tree_of(Path(resumed["path"])) == files
    assert hub.downloads["config.json"] == 1 and hub.downloads[shard] == 3


def test_gated_repo_sends_the_token_and_keeps_it_secret(
    host: Host, hub: FakeHub, tmp_path: Path
) -> None:
    files = generated_files()
    commit = hub.add_repo("org/gated", files, token=TOKEN)
    source = f"hf://org/gated@{commit[:10]}"
    refused = host.fetch({"source": source, "hf_endpoint": hub.endpoint})
    assert refused["error"].startswith(f"h1: weights {source}: GatedRepoError")
    assert host.entries() == []

    fetched = host.fetch({"source": source, "hf_endpoint": hub.endpoint, "token": TOKEN})
    assert tree_of(Path(fetched["result"]["path"])) == files
    hub_auth = {auth for listener, auth in hub.auth_seen if listener == "hub"}
    cdn_auth = {auth for listener, auth in hub.auth_seen if listener == "cdn"}
    assert hub_auth == {None, f"Bearer {TOKEN}"}  # None: the refused call above
    assert cdn_auth == {None}  # the library drops the token on the CDN's origin
    assert TOKEN not in host.output
    holding = [p for p in tmp_path.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert holding == []


def test_unpinned_hf_source_is_refused(host: Host) -> None:
    answer = host.fetch({"source": "hf://org/tiny@main"})
    assert "pinned to a commit" in answer["error"]
    assert host.entries() == []


# --- the full disk ---------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["hf", "file"])
def test_weights_that_cannot_fit_are_refused_before_anything_changes(
    scheme: str, hub: FakeHub, small_disk: Path, tmp_path: Path
) -> None:
    big = {"config.json": b"{}", "model.safetensors": os.urandom(3_000_000)}
    if scheme == "hf":
        source = f"hf://org/big@{hub.add_repo('org/big', big)}"
    else:
        source = f"file://{write_tree(tmp_path / 'big', big)}"
    agent = small_disk / "agent.pyz"
    agent.write_bytes(agent_source()[0])
    host = Host(small_disk / "denv-home", agent, roots=(f"file://{tmp_path}",))
    answer = host.fetch({"source": source, "hf_endpoint": hub.endpoint})
    pattern = rf"h1: weights {re.escape(source)} need 3\.0 MB, 2\.\d MB free on {host.cache}"
    assert re.fullmatch(pattern, answer["error"]), answer["error"]
    assert host.entries() == []  # nothing downloaded, nothing staged
    assert sum(hub.downloads.values()) == 0


# --- s3:// through a command, prune ----------------------------------------------------------


def s3_command(bucket_root: Path) -> list[str]:
    """A stand-in for `aws s3 sync {source} {dest}`: s3://bucket/key is bucket_root/bucket/key."""
    copy = (
        "import shutil, sys; "
        f"shutil.copytree({str(bucket_root)!r} + '/' + sys.argv[1][5:], sys.argv[2], "
        "dirs_exist_ok=True)"
    )
    return [sys.executable, "-c", copy, "{source}", "{dest}"]


def test_s3_source_runs_the_configured_command(host: Host, tmp_path: Path) -> None:
    files = generated_files()
    write_tree(tmp_path / "buckets" / "models" / "tiny", files)
    spec = {"source": "s3://models/tiny", "s3_command": s3_command(tmp_path / "buckets")}
    manifest = host.fetch(spec)["result"]
    assert manifest["kind"] == "s3" and tree_of(Path(manifest["path"])) == files
    assert host.fetch(spec)["progress"] == []

    missing = host.fetch({**spec, "source": "s3://models/absent"})
    assert re.match(
        r"h1: weights s3://models/absent: .*python.* failed \(exit 1\)", missing["error"]
    )
    assert host.call("ready", "s3://models/absent")["result"] is None
    assert host.fetch({"source": "s3://models/tiny2"})["error"].startswith(
        "h1: weights s3://models/tiny2: no s3 command configured"
    )


def test_prune_keeps_what_is_named_and_removes_the_rest(host: Host, tmp_path: Path) -> None:
    sources = []
    for seed in (1, 2):
        origin = write_tree(tmp_path / f"ckpt{seed}", generated_files(seed))
        sources.append(f"file://{origin}")
        host.fetch({"source": sources[-1]})
    (host.cache / ".partial-0123456789abcdef").mkdir()  # left by a killed download
    removed = host.call("prune", [sources[0]])["result"]
    assert removed == [str(host.cache / ".partial-0123456789abcdef"), sources[1]]
    assert [m["source"] for m in host.call("list", None)["result"]] == [sources[0]]


# --- through the agent's verbs ---------------------------------------------------------------


def test_prepare_verb_fetches_gated_weights_and_runtimes_lists_them(
    hub: FakeHub, denv_home: Path
) -> None:
    files = generated_files()
    commit = hub.add_repo("org/gated", files, token=TOKEN)
    source = f"hf://org/gated@{commit}"
    agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(denv_home)}))
    weights = {"source": source, "host": "h1", "token": TOKEN, "hf_python": HF_PYTHON}
    payload = {"id": "prepare-w1", "needs": [], "weights": {**weights, "hf_endpoint": hub.endpoint}}

    def finished() -> dict[str, Any] | None:
        state: dict[str, Any] = agent.prepare(payload, 5)
        return state if state["state"] != "running" else None

    state: dict[str, Any] = wait_for(finished, timeout=60, what="the prepare job")  # type: ignore[assignment]
    assert state["state"] == "done", state["error"]
    assert state["weights"]["commit"] == commit
    assert state["bytes_done"] == state["bytes_total"] == sum(map(len, files.values()))
    listed = agent.runtimes()["weights"]
    assert [w["source"] for w in listed] == [source]
    assert tree_of(Path(listed[0]["path"])) == files
    holding = [p for p in denv_home.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert holding == []


def test_a_slow_download_reports_progress_while_bytes_arrive(host: Host, hub: FakeHub) -> None:
    files = {"config.json": b"{}", "model.safetensors": os.urandom(1_500_000)}
    commit = hub.add_repo("org/slow", files)
    hub.pause = 0.05  # 23 pieces of 64 kB: about 1.2 s, more than two progress periods
    answer = host.fetch({"source": f"hf://org/slow@{commit}", "hf_endpoint": hub.endpoint})
    total = answer["result"]["bytes"]
    partway = [done for done, all_ in answer["progress"] if 0 < done < total and all_ == total]
    assert partway, answer["progress"]
    assert answer["progress"] == sorted(answer["progress"]) and answer["progress"][-1] == [
        total,
        total,
    ]


def test_a_killed_download_is_never_used_and_resumes(host: Host, hub: FakeHub) -> None:
    files = generated_files()
    files["model-00003-of-00003.safetensors"] = os.urandom(2_000_000)
    commit = hub.add_repo("org/tiny", files)
    spec = {"source": f"hf://org/tiny@{commit}", "hf_endpoint": hub.endpoint}
    hub.pause = 0.05  # slow enough to be caught halfway
    fetch = host.start_fetch(spec)
    big = "model-00003-of-00003.safetensors"
    partial = host.cache / f".partial-{hashlib.sha256(spec['source'].encode()).hexdigest()[:16]}"

    def halfway() -> bool:  # the large file on its way, every other one in place
        done = tree_of(partial) if partial.exists() else {}
        return hub.downloads[big] == 1 and all(done.get(n) == files[n] for n in files if n != big)

    try:
        wait_for(halfway, timeout=30, what="the large file halfway, the others done")
    finally:
        os.killpg(fetch.pid, signal.SIGKILL)  # the agent and its hf child: a host rebooting
        fetch.wait()
    assert host.call("ready", spec["source"])["result"] is None
    assert [e for e in host.entries() if not e.startswith(".partial-")] == []

    hub.pause = 0.0
    resumed = host.fetch(spec)["result"]
    assert tree_of(Path(resumed["path"])) == files
    assert list(Path(resumed["path"]).rglob("*.incomplete")) == []
    assert hub.downloads[big] == 2
    assert all(hub.downloads[n] == 1 for n in files if n != big)  # what was complete is kept
