"""The fake GitHub holds its GraphQL to GitHub's published schema: a request GitHub would refuse
(a field it does not have, a variable of the wrong type, a missing input) is refused and fails
the test, and its answer is shaped by the schema, so a field the fake forgot fails too."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.forge.conftest import TOKEN, GitHubSetup
from tests.forge.github_graphql import answered, read_mutation
from tests.forge.test_github import open_pr
from tests.forge.test_github_openapi import caught

ENABLE = (
    "mutation($input: EnablePullRequestAutoMergeInput!) {"
    " enablePullRequestAutoMerge(input: $input) { %s } }"
)
ACTOR = {"__typename": "User", "login": "a", "avatarUrl": "", "resourcePath": "/a", "url": "u"}


def request(selection: str = "clientMutationId", **given: Any) -> dict[str, Any]:
    return {"query": ENABLE % selection, "variables": {"input": {"pullRequestId": "PR_1", **given}}}


def test_a_request_github_takes_is_read() -> None:
    found = read_mutation(request(mergeMethod="SQUASH"))
    assert found.problems == () and found.name == "enablePullRequestAutoMerge"
    assert found.variables == {"input": {"pullRequestId": "PR_1", "mergeMethod": "SQUASH"}}


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (request("actorr { login }"), "Cannot query field 'actorr'"),
        (request(mergeMethod="FAST"), "Value 'FAST' does not exist in 'PullRequestMergeMethod'"),
        ({"query": ENABLE % "clientMutationId", "variables": {"input": {}}}, "pullRequestId"),
        ({"query": "query { viewer { login } }"}, "not one mutation"),
        ({"query": "mutation {"}, "not GraphQL"),
    ],
    ids=["unknown field", "bad enum", "missing input", "a query", "not GraphQL"],
)
def test_a_request_github_would_refuse_is_refused(payload: dict[str, Any], problem: str) -> None:
    found = read_mutation(payload)
    assert found.name is None and any(problem in p for p in found.problems), found.problems


def test_an_answer_the_schema_refuses_fails() -> None:
    payload = request("actor { login url } clientMutationId")

    def enable(_info: object, input: dict[str, Any]) -> dict[str, Any]:
        return {"actor": {**ACTOR, "login": None}, "clientMutationId": None}  # login is non-null

    with pytest.raises(AssertionError, match="not GitHub's"):
        answered(payload, {"enablePullRequestAutoMerge": enable})
    ok = answered(payload, {"enablePullRequestAutoMerge": lambda _i, input: {"actor": ACTOR}})
    assert ok == {"data": {"enablePullRequestAutoMerge": {"actor": {"login": "a", "url": "u"},
                                                          "clientMutationId": None}}}  # fmt: skip


def test_the_fake_refuses_and_records_a_bad_mutation(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    answer = requests.post(
        github.fake.api_url.replace("/api/v3", "/api/graphql"),
        headers={"Authorization": f"token {TOKEN}"},
        json=request("actorr { login }", pullRequestId=f"PR_{number}"),
        timeout=30,
    )
    assert "Cannot query field 'actorr'" in answer.json()["errors"][0]["message"]
    [recorded] = caught(github)
    assert recorded.startswith("graphql Cannot query field 'actorr'")
    assert number not in github.fake.auto_merge
