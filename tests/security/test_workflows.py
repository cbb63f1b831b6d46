"""No workflow file a pull request can change runs on a self-hosted runner, and the `denv plan`
and `denv bench` checks come from jobs that run no pull request code (issue 34). Reproduced on
the workflows before: `bench.yml` ran on `pull_request_review`, whose workflow file is the pull
request's merge commit, on `[self-hosted, gpu]`; `plan.yml` ran `pip install .` of the pull
request with `checks: write`, so the pull request could set its own checks green."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.security.workflow_rules import Workflow, git_subcommands, problems, read

WORKFLOWS = sorted((Path(__file__).resolve().parents[2] / ".github/workflows").glob("*.yml"))


def test_there_are_workflows_to_check() -> None:
    assert {p.name for p in WORKFLOWS} >= {"bench.yml", "plan.yml", "review.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_workflow_keeps_pull_request_code_off_runners_checks_and_secrets(path: Path) -> None:
    assert problems(read(path)) == []


def test_the_bench_on_a_review_runs_from_the_default_branch() -> None:
    bench = read(next(p for p in WORKFLOWS if p.name == "bench.yml"))
    assert set(bench.triggers) == {"workflow_run", "issue_comment"}
    assert bench.triggers["workflow_run"]["workflows"] == ["denv review"]


def _flow(triggers: dict[str, object], job: dict[str, object]) -> Workflow:
    return Workflow("x.yml", triggers, {"on": triggers, "jobs": {"j": job}})


CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1"
BENCH = {"name": "bench", "run": 'denv pr bench --pr "$N" --head "$H"'}


def test_the_rules_catch_what_they_are_for() -> None:
    """Each rule, against the shape it forbids (the workflows before the fix had each)."""
    gpu = {"runs-on": ["self-hosted", "gpu"], "permissions": {}, "steps": []}
    assert problems(_flow({"pull_request_review": None}, gpu)) == [
        "x.yml: job j: self-hosted, but trigger pull_request_review runs a workflow file the "
        "pull request can change",
        "x.yml: job j: runs PR code on a self-hosted runner",
    ]
    assert problems(_flow({"push": {"branches": ["dev"]}}, gpu)) == [
        "x.yml: job j: self-hosted, but push to another branch than the default one runs that "
        "branch's file"
    ]
    as_data = {"uses": CHECKOUT, "with": {"ref": "refs/pull/${{ env.N }}/head", "path": "pr"}}
    plan = {"runs-on": "ubuntu-latest", "permissions": {"checks": "write"}, "steps": [as_data]}
    assert problems(_flow({"issue_comment": None}, plan)) == [
        "x.yml: job j: runs PR code with checks: write"
    ]
    unset = {"runs-on": "ubuntu-latest", "steps": [{"uses": CHECKOUT}]}
    assert problems(_flow({"pull_request": None}, unset)) == [
        "x.yml: job j: runs PR code with write-all: write"
    ]
    secret = {"runs-on": "ubuntu-latest", "permissions": {}, "env": {"K": "${{ secrets.K }}"}}
    assert problems(_flow({"pull_request": None}, secret)) == [
        "x.yml: job j: runs PR code with secrets"
    ]
    switched = {"run": 'git -C d -c "a=b c" switch --detach "$SHA"'}
    verdict = {"runs-on": "ubuntu-latest", "permissions": {}, "steps": [switched, BENCH]}
    assert problems(_flow({"workflow_run": None}, verdict)) == [
        "x.yml: job j: sets denv's checks and comments, and runs PR code",
        "x.yml: job j: step 'bench' does not pass the event's head in full",
    ]


def test_a_fetch_of_the_pull_request_is_objects_not_a_checkout() -> None:
    script = (
        "git -C denv -c credential.helper= -c 'credential.helper=!f() { echo; }; f' "
        'fetch origin "+refs/pull/1/head:refs/remotes/pull/1/head"'
    )
    assert git_subcommands(script) == ["fetch"]
    assert git_subcommands("cd pr && git checkout FETCH_HEAD && make") == ["checkout"]


def test_every_accepted_zizmor_finding_is_explained_in_the_docs() -> None:
    """Each `zizmor: ignore[rule]` in a workflow has its row in docs/github.md's table of
    accepted findings, and each row its ignore: nothing is waved through unexplained."""
    docs = (WORKFLOWS[0].parents[2] / "docs/github.md").read_text()
    rows = set(re.findall(r"^\| `([\w-]+)` \| `([\w.]+)`", docs, re.MULTILINE))
    ignored = {
        (rule, path.name)
        for path in WORKFLOWS
        for rule in re.findall(r"zizmor: ignore\[([\w-]+)\]", path.read_text())
    }
    assert ignored and ignored == rows
