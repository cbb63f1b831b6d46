"""The JSON objects the fake GitHub answers with, whole as GitHub documents them.

GitHub's REST description requires every field of these objects (a pull request's head
repository included), so each is built here once from what the fake keeps; the fake checks
each answer against the description (tests/forge/github_openapi.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class Site:
    api: str  # the API's root, http://127.0.0.1:PORT/api/v3
    web: str  # the web's, http://127.0.0.1:PORT


def user_id(login: str) -> int:
    return sum(map(ord, login))


def user(site: Site, login: str) -> Json:
    """A simple-user."""
    url = f"{site.api}/users/{login}"
    return {
        "login": login,
        "id": user_id(login),
        "node_id": f"U_{user_id(login)}",
        "avatar_url": f"{site.web}/avatars/{login}",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{site.web}/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": "Bot" if login.endswith("[bot]") else "User",
        "site_admin": False,
    }


def public_user(site: Site, login: str, at: str) -> Json:
    """GET /user's answer when the token may not read private profile fields."""
    return {
        **user(site, login),
        "user_view_type": "public",
        "name": None,
        "company": None,
        "blog": None,
        "location": None,
        "email": None,
        "hireable": None,
        "bio": None,
        "public_repos": 0,
        "public_gists": 0,
        "followers": 0,
        "following": 0,
        "created_at": at,
        "updated_at": at,
    }


_REPO_TEMPLATES = {
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}


def repository(
    site: Site, full_name: str, repo_id: int, fork: bool, at: str, default_branch: str = "main"
) -> Json:
    """A repository (a pull request's head and base each carry one)."""
    owner, name = full_name.split("/")
    url = f"{site.api}/repos/{full_name}"
    return {
        "id": repo_id,
        "node_id": f"R_{repo_id}",
        "name": name,
        "full_name": full_name,
        "license": None,
        "owner": user(site, owner),
        "private": True,
        "html_url": f"{site.web}/{full_name}",
        "description": None,
        "fork": fork,
        "url": url,
        **{key: url + tail for key, tail in _REPO_TEMPLATES.items()},
        "git_url": f"{site.web}/{full_name}.git".replace("http", "git", 1),
        "ssh_url": f"git@127.0.0.1:{full_name}.git",
        "clone_url": f"{site.web}/{full_name}.git",
        "svn_url": f"{site.web}/{full_name}",
        "mirror_url": None,
        "homepage": None,
        "language": None,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 0,
        "default_branch": default_branch,
        "open_issues": 0,
        "open_issues_count": 0,
        "has_issues": True,
        "has_projects": False,
        "has_wiki": False,
        "has_pages": False,
        "has_downloads": False,
        "archived": False,
        "disabled": False,
        "is_template": False,
        "web_commit_signoff_required": False,
        "topics": [],
        "visibility": "private",
        "custom_properties": {},
        "pushed_at": at,
        "created_at": at,
        "updated_at": at,
    }


def _links(**hrefs: str) -> Json:
    return {key: {"href": href} for key, href in hrefs.items()}


def pull_request(
    site: Site,
    repo_url: str,
    web_url: str,
    pull: Json,
    head: Json,
    base: Json,
    association: str,
    auto_merge: Json | None,
) -> Json:
    """A pull-request: `pull` the fake's record, `head` and `base` {ref, sha, repo, owner}."""
    number = pull["number"]
    url = f"{repo_url}/pulls/{number}"
    html = f"{web_url}/pull/{number}"
    issue = f"{repo_url}/issues/{number}"
    statuses = f"{repo_url}/statuses/{head['sha']}"
    closed = pull["state"] == "closed"
    return {
        "url": url,
        "id": 1000 + number,
        "node_id": f"PR_{number}",
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": issue,
        "commits_url": f"{url}/commits",
        "review_comments_url": f"{url}/comments",
        "review_comment_url": f"{repo_url}/pulls/comments{{/number}}",
        "comments_url": f"{issue}/comments",
        "statuses_url": statuses,
        "number": number,
        "state": pull["state"],
        "locked": False,
        "title": pull["title"],
        "user": user(site, pull["user"]),
        "body": pull["body"] or None,
        "labels": [],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": pull["at"],
        "updated_at": pull.get("closed_at") or pull["at"],
        "closed_at": pull.get("closed_at") if closed else None,
        "merged_at": pull.get("closed_at") if pull["merged"] else None,
        "merge_commit_sha": pull.get("merge_sha"),
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": _branch(site, head),
        "base": _branch(site, base),
        "_links": _links(
            self=url,
            html=html,
            issue=issue,
            comments=f"{issue}/comments",
            review_comments=f"{url}/comments",
            review_comment=f"{repo_url}/pulls/comments{{/number}}",
            commits=f"{url}/commits",
            statuses=statuses,
        ),
        "author_association": association,
        "auto_merge": auto_merge,
        "draft": False,
        "merged": pull["merged"],
        "mergeable": None if closed else True,
        "rebaseable": None if closed else True,
        "mergeable_state": "unknown" if closed else "clean",
        "merged_by": user(site, pull["merged_by"]) if pull["merged"] else None,
        "comments": 0,
        "review_comments": 0,
        "maintainer_can_modify": False,
        "commits": 1,
        "additions": 0,
        "deletions": 0,
        "changed_files": 0,
    }


def _branch(site: Site, branch: Json) -> Json:
    return {
        "label": f"{branch['owner']}:{branch['ref']}",
        "ref": branch["ref"],
        "sha": branch["sha"],
        "user": user(site, branch["owner"]),
        "repo": branch["repo"],
    }


def auto_merge(site: Site, enabled_by: str, title: str, number: int) -> Json:
    return {
        "enabled_by": user(site, enabled_by),
        "merge_method": "merge",
        "commit_title": f"{title} (#{number})",
        "commit_message": "",
    }


def issue_comment(
    site: Site, repo_url: str, web_url: str, comment_id: int, comment: Json, association: str
) -> Json:
    return {
        "id": comment_id,
        "node_id": f"IC_{comment_id}",
        "url": f"{repo_url}/issues/comments/{comment_id}",
        "html_url": f"{web_url}/pull/{comment['issue']}#issuecomment-{comment_id}",
        "body": comment["body"],
        "user": user(site, comment["user"]),
        "created_at": comment["at"],
        "updated_at": comment.get("edited_at", comment["at"]),
        "issue_url": f"{repo_url}/issues/{comment['issue']}",
        "author_association": association,
        "performed_via_github_app": None,
        "reactions": _reactions(f"{repo_url}/issues/comments/{comment_id}/reactions"),
    }


def review(
    site: Site, repo_url: str, web_url: str, number: int, record: Json, association: str
) -> Json:
    html = f"{web_url}/pull/{number}#pullrequestreview-{record['id']}"
    return {
        "id": record["id"],
        "node_id": f"PRR_{record['id']}",
        "user": user(site, record["user"]),
        "body": record["body"],
        "state": record["state"],
        "html_url": html,
        "pull_request_url": f"{repo_url}/pulls/{number}",
        "_links": _links(html=html, pull_request=f"{repo_url}/pulls/{number}"),
        "submitted_at": record["submitted_at"],
        "commit_id": record["commit_id"],
        "author_association": association,
    }


def integration(site: Site, app_id: int, slug: str, at: str) -> Json:
    """A GitHub App (GET /app, and a check run's app)."""
    return {
        "id": app_id,
        "slug": slug,
        "node_id": f"A_{app_id}",
        "client_id": f"Iv1.{app_id:016x}",
        "owner": user(site, "acme"),
        "name": slug,
        "description": None,
        "external_url": f"{site.web}/apps/{slug}",
        "html_url": f"{site.web}/apps/{slug}",
        "created_at": at,
        "updated_at": at,
        "permissions": {"checks": "write", "contents": "write", "pull_requests": "write"},
        "events": [],
    }


def check_run(site: Site, repo_url: str, web_url: str, run_id: int, run: Json) -> Json:
    output = run.get("output") or {}
    completed = run["status"] == "completed"
    return {
        "id": run_id,
        "head_sha": run["head_sha"],
        "node_id": f"CR_{run_id}",
        "external_id": "",
        "url": f"{repo_url}/check-runs/{run_id}",
        "html_url": f"{web_url}/runs/{run_id}",
        "details_url": f"{web_url}/runs/{run_id}",
        "status": run["status"],
        "conclusion": run.get("conclusion"),
        "started_at": run["at"],
        "completed_at": run["at"] if completed else None,
        "output": {
            "title": output.get("title"),
            "summary": output.get("summary"),
            "text": output.get("text"),
            "annotations_count": 0,
            "annotations_url": f"{repo_url}/check-runs/{run_id}/annotations",
        },
        "name": run["name"],
        "check_suite": {"id": 1},
        "app": integration(site, 15368, "github-actions", run["at"]),
        "pull_requests": [],
    }


def collaborator_permission(site: Site, login: str, level: str) -> Json:
    return {
        "permission": level,
        "role_name": level,
        "user": {**user(site, login), "role_name": level},
    }


def validation_failed(
    resource: str, field: str, code: str, docs: str, message: str | None = None
) -> Json:
    """A 422's body: GitHub's validation-error, naming the field."""
    error = {"resource": resource, "field": field, "code": code}
    return {
        "message": "Validation Failed",
        "errors": [error if message is None else {**error, "message": message}],
        "documentation_url": f"https://docs.github.com/rest/{docs}",
        "status": "422",
    }


# -- webhook payloads (their schemas are @octokit/webhooks-schemas', not the REST API's) -----

# what a pull request's REST answer has beyond a webhook's simple-pull-request
_PULL_DETAILS = (
    "additions",
    "changed_files",
    "comments",
    "commits",
    "deletions",
    "maintainer_can_modify",
    "mergeable",
    "mergeable_state",
    "merged",
    "merged_by",
    "rebaseable",
    "review_comments",
)


def review_submitted(site: Site, repository: Json, pull: Json, review: Json, sender: str) -> Json:
    """The `pull_request_review` event, action `submitted`, from the REST objects: a
    webhook's review state is lower case ("approved"), the REST API's upper ("APPROVED")."""
    return {
        "action": "submitted",
        "review": {**review, "state": review["state"].lower()},
        "pull_request": {k: v for k, v in pull.items() if k not in _PULL_DETAILS},
        "repository": repository,
        "sender": user(site, sender),
    }


def comment_created(site: Site, repository: Json, issue: Json, comment: Json, sender: str) -> Json:
    """The `issue_comment` event, action `created`, on a pull request's issue."""
    return {
        "action": "created",
        "issue": issue,
        "comment": comment,
        "repository": repository,
        "sender": user(site, sender),
    }


def pull_issue(site: Site, repo_url: str, pull: Json) -> Json:
    """A pull request seen as an issue (what an issue comment's event carries)."""
    number = pull["number"]
    return {
        "url": f"{repo_url}/issues/{number}",
        "repository_url": repo_url,
        "labels_url": f"{repo_url}/issues/{number}/labels{{/name}}",
        "comments_url": f"{repo_url}/issues/{number}/comments",
        "events_url": f"{repo_url}/issues/{number}/events",
        "html_url": pull["html_url"],
        "id": 2000 + number,
        "node_id": f"I_{number}",
        "number": number,
        "title": pull["title"],
        "user": pull["user"],
        "labels": [],
        "state": pull["state"],
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": 0,
        "created_at": pull["created_at"],
        "updated_at": pull["updated_at"],
        "closed_at": pull["closed_at"],
        "author_association": pull["author_association"],
        "active_lock_reason": None,
        "body": pull["body"],
        "reactions": _reactions(f"{repo_url}/issues/{number}/reactions"),
        "pull_request": {
            "url": pull["url"],
            "html_url": pull["html_url"],
            "diff_url": pull["diff_url"],
            "patch_url": pull["patch_url"],
            "merged_at": pull["merged_at"],
        },
    }


def _reactions(url: str) -> Json:
    counts = ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes")
    return {"url": url, "total_count": 0, **dict.fromkeys(counts, 0)}


def full_repository(repository: Json) -> Json:
    """`GET /repos/{owner}/{repo}`: the repository and the counts only this answer carries."""
    return {**repository, "has_discussions": False, "network_count": 0, "subscribers_count": 0}
