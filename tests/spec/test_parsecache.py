"""The parse cache: a repository loads the same with it, cold or warm, as without it; a
changed file is read again; an entry that is corrupt, or names anything but plain values, is
a miss; problems found in a file read from the cache still name its line; fleets and policies
(the trusted paths) are parsed every time."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.spec import parsecache
from reconciler.spec.loader import load_repo, open_repo
from reconciler.spec.parsecache import ParseCache
from reconciler.spec.repo import Repo
from reconciler.spec.sources import WorkTree, is_trusted_path
from tests.conftest import ROOT, Edit

FLEET = "fleets/local.yaml"
RELEASE = "releases/chat-8b/denv.yaml"


def cached(parses: list[str]) -> list[str]:
    """The paths parsed that the cache may hold (trusted paths are parsed every time)."""
    return [path for path in parses if not is_trusted_path(path)]


def _same(a: Repo, b: Repo) -> None:
    for part in (
        "hardware",
        "offers",
        "models",
        "workloads",
        "recipes",
        "fleets",
        "releases",
        "promotions",
        "policies",
        "results",
        "origin",
        "result_lines",
        "problems",
        "broken",
    ):
        assert getattr(a, part) == getattr(b, part), part
    assert {p: d.text for p, d in a.docs.items()} == {p: d.text for p, d in b.docs.items()}


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the cache had to parse (it delegates to the parser unchanged)."""
    seen: list[str] = []
    parse = parsecache.parse_values

    def counted(path: str, data: bytes):  # type: ignore[no-untyped-def]
        seen.append(path)
        return parse(path, data)

    monkeypatch.setattr(parsecache, "parse_values", counted)
    return seen


def test_cold_and_warm_load_the_same_repo_as_no_cache(
    denv_repo: Path, tmp_path: Path, parses: list[str]
) -> None:
    cache = ParseCache(tmp_path / "cache")
    plain = load_repo(WorkTree(denv_repo))
    cold = load_repo(WorkTree(denv_repo), cache)
    parsed = len(cached(parses))
    warm = load_repo(WorkTree(denv_repo), cache)
    assert parsed > 10 and len(cached(parses)) == parsed  # the warm load parsed no cached file
    assert FLEET in parses[parsed:]  # and every trusted one again
    assert plain.errors == []
    _same(plain, cold)
    _same(plain, warm)
    # the round-trip data, for positions and edits, is what the parser makes of the text
    for path, doc in warm.docs.items():
        assert doc.data == plain.docs[path].data, path


def test_a_changed_file_is_read_again(
    denv_repo: Path, edit: Edit, tmp_path: Path, parses: list[str]
) -> None:
    cache = ParseCache(tmp_path / "cache")
    release = load_repo(WorkTree(denv_repo), cache).releases["chat-8b"].release
    assert release.overrides["settings"]["max_batch"] == 128
    stat = (denv_repo / RELEASE).stat()
    edit(RELEASE, "max_batch: 128", "max_batch: 192")  # same size
    os.utime(denv_repo / RELEASE, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and same time
    parses.clear()
    release = load_repo(WorkTree(denv_repo), cache).releases["chat-8b"].release
    assert release.overrides["settings"]["max_batch"] == 192
    assert cached(parses) == [RELEASE]


def test_a_file_that_turns_invalid_names_its_line_from_a_warm_cache(
    denv_repo: Path, edit: Edit, tmp_path: Path
) -> None:
    cache = ParseCache(tmp_path / "cache")
    edit(FLEET, "gpus: 16", "gpus: -1")
    expected = [str(p) for p in open_repo(denv_repo).errors]
    assert any(p.startswith(f"{FLEET}:11:") for p in expected), expected
    for _ in range(2):  # cold, then from the entries
        assert [str(p) for p in open_repo(denv_repo, cache=cache).errors] == expected


def test_invalid_yaml_is_reported_every_time(denv_repo: Path, edit: Edit, tmp_path: Path) -> None:
    cache = ParseCache(tmp_path / "cache")
    edit(FLEET, "gpus: 16", "gpus: [16")
    first = [str(p) for p in load_repo(WorkTree(denv_repo), cache).errors]
    assert any(p.startswith(f"{FLEET}:") and "invalid YAML" in p for p in first), first
    assert [str(p) for p in load_repo(WorkTree(denv_repo), cache).errors] == first


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a pickle at all",
        pickle.dumps((b"0" * 64, {"fleet": {}})),  # another file's key
        pickle.dumps({"a": "dict"}),
        pickle.dumps((b"0" * 64, {"fleet": {}}))[:-5],  # truncated
    ],
    ids=["empty", "garbage", "wrong-key", "wrong-shape", "truncated"],
)
def test_a_corrupt_entry_is_a_miss(
    denv_repo: Path, tmp_path: Path, parses: list[str], content: bytes
) -> None:
    folder = tmp_path / "cache"
    expected = load_repo(WorkTree(denv_repo), ParseCache(folder))
    entries = sorted(folder.iterdir())
    for entry in entries:
        entry.write_bytes(content)
    parses.clear()
    _same(load_repo(WorkTree(denv_repo), ParseCache(folder)), expected)
    assert len(cached(parses)) == len(entries)  # each entry was a miss, parsed and rewritten
    parses.clear()
    _same(load_repo(WorkTree(denv_repo), ParseCache(folder)), expected)
    assert cached(parses) == []


class _Runs:
    """A pickled object that would run a command when unpickled, were its class allowed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_an_entry_naming_a_class_is_refused_unrun(denv_repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    cache = ParseCache(folder)
    expected = load_repo(WorkTree(denv_repo), cache)
    marker = tmp_path / "ran"
    for entry in folder.iterdir():
        key, _ = pickle.loads(entry.read_bytes())  # the entries denv wrote are plain values
        entry.write_bytes(pickle.dumps((key, _Runs(marker))))
    _same(load_repo(WorkTree(denv_repo), cache), expected)
    assert not marker.exists()


def test_a_folder_that_cannot_be_written_is_no_cache(denv_repo: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    _same(
        load_repo(WorkTree(denv_repo), ParseCache(blocked / "cache")),
        load_repo(WorkTree(denv_repo)),
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("bench",),
        ("bench", "--workload", "agent", "--latency", "p99<1.5s"),
        ("bench", "--rank", "throughput", "--json"),
        ("validate",),
    ],
    ids=" ".join,
)
def test_cli_output_is_the_same_with_a_cold_and_a_warm_cache(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    env = {**os.environ, "DENV_CACHE": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path)}

    def run() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "reconciler", *argv],
            capture_output=True,
            cwd=ROOT,
            env=env,
            timeout=300,
        )

    cold = run()
    assert cold.returncode == 0, cold.stderr
    assert any((tmp_path / "cache" / "parsed").iterdir())
    warm = run()
    assert (warm.returncode, warm.stdout, warm.stderr) == (0, cold.stdout, cold.stderr)
