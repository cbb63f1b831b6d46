"""The fake GitHub holds itself to GitHub's published REST description: a request GitHub does
not document, or an answer the description does not allow, is answered 500 and fails the test."""

from __future__ import annotations

import re
from typing import Any

import requests
import yaml

from reconciler.forge.models import MergeStatus
from tests.conftest import ROOT
from tests.forge.conftest import TOKEN, GitHubSetup
from tests.forge.github_openapi import rest_description, webhook_problems
from tests.forge.github_runs import review_run_event
from tests.forge.test_github import open_pr


def send(setup: GitHubSetup, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(
        method,
        f"{setup.fake.api_url}/repos/{setup.fake.full_name}{path}",
        headers={"Authorization": f"token {TOKEN}"},
        json=body,
        timeout=30,
    )


def caught(setup: GitHubSetup) -> list[str]:
    """What the fake recorded, taken so that the fixture does not fail the test for it."""
    found, setup.fake.unexpected[:] = list(setup.fake.unexpected), []
    return found


def test_a_request_github_does_not_document_is_refused(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    answer = send(github, "POST", f"/pulls/{number}/frobnicate", {})
    assert answer.status_code == 500
    assert caught(github) == [
        f"GitHub documents no operation POST /repos/acme/fleet/pulls/{number}/frobnicate"
    ]


def test_a_request_body_github_does_not_allow_is_refused(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    # "merged" is not a state a pull request can be set to: the fake used to answer 200
    answer = send(github, "PATCH", f"/pulls/{number}", {"state": "merged"})
    assert answer.status_code == 500
    [problem] = caught(github)
    assert problem.startswith("PATCH /repos/{owner}/{repo}/pulls/{pull_number}: the request")
    assert "'merged' is not one of ['open', 'closed']" in problem
    assert github.fake.pulls[number]["state"] == "open"  # refused before the fake acted


def test_an_answer_github_does_not_document_is_caught(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.pulls[number]["state"] = "merged"  # GitHub says closed, and merged: true
    answer = send(github, "GET", f"/pulls/{number}")
    assert answer.status_code == 500
    [problem] = caught(github)
    assert problem.startswith("GET /repos/{owner}/{repo}/pulls/{pull_number} answered 200, which")
    assert "at ['state']: 'merged' is not one of ['open', 'closed']" in problem


def test_an_undocumented_status_is_caught(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.fail("GET", rf"/pulls/{number}$", 418, message="I'm a teapot")
    assert send(github, "GET", f"/pulls/{number}").status_code == 500
    assert caught(github) == [
        "GET /repos/{owner}/{repo}/pulls/{pull_number} answered 418;"
        " GitHub documents 200, 304, 404, 406, 500, 503"
    ]


def test_refusals_are_shaped_as_github_documents_them(github: GitHubSetup) -> None:
    # The fake's 422s lacked the documentation_url GitHub's validation-error requires.
    number, _ = open_pr(github)
    too_long = send(github, "POST", f"/issues/{number}/comments", {"body": "x" * 65_537})
    no_head = send(github, "POST", "/pulls", {"head": "gone", "base": "main", "title": "t"})
    assert caught(github) == []
    assert (too_long.status_code, no_head.status_code) == (422, 422)
    assert too_long.json()["errors"][0]["message"].startswith("body is too long")


def test_an_auto_merged_pull_request_reads_as_github_documents_it(github: GitHubSetup) -> None:
    # The fake's auto_merge was {"merge_method": "merge"}: GitHub's has who enabled it and
    # the commit's title and message too.
    number, sha = open_pr(github)
    assert github.forge.merge(number, head_sha=sha, auto=True).status == MergeStatus.AUTO_MERGE
    answer = send(github, "GET", f"/pulls/{number}")
    assert answer.status_code == 200, caught(github)
    assert answer.json()["auto_merge"]["enabled_by"]["login"] == "denv-bot"


def test_operations_are_found_by_path_template() -> None:
    rest = rest_description()
    found = rest.operation("GET", "/repos/acme/fleet/pulls/comments")  # a literal beats {n}
    assert found is not None and found.template == "/repos/{owner}/{repo}/pulls/comments"
    found = rest.operation("PUT", "/repos/acme/fleet/pulls/7/merge")
    assert found is not None and found.template == "/repos/{owner}/{repo}/pulls/{pull_number}/merge"
    assert rest.operation("PUT", "/repos/acme/fleet/pulls/7") is None


def resolves(payload: Any, path: list[str]) -> bool:
    for step in path:
        key, _, index = step.partition("[")
        if not isinstance(payload, dict) or key not in payload:
            return False
        payload = payload[key]
        if index:  # `pull_requests[0]`
            at = int(index.rstrip("]"))
            if not isinstance(payload, list) or len(payload) <= at:
                return False
            payload = payload[at]
    return True


def test_the_bench_workflow_reads_what_github_sends(github: GitHubSetup) -> None:
    """Every `github.event.…` the bench workflow reads is in the payloads of the events it
    runs on, built by the fake and valid under GitHub's published webhook schemas: the
    `workflow_run` of review.yml's run on an approving review, and a comment."""
    number, _ = open_pr(github)
    github.fake.review(number, "grace")
    comment = github.fake.comment(number, "grace", "/denv bench")
    payloads = {
        "workflow_run": review_run_event(github.fake, number),
        "issue_comment": github.fake.comment_event(comment),
    }
    workflow = (ROOT / ".github/workflows/bench.yml").read_text()
    assert set(yaml.safe_load(workflow)[True]) == set(payloads)  # YAML reads `on:` as True
    paths = {tuple(p.split(".")) for p in re.findall(r"github\.event\.([\w.\[\]]+)", workflow)}
    assert len(paths) >= 8
    for path in sorted(paths):
        carrying = [e for e, payload in payloads.items() if path[0] in payload]
        assert carrying, f"github.event.{'.'.join(path)}: in no event the workflow runs on"
        for event in carrying:
            assert resolves(payloads[event], list(path)), f"{event} has no {'.'.join(path)}"
    run = payloads["workflow_run"]["workflow_run"]
    assert run["event"] == "pull_request_review" and run["conclusion"] == "success"
    reviewed = payloads["workflow_run"]["workflow_run"]["pull_requests"][0]["head"]["sha"]
    assert run["head_sha"] == reviewed  # the head the review was given on


def test_a_webhook_payload_github_does_not_send_is_caught(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    github.fake.review(number, "grace")
    payload = github.fake.review_event(number)
    payload["review"]["state"] = "APPROVED"  # the REST API's spelling, not the webhook's
    del payload["sender"]
    assert sorted(webhook_problems("pull_request_review", payload)) == [
        "at ['review']['state']: 'APPROVED' is not one of"
        " ['commented', 'changes_requested', 'approved', 'dismissed']",
        "at the body: 'sender' is a required property",
    ]
