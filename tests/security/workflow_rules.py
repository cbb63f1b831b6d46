"""The rule of the GitHub workflows, as code: no workflow file a pull request can change runs on
a self-hosted runner, a job that runs a pull request's code can write nothing and holds no
secret, the checks denv sets come from jobs that run no pull request code, and a bench or plan
runs on a head named in full. Read from the workflow files themselves (ruamel.yaml), so the
rule holds for the next workflow or job someone adds, not for today's files only."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

DEFAULT_BRANCH = "main"
# Triggers whose workflow file GitHub takes from the default branch, whatever the event's ref.
TRUSTED_TRIGGERS = {"workflow_run", "issue_comment", "pull_request_target", "schedule"}
TRUSTED_TRIGGERS |= {"workflow_dispatch", "push"}  # push: only to the default branch (below)
# Triggers that run the workflow file of the pull request's merge commit: all of it is PR code.
PR_TRIGGERS = {"pull_request", "pull_request_review", "pull_request_review_comment"}
# A ref that names the pull request's own commits.
_PR_REF = re.compile(r"refs/pull/|pull_request\.head|pull_request\.merge|head_sha|head\.ref")
# Git commands that put commits into a work tree (fetch only adds objects).
_GIT_CHECKOUT = {"checkout", "switch", "worktree", "restore", "reset", "merge", "pull", "clone"}
_GIT_VALUED = {"-C", "-c", "--git-dir", "--work-tree", "--namespace"}
# denv commands that set a check and run on hosts: each names the head it may run on.
_DENV_PINNED = re.compile(r"\bdenv\s+pr\s+(bench|plan)\b")
# denv commands that comment and set checks: the verdict, from jobs that run no PR code.
_DENV_VERDICT = re.compile(r"\bdenv\s+pr\s+(bench|plan|commands)\b")
_EVENT_SHA = re.compile(
    r"^\$\{\{\s*github\.event\.(pull_request\.head\.sha|workflow_run\.head_sha)\s*\}\}$"
)


@dataclass(frozen=True)
class Workflow:
    name: str
    triggers: dict[str, Any]
    body: dict[str, Any]


def read(path: Path) -> Workflow:
    body = YAML(typ="safe", pure=True).load(path.read_text())
    on = body["on"]
    if isinstance(on, str):
        on = [on]
    triggers = {t: None for t in on} if isinstance(on, list) else dict(on)
    return Workflow(path.name, triggers, body)


def _labels(job: dict[str, Any]) -> list[str]:
    runs_on = job.get("runs-on", [])
    if isinstance(runs_on, dict):
        runs_on = runs_on.get("labels", [])
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def self_hosted(job: dict[str, Any]) -> bool:
    return any("self-hosted" in str(label) for label in _labels(job))


def git_subcommands(script: str) -> list[str]:
    """The subcommand of each `git` in a shell script (`git -C dir -c k=v fetch` → fetch)."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words, found = list(lexer), []
    for at, word in enumerate(words):
        if word != "git":
            continue
        rest = iter(words[at + 1 :])
        for arg in rest:
            if arg in _GIT_VALUED:
                next(rest, None)
            elif not arg.startswith("-"):
                found.append(arg)
                break
    return found


def _checks_out_pr(step: dict[str, Any]) -> bool:
    uses = str(step.get("uses", ""))
    if uses.startswith("actions/checkout@"):
        return bool(_PR_REF.search(str((step.get("with") or {}).get("ref", ""))))
    return bool(_GIT_CHECKOUT & set(git_subcommands(str(step.get("run", "")))))


def runs_pr_code(flow: Workflow, job: dict[str, Any]) -> bool:
    """The job runs a file the pull request can change: its workflow comes from the pull
    request, or a step puts the pull request's commits into a work tree (where a later
    `make` or `pip install .` would run them)."""
    if PR_TRIGGERS & set(flow.triggers):
        return True
    return any(_checks_out_pr(step) for step in job.get("steps", []))


def _permissions(flow: Workflow, job: dict[str, Any]) -> dict[str, str] | str | None:
    return job["permissions"] if "permissions" in job else flow.body.get("permissions")


def writes(flow: Workflow, job: dict[str, Any]) -> list[str]:
    """The scopes the job's token may write; unset permissions may be the repository's
    default, write-all."""
    granted = _permissions(flow, job)
    if granted is None or granted == "write-all":
        return ["write-all"]
    if isinstance(granted, str):
        return []
    return sorted(scope for scope, level in granted.items() if level == "write")


def _secrets(job: dict[str, Any]) -> bool:
    text = str(job)
    return "secrets." in text or "environment" in job or job.get("secrets") == "inherit"


def _trigger_problems(flow: Workflow) -> list[str]:
    problems = []
    for trigger, settings in flow.triggers.items():
        if trigger not in TRUSTED_TRIGGERS:
            problems.append(f"trigger {trigger} runs a workflow file the pull request can change")
        elif trigger == "push" and (settings or {}).get("branches") != [DEFAULT_BRANCH]:
            problems.append("push to another branch than the default one runs that branch's file")
    return problems


def _pin_problems(job: dict[str, Any]) -> list[str]:
    problems = []
    for step in job.get("steps", []):
        run = str(step.get("run", ""))
        if not _DENV_PINNED.search(run):
            continue
        named = re.search(r'--head\s+"\$(\w+)"', run)
        value = (step.get("env") or {}).get(named.group(1)) if named else None
        if value is None or not _EVENT_SHA.match(str(value)):
            problems.append(f"step '{step.get('name')}' does not pass the event's head in full")
    return problems


def problems(flow: Workflow) -> list[str]:
    """What breaks the rule in one workflow, each naming its job."""
    found: list[str] = []
    for name, job in flow.body.get("jobs", {}).items():
        where = f"{flow.name}: job {name}"
        if self_hosted(job):
            found += [f"{where}: self-hosted, but {p}" for p in _trigger_problems(flow)]
        pr_code = runs_pr_code(flow, job)
        if pr_code:
            found += [f"{where}: runs PR code with {scope}: write" for scope in writes(flow, job)]
            if _secrets(job):
                found.append(f"{where}: runs PR code with secrets")
            if self_hosted(job):
                found.append(f"{where}: runs PR code on a self-hosted runner")
        steps = job.get("steps", [])
        if pr_code and any(_DENV_VERDICT.search(str(s.get("run", ""))) for s in steps):
            found.append(f"{where}: sets denv's checks and comments, and runs PR code")
        found += [f"{where}: {p}" for p in _pin_problems(job)]
    return found
