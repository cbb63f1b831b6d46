"""`denv parity run` as a user runs it, against scripted servers of the tests' own: the
verdict and its failing prompts, --json, the policy from policies/gates.yaml, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, Edit
from tests.parity.scripted import Scripted, serving, write_suite
from tests.parity.test_runner import servers


def denv(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "reconciler", "parity", "run", "--repo", str(repo), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)


def three(repo: Path) -> str:
    prompts = {"same": "same?", "topk": "top-k?", "far": "far?"}
    return str(write_suite(repo / "three.jsonl", prompts))


def test_the_verdict_names_the_failing_prompts(denv_repo: Path) -> None:
    reference, candidate = servers()
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        mine = denv(
            denv_repo,
            *("--reference", ref_url, "--candidate", cand_url + "/v1/"),
            *("--suite", three(denv_repo)),
        )
    assert mine.returncode == 1, mine.stderr
    lines = mine.stdout.splitlines()
    assert lines[0].startswith("PARITY 2/3 (tolerant, top 5) — suite three, 1 exact, 1 within")
    assert f"candidate {cand_url}" in mine.stdout
    failing = [line.split() for line in lines if line.strip().startswith("far")]
    assert failing == [["far", "0", "'", "m'", "'", "z'", "no"]]


def test_json_and_strict_mode_from_the_command_line(denv_repo: Path) -> None:
    reference, candidate = servers()
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        run = denv(
            denv_repo,
            *("--reference", ref_url, "--candidate", cand_url, "--suite", three(denv_repo)),
            *("--mode", "strict", "--json"),
        )
    assert run.returncode == 1, run.stderr
    verdict = json.loads(run.stdout)
    assert verdict["headline"] == "PARITY 1/3" and verdict["mode"] == "strict"
    assert [f["id"] for f in verdict["failures"]] == ["topk", "far"]
    assert verdict["failures"][0]["divergence"] == {
        "position": 1,
        "reference": " b",
        "candidate": " x",
        "in_top_k": True,
    }


def test_the_gates_policy_decides_and_a_pass_exits_0(denv_repo: Path, edit: Edit) -> None:
    edit("policies/gates.yaml", "top_k: 5 ", "top_k: 1 ")
    reference, candidate = servers()
    suite = str(write_suite(denv_repo / "one.jsonl", {"topk": "top-k?"}))
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        k1 = denv(denv_repo, "--reference", ref_url, "--candidate", cand_url, "--suite", suite)
        k2 = denv(
            denv_repo,
            *("--reference", ref_url, "--candidate", cand_url, "--suite", suite, "--top-k", "2"),
        )
    assert (k1.returncode, k1.stdout.split()[:2]) == (1, ["PARITY", "0/1"])
    assert (k2.returncode, k2.stdout.split()[:2]) == (0, ["PARITY", "1/1"]), k2.stderr


def test_errors_are_messages_not_verdicts(denv_repo: Path) -> None:
    reference, _ = servers()
    with serving(reference.app()) as ref_url:
        with serving(Scripted({}).app()) as gone:
            pass
        down = denv(denv_repo, "--reference", ref_url, "--candidate", gone, "--attempts", "2")
    bad_url = denv(denv_repo, "--reference", "ftp://h:1", "--candidate", "http://h:1")
    no_git = denv(denv_repo, "--reference", "ds-flash/prod", "--candidate", "http://h:1")
    for run in (down, bad_url, no_git):
        assert run.returncode == 1 and "Traceback" not in run.stderr and "PARITY" not in run.stdout
    assert "did not run completely: candidate" in down.stderr
    assert "'ftp://h:1' is not an http(s) URL" in bad_url.stderr
    assert "not inside a git repository" in no_git.stderr  # a stage is read from git
