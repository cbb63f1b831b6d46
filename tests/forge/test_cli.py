"""`denv pr list|show|approve|merge` as a person runs them, on a real repository."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.forge.local import LocalForge
from reconciler.forge.models import CheckRun, Conclusion
from tests.forge.gitrepo import commit_file, git
from tests.forge.sshkeys import allow, new_key

RELEASE = "releases/chat-8b/denv.yaml"


def denv(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "pr", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_approve_then_merge(git_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("keys")
    keys = {name: new_key(folder, name) for name in ("Ada Lovelace", "grace", "mallory")}
    keys["ada"] = keys["Ada Lovelace"]
    allow(git_repo, {"grace": keys["grace"], '"Ada Lovelace"': keys["ada"]})
    git(git_repo, "checkout", "-q", "-b", "bigger-batch")
    text = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    head = commit_file(git_repo, RELEASE, text, "chat-8b: max_batch 192")
    git(git_repo, "checkout", "-q", "main")
    forge = LocalForge(git_repo)
    forge.open_pr(
        "bigger-batch", "chat-8b: bigger batches", "Raise **max_batch**.", key=keys["ada"]
    )
    forge.upsert_comment(1, "plan", "### denv plan\n\n**1 action**: 1 replace.")
    failing = CheckRun(name="denv plan", title="invalid", summary="", conclusion=Conclusion.FAILURE)
    forge.set_check(head, failing)

    listed = json.loads(denv(git_repo, "list", "--json").stdout)
    assert [(p["number"], p["head_sha"]) for p in listed["pull_requests"]] == [(1, head)]

    refused = denv(git_repo, "merge", "1")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "check 'denv plan' is failure" in refused.stderr
    assert "0 of 1 approvals" in refused.stderr

    forge.set_check(head, failing.model_copy(update={"conclusion": Conclusion.SUCCESS}))
    own = denv(git_repo, "approve", "1", "--key", str(keys["ada"]))  # git's user.name: author
    assert own.returncode == 0 and "does not count: author of the pull request" in own.stdout
    # `--as grace` is a claim: it counts only signed with a key main lists for grace
    unsigned = denv(git_repo, "approve", "1", "--as", "grace")
    assert unsigned.returncode == 1 and "Traceback" not in unsigned.stderr
    assert "an approval is signed with your SSH key: pass --key" in unsigned.stderr
    forged = denv(git_repo, "approve", "1", "--as", "grace", "--key", str(keys["mallory"]))
    assert forged.returncode == 0, forged.stderr
    assert "does not count: its signature is not grace's by policies/allowed_signers on main" in (
        forged.stdout
    )
    git(git_repo, "config", "user.signingKey", str(keys["grace"]))  # as git signs commits
    approved = json.loads(denv(git_repo, "approve", "1", "--as", "grace", "--json").stdout)
    assert approved["approvals"]["counted"] == ["grace"] and approved["approvals"]["required"] == 1
    assert approved["review"]["signature"].startswith("-----BEGIN SSH SIGNATURE-----")

    shown = denv(git_repo, "show", "1")
    assert shown.returncode == 0
    assert "approvals: 1 of 1 (grace)" in shown.stdout and "denv plan" in shown.stdout

    merged = denv(git_repo, "merge", "1", "--json")
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["status"] == "merged"
    assert "max_batch: 192" in (git_repo / RELEASE).read_text()
    assert [
        p["number"]
        for p in json.loads(denv(git_repo, "list", "--state", "merged", "--json").stdout)[
            "pull_requests"
        ]
    ] == [1]


def test_unknown_pull_request_is_a_clear_error(git_repo: Path) -> None:
    run = denv(git_repo, "show", "7")
    assert (
        run.returncode == 1 and run.stderr.strip() == "no local pull request #7 (known: none yet)"
    )


def test_plan_and_bench_run_only_on_the_head_named_in_full(
    git_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What CI passes as `--head`: a prefix is refused before anything is read (it can be
    forged), and a full id that is not the head any more plans and benches nothing."""
    key = new_key(tmp_path_factory.mktemp("keys"), "ada")
    allow(git_repo, {'"Ada Lovelace"': key})
    base = git(git_repo, "rev-parse", "HEAD").strip()
    git(git_repo, "checkout", "-q", "-b", "bigger-batch")
    text = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    head = commit_file(git_repo, RELEASE, text, "chat-8b: max_batch 192")
    git(git_repo, "checkout", "-q", "main")
    LocalForge(git_repo).open_pr("bigger-batch", "chat-8b: bigger batches", "", key=key)
    for command in ("plan", "bench"):
        short = denv(git_repo, command, "--pr", "1", "--head", head[:7])
        assert short.returncode == 1 and "Traceback" not in short.stderr, short.stderr
        assert f"--head: '{head[:7]}' is not a commit named in full (40 hex digits)" in short.stderr
        moved = denv(git_repo, command, "--pr", "1", "--head", base)
        assert moved.returncode == 1 and "Traceback" not in moved.stderr, moved.stderr
        assert f"the head moved to {head[:12]} from {base[:12]}" in moved.stderr
    assert LocalForge(git_repo).checks(head) == []  # nothing planned, nothing benched
