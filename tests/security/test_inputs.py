"""An attacker's files, as the real CLI reads them from real git repositories: an integer too
long for Python to print, a file far larger than its kind, a linked folder that leaves the
repository, a parse cache that someone else edited. Each is refused where it is written (a
`path:line:col` error, exit 1), never read whole, never a crash (exit 3)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.forge.local import LocalForge
from tests.forge.gitrepo import commit_file, git, init_repo
from tests.forge.sshkeys import sign_openings
from tests.pr.test_plan import RELEASE
from tests.pr.test_plan import denv_in as denv
from tests.security.test_parity_gate import _bench, _trace

DIGITS = "9" * 5000
LONG = "an integer of 5,000 digits; denv reads integers of at most 4,300 decimal digits"
SECRET = "root:$6$not-for-your-eyes"
NO_SERVER = "http://127.0.0.1:9"  # the discard port: nothing listens, nothing is sent


def refused(run: subprocess.CompletedProcess[str], expected: str) -> None:
    """Exit 1 with `expected` among the messages: a refusal, not a bug."""
    assert "this is a bug" not in run.stderr, run.stderr
    assert expected in run.stdout + run.stderr, run.stdout + run.stderr
    assert run.returncode == 1, run.stdout + run.stderr


# --- an integer longer than Python prints, in every kind of file -----------------------------

LONG_INTEGERS = [
    pytest.param("results/big.jsonl", f'{{"id": {DIGITS}}}\n', "1:8", id="results-line"),
    pytest.param("results/big.json", f'{{"id": {DIGITS}}}\n', "1:8", id="results-json"),
    pytest.param(
        "fleets/local.yaml",
        "fleet:\n  name: local\n  trial_gpus: " + DIGITS + "\n",
        "3:15",
        id="yaml-decimal",
    ),
    pytest.param(
        "fleets/local.yaml",
        "fleet:\n  name: local\n  trial_gpus: 0x" + "f" * 5000 + "\n",
        "3:15",
        id="yaml-hexadecimal",
    ),
]


@pytest.mark.parametrize(("path", "text", "where"), LONG_INTEGERS)
def test_validate_names_a_long_integer_at_its_place(
    denv_repo: Path, path: str, text: str, where: str
) -> None:
    (denv_repo / path).parent.mkdir(parents=True, exist_ok=True)
    (denv_repo / path).write_text(text)
    run = denv(denv_repo, "validate", str(denv_repo))
    refused(run, f"{path}:{where}: {LONG}")


def test_plan_and_reconcile_refuse_a_long_integer_on_main(denv_repo: Path) -> None:
    """Named where it is, exit 1; the file holds only the rankings, so the pass deploys the
    releases all the same (stopped at the end: nothing of the test's is left running)."""
    repo = init_repo(denv_repo)
    commit_file(repo, "results/big.jsonl", f'{{"id": {DIGITS}}}\n', "a long integer")
    expected = f"results/big.jsonl:1:8: {LONG}"
    refused(denv(repo, "plan", "--repo", str(repo)), expected)
    home = repo.parent / f"{repo.name}-state" / "home"  # denv_in's agent home
    agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(home)}))
    try:
        refused(denv(repo, "reconcile", "--once", "--repo", str(repo)), expected)
    finally:
        for unit in agent.units():
            agent.stop(unit.id, grace=2)


def test_a_pull_request_with_a_long_integer_gets_a_failed_plan(denv_repo: Path) -> None:
    repo = init_repo(denv_repo)
    git(repo, "checkout", "-q", "-b", "long")
    commit_file(repo, "results/big.jsonl", f'{{"id": {DIGITS}}}\n', "a long integer")
    git(repo, "checkout", "-q", "main")
    sign_openings(repo)
    assert denv(repo, "pr", "open", "--head", "long", "--repo", str(repo)).returncode == 0
    run = denv(repo, "pr", "plan", "--pr", "1", "--json", "--repo", str(repo))
    assert run.returncode == 0 and "this is a bug" not in run.stderr, run.stderr
    answer = json.loads(run.stdout)
    assert answer["problems"] == [f"results/big.jsonl:1:8: {LONG}"]
    assert answer["check"]["conclusion"] == "failure"


def test_a_parity_suite_with_a_long_integer_is_refused(denv_repo: Path) -> None:
    prompt = '{"id": "p", "kind": "completion", "prompt": "hi", "max_tokens": ' + DIGITS + "}\n"
    (denv_repo / "policies/parity/default.jsonl").write_text(prompt)
    repo = init_repo(denv_repo)
    run = denv(repo, "parity", "run", "--reference", NO_SERVER, "--candidate", NO_SERVER)
    refused(run, f"policies/parity/default.jsonl:1:65: {LONG}")


def test_a_pull_requests_suite_with_a_long_integer_cannot_run_and_the_bench_goes_on(
    denv_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    repo = init_repo(denv_repo)
    git(repo, "checkout", "-q", "-b", "long-suite")
    prompt = '{"id": "p", "kind": "completion", "prompt": "hi", "max_tokens": ' + DIGITS + "}\n"
    commit_file(repo, "policies/parity/default.jsonl", prompt, "parity: a long integer")
    release = (repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 64")
    commit_file(repo, RELEASE, release, "a smaller batch: a trial to bench")
    git(repo, "checkout", "-q", "main")
    number = LocalForge(repo).open_pr("long-suite", "parity: a long integer").number

    answer = _bench(repo, number, _trace(tmp_path_factory.mktemp("traffic")))

    [run] = answer["runs"]
    assert run["error"] is None and run["parity"]["total"] > 1  # main's suite gated
    expected = f"parity cannot run: policies/parity/default.jsonl:1:65: {LONG}"
    assert expected in json.dumps(run["proposed_parity"])


def test_a_traffic_file_with_a_long_integer_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shape.jsonl").write_text(
        '{"timestamp": 0, "input_length": ' + DIGITS + ', "output_length": 1, "hash_ids": []}\n'
    )
    run = denv(tmp_path, "traffic", "stats", str(tmp_path / "shape.jsonl"))
    refused(run, f"shape.jsonl:1:34: {LONG}")


# --- files are measured before they are read -------------------------------------------------


def max_rss_mib(run: Callable[[], subprocess.Popen[str]]) -> tuple[int, str, float]:
    """Exit status, output and peak memory (MiB) of the one child `run` starts."""
    child = run()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.stdout is not None
    return child.returncode, child.stdout.read(), usage.ru_maxrss / 1024


def validate_measured(repo: Path, *args: str) -> tuple[int, str, float]:
    """`denv validate` with a parse cache of its own, empty: every run parses alike."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=repo.parent))

    def start() -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if k != "DENV_REPO"}
        env["DENV_CACHE"] = str(cache)
        return subprocess.Popen(
            [sys.executable, "-m", "reconciler", "validate", str(repo), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )

    return max_rss_mib(start)


GIB_AND_A_HALF = 3 * 512 * 1024 * 1024
# What a run may take above its peer's (the same repository without the huge file): far less
# than any of the huge file, read whole, would add.
ABOVE_PEER_MIB = 150


def test_a_huge_file_in_the_work_tree_is_measured_not_read(denv_repo: Path) -> None:
    (denv_repo / "results").mkdir(exist_ok=True)
    *_, peer = validate_measured(denv_repo)
    for path in ("results/huge.jsonl", "fleets/huge.yaml"):
        with (denv_repo / path).open("wb") as file:
            file.truncate(GIB_AND_A_HALF)  # sparse: no disk, 1.5 GB to whoever reads it
    status, output, peak = validate_measured(denv_repo)
    assert status == 1, output
    assert (
        "results/huge.jsonl:1:1: file is 1,610,612,736 bytes; denv JSON Lines files are at "
        "most 67,108,864 bytes" in output
    )
    assert "fleets/huge.yaml:1:1: file is 1,610,612,736 bytes; denv YAML files are at most" in (
        output
    )
    assert peak < peer + ABOVE_PEER_MIB, f"validate peaked at {peak:.0f} MiB, {peer:.0f} without"


def test_a_huge_file_in_a_commit_is_measured_not_read(denv_repo: Path) -> None:
    size = 400 * 1024 * 1024
    repo = init_repo(denv_repo)
    *_, peer = validate_measured(repo, "--rev", "HEAD")
    with (repo / "fleets/huge.yaml").open("wb") as file:
        file.truncate(size)
    git(repo, "add", "fleets/huge.yaml")
    git(repo, "commit", "-q", "-m", "a huge fleet")  # git stores the zeros in a few hundred KiB
    (repo / "fleets/huge.yaml").unlink()  # the work tree no longer has it: only git does
    status, output, peak = validate_measured(repo, "--rev", "HEAD")
    assert status == 1, output
    assert f"fleets/huge.yaml:1:1: file is {size:,} bytes; denv YAML files are at most" in output
    assert peak < peer + ABOVE_PEER_MIB, f"validate peaked at {peak:.0f} MiB, {peer:.0f} without"


def outside_folder(repo: Path, name: str, files: dict[str, str]) -> Path:
    folder = repo.parent / f"{repo.name}-{name}"
    folder.mkdir()
    for path, text in files.items():
        (folder / path).write_text(text)
    return folder


def test_a_linked_folder_that_leaves_the_repository_is_refused_unread(denv_repo: Path) -> None:
    evil = "fleet:\n  name: evil\n  provider: local\n  hardware: h200\n  hosts: []\n"
    fleets = outside_folder(denv_repo, "fleets", {"evil.yaml": evil + f"# {SECRET}\n"})
    release = outside_folder(denv_repo, "release", {"denv.yaml": f"{SECRET}\n"})
    for path in (denv_repo / "fleets").iterdir():
        path.rename(fleets / path.name)
    (denv_repo / "fleets").rmdir()
    (denv_repo / "fleets").symlink_to(fleets, target_is_directory=True)
    (denv_repo / "releases/stolen").symlink_to(release, target_is_directory=True)

    run = denv(denv_repo, "validate", str(denv_repo), "--json")

    assert SECRET not in run.stdout + run.stderr
    problems = [p for p in json.loads(run.stdout)["problems"] if not p.get("warning")]
    leaves = "a symbolic link that leaves the repository: not read"
    assert {(p["path"], p["message"]) for p in problems if p["message"] == leaves} == {
        ("fleets", leaves),
        ("releases/stolen", leaves),
    }


def test_a_suite_in_a_linked_folder_that_leaves_is_refused(denv_repo: Path) -> None:
    suites = denv_repo / "policies/parity"
    outside = outside_folder(denv_repo, "parity", {})
    for path in suites.iterdir():
        path.rename(outside / path.name)
    suites.rmdir()
    suites.symlink_to(outside, target_is_directory=True)
    repo = init_repo(denv_repo)
    run = denv(repo, "parity", "run", "--reference", NO_SERVER, "--candidate", NO_SERVER)
    refused(run, "policies/parity:1:1: a symbolic link that leaves the repository: not read")


# --- the parse cache ---------------------------------------------------------------------------


def poison(folder: Path, old: str, new: str) -> int:
    """Rewrite every entry as someone who can write the folder would: the same key, the values
    with `old` replaced by `new` wherever a string holds it. How many entries held it."""

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value.replace(old, new) if isinstance(value, str) else value

    changed = 0
    for entry in folder.iterdir():
        key, values = pickle.loads(entry.read_bytes())
        swapped = swap(values)
        changed += swapped != values
        entry.write_bytes(pickle.dumps((key, swapped)))
    return changed


def planned(repo: Path) -> str:
    run = denv(repo, "plan", "--repo", str(repo), "--json")
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_an_edited_cache_entry_does_not_move_a_fleet(denv_repo: Path) -> None:
    repo = init_repo(denv_repo)
    assert '"host": "localhost"' in planned(repo)
    parsed = repo.parent / f"{repo.name}-state/cache/repos/parsed"
    poison(parsed, "localhost", "evil.example")
    answer = planned(repo)
    assert "evil.example" not in answer
    assert '"host": "localhost"' in answer


def test_a_cache_that_others_may_write_is_not_used(denv_repo: Path) -> None:
    repo = init_repo(denv_repo)
    assert "meta-llama" in planned(repo)
    parsed = repo.parent / f"{repo.name}-state/cache/repos/parsed"
    parsed.chmod(0o777)
    assert poison(parsed, "meta-llama", "evil-org") > 0
    answer = planned(repo)
    assert "evil-org" not in answer and "meta-llama" in answer
