"""The `workflow_run` (completed) event GitHub sends when the run of a review's workflow ends:
what bench.yml reads on an approving review, built from the fake's own `pull_request_review`
event and held to GitHub's published webhook schema like the fake's other events."""

from __future__ import annotations

from typing import Any

from tests.forge.fake_github import FakeGitHub
from tests.forge.github_openapi import webhook_problems

Json = dict[str, Any]
RUN_ID = 4242
WORKFLOW_ID = 77
AT = "2025-06-15T12:00:00Z"


def _repo_lite(repository: Json) -> Json:
    """A repository-lite: the repository's URLs and names, none of its counts or settings."""
    keep = {"description", "fork", "full_name", "html_url", "id", "name", "node_id", "owner"}
    keep |= {"private", "url"}
    full = {"clone_url", "git_url", "mirror_url", "ssh_url", "svn_url"}  # a full repository's
    return {
        k: v for k, v in repository.items() if k in keep or (k.endswith("_url") and k not in full)
    }


def _ref(side: Json) -> Json:
    repo = side["repo"]
    lite = {k: repo[k] for k in ("id", "url", "name")}
    return {"ref": side["ref"], "sha": side["sha"], "repo": lite}


def review_run_event(fake: FakeGitHub, number: int, conclusion: str = "success") -> Json:
    """`workflow_run` completed for review.yml's run on the pull request's latest review."""
    review = fake.review_event(number)
    pull, repository = review["pull_request"], review["repository"]
    head_repo = _repo_lite(pull["head"]["repo"])
    url = f"{repository['url']}/actions/runs/{RUN_ID}"
    web = f"{repository['html_url']}/actions/runs/{RUN_ID}"
    run = {
        "id": RUN_ID,
        "node_id": f"WFR_{RUN_ID}",
        "name": "denv review",
        "display_title": pull["title"],
        "path": ".github/workflows/review.yml",
        "event": "pull_request_review",
        "status": "completed",
        "conclusion": conclusion,
        "head_branch": pull["head"]["ref"],
        "head_sha": pull["head"]["sha"],
        "head_commit": {
            "id": pull["head"]["sha"],
            "tree_id": "0" * 40,
            "message": pull["title"],
            "timestamp": AT,
            "author": {"name": "Ada Lovelace", "email": "ada@example.com"},
            "committer": {"name": "Ada Lovelace", "email": "ada@example.com"},
        },
        "head_repository": head_repo,
        "repository": _repo_lite(repository),
        "pull_requests": [
            {
                "url": pull["url"],
                "id": pull["id"],
                "number": pull["number"],
                "head": _ref(pull["head"]),
                "base": _ref(pull["base"]),
            }
        ],
        "actor": review["sender"],
        "triggering_actor": review["sender"],
        "run_number": 1,
        "run_attempt": 1,
        "run_started_at": AT,
        "created_at": AT,
        "updated_at": AT,
        "previous_attempt_url": None,
        "workflow_id": WORKFLOW_ID,
        "workflow_url": f"{repository['url']}/actions/workflows/{WORKFLOW_ID}",
        "url": url,
        "html_url": web,
        "jobs_url": f"{url}/jobs",
        "logs_url": f"{url}/logs",
        "artifacts_url": f"{url}/artifacts",
        "cancel_url": f"{url}/cancel",
        "rerun_url": f"{url}/rerun",
        "check_suite_id": RUN_ID,
        "check_suite_node_id": f"CS_{RUN_ID}",
        "check_suite_url": f"{repository['url']}/check-suites/{RUN_ID}",
    }
    workflow = {
        "id": WORKFLOW_ID,
        "node_id": f"W_{WORKFLOW_ID}",
        "name": "denv review",
        "path": ".github/workflows/review.yml",
        "state": "active",
        "created_at": AT,
        "updated_at": AT,
        "url": f"{repository['url']}/actions/workflows/{WORKFLOW_ID}",
        "html_url": f"{repository['html_url']}/actions/workflows/review.yml",
        "badge_url": f"{repository['html_url']}/workflows/denv%20review/badge.svg",
    }
    payload = {
        "action": "completed",
        "workflow_run": run,
        "workflow": workflow,
        "repository": repository,
        "sender": review["sender"],
    }
    problems = webhook_problems("workflow_run", payload)
    assert not problems, "the workflow_run webhook is not GitHub's:\n" + "\n".join(problems)
    return payload
