"""A stateful fake of GitHub's REST API on loopback, for PyGithub to talk to over real HTTP.

It answers only the endpoints denv uses, under a GitHub Enterprise style prefix (`/api/v3`,
GraphQL at `/api/graphql`), and records anything else in `unexpected`, which the fixture
turns into a test failure. Branches live in a real bare git repository (the "remote" the
bot pushes to), so a pull request's head is whatever was pushed, and a merge is a real
merge commit. `fail(...)` queues faults (a 502, a rate limit) for the next matching requests.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pygit2

from tests.forge import github_shapes as shapes
from tests.forge.github_graphql import answered, read_mutation
from tests.forge.github_openapi import rest_description, webhook_problems

API = "/api/v3"
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
Json = dict[str, Any]


Answer = tuple[int, Any, dict[str, str]]  # status, JSON body (None: no body), headers


@dataclass(frozen=True)
class Request:
    login: str  # whose token it carries
    match: re.Match[str]  # the route's groups
    query: dict[str, str]
    payload: Json


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    headers: dict[str, str]
    message: str
    times: int


@dataclass
class App:
    app_id: str
    public_key: str
    installation_id: int
    login: str  # the installation token acts as this bot user


@dataclass
class FakeGitHub:
    bare: Path  # the repository's git data: branches are read from and merged into it
    owner: str = "acme"
    name: str = "fleet"
    default_branch: str = "main"
    tokens: dict[str, str] = field(default_factory=dict)  # token -> login
    # tokens that are Actions' GITHUB_TOKEN: they write as github-actions[bot], and GET /user
    # answers them 403, as GitHub does an integration's token
    actions_tokens: set[str] = field(default_factory=set)
    permissions: dict[str, str] = field(default_factory=dict)  # login -> admin/write/read
    teams: dict[str, set[str]] = field(default_factory=dict)  # "org/slug" -> logins
    app: App | None = None
    pulls: dict[int, Json] = field(default_factory=dict)
    comments: dict[int, Json] = field(default_factory=dict)
    reviews: dict[int, list[Json]] = field(default_factory=dict)
    check_runs: dict[int, Json] = field(default_factory=dict)
    auto_merge: set[int] = field(default_factory=set)
    faults: list[Fault] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    seen_headers: list[str] = field(default_factory=list)
    url: str = ""
    _ids: int = 100
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        # in the test's thread, not the server's: a missing description skips (fails in CI)
        # the test that made the fake, and the first request does not pay for reading it
        rest_description()

    # -- what tests arrange ----------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return self.url + API

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def fail(
        self,
        method: str,
        path: str,
        status: int,
        headers: dict[str, str] | None = None,
        message: str = "Server Error",
        times: int = 1,
    ) -> None:
        self.faults.append(Fault(method, re.compile(path), status, headers or {}, message, times))

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _now(self) -> str:
        # one second per event: ordering is deterministic and needs no real time
        return _iso(EPOCH + timedelta(seconds=self._ids))

    def open_pull(
        self, head: str, title: str, author: str, base: str = "main", fork: bool = False
    ) -> int:
        with self._lock:
            return self._create_pull(head, base, title, "", author, fork)

    def comment(self, number: int, user: str, body: str) -> int:
        with self._lock:
            return self._add_comment(number, user, body)

    def review(
        self, number: int, user: str, state: str = "APPROVED", commit: str | None = None
    ) -> None:
        with self._lock:
            sha = commit or self._head_sha(self.pulls[number])
            self.reviews.setdefault(number, []).append(
                {
                    "id": self._next_id(),
                    "user": user,
                    "state": state,
                    "commit_id": sha,
                    "submitted_at": self._now(),
                    "body": "",
                }
            )

    # -- webhook payloads, as GitHub would send them for what happened here ----------------

    def review_event(self, number: int) -> Json:
        """`pull_request_review` (submitted) for the pull request's latest review."""
        with self._lock:
            record = self.reviews[number][-1]
            payload = shapes.review_submitted(
                self._site,
                self._repo_json(),
                self._pull_json(self.pulls[number]),
                self._review_json(number, record),
                record["user"],
            )
        return _checked_webhook("pull_request_review", payload)

    def comment_event(self, comment_id: int) -> Json:
        """`issue_comment` (created) for a comment on a pull request."""
        with self._lock:
            comment = self.comments[comment_id]
            pull = self._pull_json(self.pulls[comment["issue"]])
            payload = shapes.comment_created(
                self._site,
                self._repo_json(),
                shapes.pull_issue(self._site, self._repo_url(), pull),
                self._comment_json(comment_id),
                comment["user"],
            )
        return _checked_webhook("issue_comment", payload)

    def comment_bodies(self, number: int) -> list[str]:
        return [c["body"] for c in self.comments.values() if c["issue"] == number]

    # -- JSON shapes -----------------------------------------------------------------------

    @property
    def _site(self) -> shapes.Site:
        return shapes.Site(api=self.api_url, web=self.url)

    def _repo_url(self) -> str:
        return f"{self.api_url}/repos/{self.full_name}"

    def _web_url(self) -> str:
        return f"{self.url}/{self.full_name}"

    def _user(self, login: str) -> Json:
        return shapes.user(self._site, login)

    def _association(self, login: str) -> str:
        """How GitHub relates a user to the repository (author_association)."""
        if login == self.owner:
            return "OWNER"
        return "COLLABORATOR" if self.permissions.get(login, "read") != "read" else "NONE"

    def _repo_json(self, full_name: str | None = None) -> Json:
        full = full_name or self.full_name
        ours = full == self.full_name
        return shapes.repository(
            self._site, full, 1 if ours else 2, not ours, _iso(EPOCH), self.default_branch
        )

    def _branch_tip(self, branch: str) -> str | None:
        repo = pygit2.Repository(str(self.bare))
        ref = repo.references.get(f"refs/heads/{branch}")
        return None if ref is None else str(ref.target)

    def _head_sha(self, pull: Json) -> str:
        if pull["merged"]:
            return str(pull["head_sha"])
        return self._branch_tip(pull["head"]) or str(pull["head_sha"])

    def _pull_json(self, pull: Json) -> Json:
        number = pull["number"]
        owner = pull["user"] if pull["fork"] else self.owner
        head_repo = f"{pull['user']}/{self.name}" if pull["fork"] else self.full_name
        head = {
            "ref": pull["head"],
            "sha": self._head_sha(pull),
            "owner": owner,
            "repo": self._repo_json(head_repo),
        }
        base = {
            "ref": pull["base"],
            "sha": self._branch_tip(pull["base"]),
            "owner": self.owner,
            "repo": self._repo_json(),
        }
        auto = pull.get("auto_merge_by")
        return shapes.pull_request(
            self._site,
            self._repo_url(),
            self._web_url(),
            pull,
            head,
            base,
            self._association(pull["user"]),
            None if auto is None else shapes.auto_merge(self._site, auto, pull["title"], number),
        )

    def _comment_json(self, comment_id: int) -> Json:
        comment = self.comments[comment_id]
        return shapes.issue_comment(
            self._site,
            self._repo_url(),
            self._web_url(),
            comment_id,
            comment,
            self._association(comment["user"]),
        )

    def _review_json(self, number: int, record: Json) -> Json:
        association = self._association(record["user"])
        return shapes.review(
            self._site, self._repo_url(), self._web_url(), number, record, association
        )

    def _check_json(self, run_id: int) -> Json:
        run = self.check_runs[run_id]
        return shapes.check_run(self._site, self._repo_url(), self._web_url(), run_id, run)

    # -- state changes ---------------------------------------------------------------------

    def _create_pull(
        self, head: str, base: str, title: str, body: str, author: str, fork: bool = False
    ) -> int:
        number = max(self.pulls, default=0) + 1
        sha = self._branch_tip(head)
        assert sha is not None, f"no branch {head} in the fake's repository"
        self.pulls[number] = {
            "number": number,
            "head": head,
            "base": base,
            "title": title,
            "body": body,
            "user": author,
            "state": "open",
            "merged": False,
            "head_sha": sha,
            "fork": fork,
            "at": self._now(),
        }
        return number

    def _add_comment(self, number: int, user: str, body: str) -> int:
        comment_id = self._next_id()
        self.comments[comment_id] = {"issue": number, "user": user, "body": body, "at": self._now()}
        return comment_id

    def _merge(self, pull: Json, sha: str | None, login: str) -> tuple[int, Json]:
        head = self._head_sha(pull)
        if sha is not None and sha != head:
            return 409, {"message": "Head branch was modified. Review and try the merge again."}
        repo = pygit2.Repository(str(self.bare))
        base_ref = repo.references[f"refs/heads/{pull['base']}"]
        index = repo.merge_commits(base_ref.target, head)
        if index.conflicts is not None:
            return 405, {"message": "Pull Request is not mergeable"}
        signature = pygit2.Signature("GitHub", "noreply@github.com")
        head_label = f"{self.owner}/{pull['head']}"
        message = f"Merge pull request #{pull['number']} from {head_label}\n\n{pull['title']}"
        merged = repo.create_commit(
            None,
            signature,
            signature,
            message,
            index.write_tree(repo),
            [base_ref.target, pygit2.Oid(hex=head)],
        )
        base_ref.set_target(merged)
        pull.update(
            state="closed",
            merged=True,
            head_sha=head,
            merge_sha=str(merged),
            merged_by=login,
            closed_at=self._now(),
        )
        return 200, {
            "sha": str(merged),
            "merged": True,
            "message": "Pull Request successfully merged",
        }

    # -- the HTTP side ---------------------------------------------------------------------

    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, Json | list[Any] | None, dict[str, str]]:
        """Answer a request, checked both ways against GitHub's REST description: a request
        GitHub does not document, or an answer that does not validate, is answered 500 and
        recorded in `unexpected` (a test failure) instead."""
        parts = urlsplit(target)
        path, query = parts.path, parse_qs(parts.query)
        if not path.startswith(API + "/"):  # GraphQL: not in the REST description
            return self._answer(method, path, query, headers, body)
        rest = rest_description()
        rest_path = path.removeprefix(API)
        found, request, problems = rest.check_request(method, rest_path, query, headers, body)
        if found is not None and not problems:
            status, data, extra = self._answer(method, path, query, headers, body)
            if status == 501:  # documented, but the fake does not answer it: in `unexpected`
                return status, data, extra
            problems = rest.check_response(found, request, status, data)
            if not problems:
                return status, data, extra
        with self._lock:
            self.unexpected.extend(problems)
        return 500, {"message": "the fake GitHub: " + "; ".join(problems)}, {}

    def _answer(
        self,
        method: str,
        path: str,
        queries: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[int, Json | list[Any] | None, dict[str, str]]:
        query = {k: v[0] for k, v in queries.items()}
        with self._lock:
            self.requests.append(f"{method} {path}")
            self.seen_headers.append(json.dumps(headers))
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and fault.path.search(path):
                    fault.times -= 1
                    return fault.status, {"message": fault.message}, fault.headers
            payload = json.loads(body) if body else {}
            if path == "/api/v3/app" or path.startswith("/api/v3/app/"):
                return self._app_route(method, path, headers)
            token = headers.get("authorization", "").partition(" ")[2]
            login = self.tokens.get(token)
            if token in self.actions_tokens:
                login = "github-actions[bot]"
            if login is None:
                return 401, {"message": "Bad credentials"}, {}
            for verb, pattern, handler in self._routes():
                found = re.fullmatch(pattern, path)
                if verb == method and found:
                    return handler(Request(login, found, query, payload))
            self.unexpected.append(f"{method} {path}")
            return 501, {"message": f"the fake does not answer {method} {path}"}, {}

    def _app_route(
        self, method: str, path: str, headers: dict[str, str]
    ) -> tuple[int, Json, dict[str, str]]:
        """The App's own endpoints, authenticated with its JWT: GET /app (who it is) and
        POST /app/installations/N/access_tokens."""
        found = re.fullmatch(r"/api/v3/app/installations/(\d+)/access_tokens", path)
        asks_who = method == "GET" and path == "/api/v3/app"
        scheme, _, token = headers.get("authorization", "").partition(" ")
        known = asks_who or (method == "POST" and found is not None)
        if not known or self.app is None or scheme.lower() != "bearer":
            self.unexpected.append(f"{method} {path}")
            return 501, {"message": "unexpected app request"}, {}
        claims = jwt.decode(token, self.app.public_key, algorithms=["RS256"])
        if str(claims["iss"]) != self.app.app_id:
            return 401, {"message": "A JSON web token could not be decoded"}, {}
        if asks_who:
            slug = self.app.login.removesuffix("[bot]")
            return 200, shapes.integration(self._site, int(self.app.app_id), slug, _iso(EPOCH)), {}
        assert found is not None
        if int(found[1]) != self.app.installation_id:
            return 401, {"message": "A JSON web token could not be decoded"}, {}
        installation_token = f"ghs_installation{self._next_id()}"
        self.tokens[installation_token] = self.app.login
        expires = _iso(datetime.now(UTC) + timedelta(hours=1))
        return 201, {"token": installation_token, "expires_at": expires}, {}

    def _routes(self) -> list[tuple[str, str, Callable[[Request], Answer]]]:
        repo = re.escape(f"{API}/repos/{self.full_name}")
        return [
            ("GET", rf"{repo}/pulls/(\d+)", self._get_pull),
            ("GET", rf"{repo}/pulls", self._list_pulls),
            ("POST", rf"{repo}/pulls", self._post_pull),
            ("PATCH", rf"{repo}/pulls/(\d+)", self._patch_pull),
            ("PUT", rf"{repo}/pulls/(\d+)/merge", self._put_merge),
            ("GET", rf"{repo}/pulls/(\d+)/reviews", self._list_reviews),
            ("GET", rf"{repo}/issues/(\d+)/comments", self._list_comments),
            ("POST", rf"{repo}/issues/(\d+)/comments", self._post_comment),
            ("PATCH", rf"{repo}/issues/comments/(\d+)", self._patch_comment),
            ("DELETE", rf"{repo}/issues/comments/(\d+)", self._delete_comment),
            ("GET", rf"{repo}/collaborators/([^/]+)/permission", self._permission),
            ("GET", rf"{repo}/commits/([0-9a-f]{{40}})/check-runs", self._list_checks),
            ("POST", rf"{repo}/check-runs", self._post_check),
            ("PATCH", rf"{repo}/check-runs/(\d+)", self._patch_check),
            ("GET", rf"{API}/orgs/([^/]+)/teams/([^/]+)/memberships/([^/]+)", self._membership),
            ("GET", rf"{API}/user", self._authenticated_user),
            ("GET", repo, self._get_repo),
            ("POST", r"/api/graphql", self._graphql),
        ]

    def _get_repo(self, r: Request) -> Answer:
        return 200, shapes.full_repository(self._repo_json()), {}

    def _authenticated_user(self, r: Request) -> Answer:
        if r.login == "github-actions[bot]":
            return 403, {"message": "Resource not accessible by integration"}, {}
        return 200, shapes.public_user(self._site, r.login, _iso(EPOCH)), {}

    def _pull_or_404(self, number: str) -> Json | None:
        return self.pulls.get(int(number))

    def _get_pull(self, r: Request) -> Answer:
        pull = self._pull_or_404(r.match[1])
        return (200, self._pull_json(pull), {}) if pull else (404, {"message": "Not Found"}, {})

    def _list_pulls(self, r: Request) -> Answer:
        found = [
            self._pull_json(pull)
            for pull in self.pulls.values()
            if r.query.get("state", "open") in ("all", pull["state"])
            and ("head" not in r.query or r.query["head"] == f"{self.owner}:{pull['head']}")
            and ("base" not in r.query or r.query["base"] == pull["base"])
        ]
        return 200, found, {}

    def _post_pull(self, r: Request) -> Answer:
        if self._branch_tip(r.payload["head"]) is None:
            invalid = shapes.validation_failed("PullRequest", "head", "invalid", "pulls/pulls")
            return 422, invalid, {}
        number = self._create_pull(
            r.payload["head"],
            r.payload["base"],
            r.payload["title"],
            r.payload.get("body") or "",
            r.login,
        )
        return 201, self._pull_json(self.pulls[number]), {}

    def _patch_pull(self, r: Request) -> Answer:
        pull = self.pulls[int(r.match[1])]
        pull.update({k: v for k, v in r.payload.items() if k in ("title", "body")})
        if r.payload.get("state") in ("open", "closed") and not pull["merged"]:
            pull["state"] = r.payload["state"]  # closing (or reopening) without a merge
            pull["closed_at"] = self._now() if pull["state"] == "closed" else None
        return 200, self._pull_json(pull), {}

    def _put_merge(self, r: Request) -> Answer:
        pull = self.pulls[int(r.match[1])]
        if self.permissions.get(r.login) not in ("admin", "write"):
            return 403, {"message": "Must have push access to merge"}, {}
        status, data = self._merge(pull, r.payload.get("sha"), r.login)
        return status, data, {}

    def _list_reviews(self, r: Request) -> Answer:
        number = int(r.match[1])
        return 200, [self._review_json(number, v) for v in self.reviews.get(number, [])], {}

    def _list_comments(self, r: Request) -> Answer:
        number = int(r.match[1])
        ids = [i for i, c in sorted(self.comments.items()) if c["issue"] == number]
        size, page = int(r.query.get("per_page", "30")), int(r.query.get("page", "1"))
        headers = {}
        if page * size < len(ids):  # GitHub pages with a Link header
            base = f"{self._repo_url()}/issues/{number}/comments"
            headers["Link"] = f'<{base}?per_page={size}&page={page + 1}>; rel="next"'
        return 200, [self._comment_json(i) for i in ids[(page - 1) * size : page * size]], headers

    def _post_comment(self, r: Request) -> Answer:
        if len(r.payload["body"]) > 65_536:
            return 422, _COMMENT_TOO_LONG, {}
        return (
            201,
            self._comment_json(self._add_comment(int(r.match[1]), r.login, r.payload["body"])),
            {},
        )

    def _patch_comment(self, r: Request) -> Answer:
        comment = self.comments[int(r.match[1])]
        if comment["user"] != r.login:
            return 403, {"message": "Resource not accessible by integration"}, {}
        if len(r.payload["body"]) > 65_536:
            return 422, _COMMENT_TOO_LONG, {}
        comment.update(body=r.payload["body"], edited_at=self._now())
        return 200, self._comment_json(int(r.match[1])), {}

    def _delete_comment(self, r: Request) -> Answer:
        del self.comments[int(r.match[1])]
        return 204, None, {}

    def _permission(self, r: Request) -> Answer:
        level = self.permissions.get(r.match[1], "read")
        return 200, shapes.collaborator_permission(self._site, r.match[1], level), {}

    def _list_checks(self, r: Request) -> Answer:
        runs = [
            self._check_json(i)
            for i in sorted(self.check_runs, reverse=True)  # newest first
            if self.check_runs[i]["head_sha"] == r.match[1]
            and r.query.get("check_name", self.check_runs[i]["name"]) == self.check_runs[i]["name"]
        ]
        return 200, {"total_count": len(runs), "check_runs": runs}, {}

    def _post_check(self, r: Request) -> Answer:
        run_id = self._next_id()
        self.check_runs[run_id] = {
            **{k: r.payload.get(k) for k in ("name", "head_sha", "status", "conclusion", "output")},
            "at": self._now(),
        }
        return 201, self._check_json(run_id), {}

    def _patch_check(self, r: Request) -> Answer:
        run = self.check_runs[int(r.match[1])]
        run.update({k: v for k, v in r.payload.items() if k in ("status", "conclusion", "output")})
        return 200, self._check_json(int(r.match[1])), {}

    def _membership(self, r: Request) -> Answer:
        org, team, user = r.match[1], r.match[2], r.match[3]
        if r.match[3] not in self.teams.get(f"{r.match[1]}/{r.match[2]}", set()):
            return 404, {"message": "Not Found"}, {}
        return (
            200,
            {
                "state": "active",
                "role": "member",
                "url": f"{self.api_url}/orgs/{org}/teams/{team}/memberships/{user}",
            },
            {},
        )

    def _graphql(self, r: Request) -> Answer:
        """GraphQL checked against GitHub's schema; the one mutation denv sends answered."""
        mutation = read_mutation(r.payload)
        if mutation.problems or mutation.name != "enablePullRequestAutoMerge":
            why = list(mutation.problems) or [f"unexpected mutation {mutation.name}"]
            self.unexpected.append(f"graphql {'; '.join(why)}: {r.payload.get('query')}")
            return 200, {"errors": [{"message": m} for m in why]}, {}
        node = mutation.variables["input"]["pullRequestId"]
        number = int(node.removeprefix("PR_"))
        self.auto_merge.add(number)
        self.pulls[number]["auto_merge_by"] = r.login
        actor = {
            "__typename": "User",
            "login": r.login,
            "avatarUrl": "",
            "resourcePath": f"/{r.login}",
            "url": f"{self.url}/{r.login}",
        }

        def enable(_info: object, input: dict[str, Any]) -> dict[str, Any]:
            return {"actor": actor, "clientMutationId": input.get("clientMutationId")}

        return 200, answered(r.payload, {"enablePullRequestAutoMerge": enable}), {}


_COMMENT_TOO_LONG = shapes.validation_failed(
    "IssueComment",
    "body",
    "custom",
    "issues/comments",
    "body is too long (maximum is 65536 characters)",
)


def _checked_webhook(event: str, payload: Json) -> Json:
    problems = webhook_problems(event, payload)
    if problems:
        raise AssertionError(f"the fake's {event} webhook is not GitHub's:\n" + "\n".join(problems))
    return payload


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
