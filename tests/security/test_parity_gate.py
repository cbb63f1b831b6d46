"""The parity gate uses the default branch's suite. Reproduced: a pull request that cut the
suite to one prompt of one token passed the gate with an fp8 KV cache. Now the default
branch's suite gates; the pull request's version runs beside it, reported, never gating, and
the comments and the check's title say the suite changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.forge.local import LocalForge
from tests.forge.gitrepo import commit_file, git, init_repo
from tests.pr.test_plan import RELEASE, denv

SUITE = "policies/parity/default.jsonl"
GATES = "policies/gates.yaml"
MAIN_PROMPTS = 24


@pytest.fixture
def repo(denv_repo: Path) -> Path:
    return init_repo(denv_repo)


def _suite(repo: Path, prompts: int, tokens: int) -> str:
    lines = (repo / SUITE).read_text().splitlines()[:prompts]
    return "".join(json.dumps({**json.loads(line), "max_tokens": tokens}) + "\n" for line in lines)


def _trace(folder: Path) -> Path:
    trace = folder / "short.jsonl"
    line = {"timestamp": 0, "input_length": 600, "output_length": 8, "hash_ids": [1, 2]}
    trace.write_text(json.dumps(line) + "\n")
    return trace


def _bench(repo: Path, number: int, trace: Path) -> dict[str, Any]:
    run = denv(
        repo, "bench", "--pr", str(number), "--traffic", str(trace),
        "--concurrency", "1", "--requests", "2", "--ready-timeout", "60s", "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_a_pull_request_cannot_pick_the_suite_that_gates_it(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # main's parity policy is strict, its suite kept short for the test: 24 prompts of 256
    # tokens (the simulator perturbs a tenth of an fp8 KV cache's answers)
    gates = (repo / GATES).read_text().replace("mode: tolerant ", "mode: strict   ")
    commit_file(repo, GATES, gates, "parity: strict")
    commit_file(repo, SUITE, _suite(repo, MAIN_PROMPTS, 256), "parity: a shorter suite")
    git(repo, "checkout", "-q", "-b", "fp8-kv")
    release = (repo / RELEASE).read_text()
    fp8 = "settings: { max_batch: 128, kv_cache: { dtype: fp8 } }"
    commit_file(repo, RELEASE, release.replace("settings: { max_batch: 128 }", fp8), "fp8 KV")
    commit_file(repo, SUITE, _suite(repo, 1, 1), "parity: one prompt, one token is enough")
    git(repo, "checkout", "-q", "main")
    number = LocalForge(repo).open_pr("fp8-kv", "chat-8b: an fp8 KV cache").number

    answer = _bench(repo, number, _trace(tmp_path_factory.mktemp("traffic")))

    [run] = answer["runs"]
    assert run["error"] is None
    assert run["parity"]["total"] == MAIN_PROMPTS  # judged by main's suite
    assert run["proposed_parity"]["total"] == 1  # the pull request's, beside it
    # main's suite catches the fp8 KV cache; the pull request's one token would have passed
    assert run["parity"]["ok"] is False and run["proposed_parity"]["ok"] is True
    check = answer["check"]
    assert check["conclusion"] == "failure"
    assert check["title"].endswith("; parity suite changed by this pull request")
    comments = [c.body for c in LocalForge(repo).comments(number)]
    [bench] = [c for c in comments if c.startswith("<!-- denv:bench")]
    changed = "**The parity suite changed by this pull request** (`policies/parity/default.jsonl`)"
    assert changed in bench and "the gate used `main`'s suite" in bench
    [parity] = [c for c in comments if c.startswith("<!-- denv:parity")]
    gate, mine = parity.split("\n---\n")
    assert f"of {MAIN_PROMPTS} prompts agree" in gate
    assert "Suite: `policies/parity/default.jsonl` of `main @ " in gate
    assert "on the suite this pull request proposes" in mine and "of 1 prompts agree" in mine
    assert "this verdict does not gate" in mine
