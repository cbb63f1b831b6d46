"""Pull requests on the UI's pages: where a PR number links (GitHub's page, or the UI's own
page of a local-forge pull request), and that page — title, state, head and base, approvals,
checks and comments (markdown, shown as written: escaped, preformatted).

The pull request's page reads the local forge (forge/local.py, read-only) when it is asked
for: one record file, where a look at every pull request on each refresh would cost more."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.errors import DenvError, NotFound
from reconciler.forge.markers import read_marker
from reconciler.ui.site import NotFoundPage, Page
from reconciler.ui.state import UiState


def pr_link(state: UiState, number: int | None, url: str | None = None) -> dict[str, Any] | None:
    """A PR as a page links it (templates/_pr.html): `url` where it is GitHub's page, the
    GitHub repository's pull request where the forge is GitHub, else `local`: the UI's own
    page of the local forge's pull request, where --repo is a folder."""
    if number is None:
        return None
    if url is None or not url.startswith("https://"):
        url = f"{state.github}/pull/{number}" if state.github else None
    return {"number": number, "url": url, "local": url is None and state.root is not None}


def mentioned(state: UiState) -> list[int]:
    """The local forge's pull requests that the other pages link: promotions, rollbacks and
    pins of the releases, and the optimizer's candidates (an export writes their pages)."""
    if state.root is None or state.github:
        return []
    found: set[int | None] = set()
    seen = state.overview
    if seen is not None and seen.rollout is not None:
        for record in seen.rollout.stages.values():
            if record.promotion is not None and not record.promotion.url.startswith("https://"):
                found.add(record.promotion.number)
            if not (record.rollback_url or "").startswith("https://"):
                found.add(record.rollback_pr)
    if seen is not None:
        for pins in seen.repo.promotions.values():
            found.update(pin.pr for pin in pins.promotions.values())
    found.update(row.pr for study in state.studies for row in study.candidates)
    return sorted(n for n in found if n is not None)


def pull(state: UiState, params: Mapping[str, str]) -> Page:
    from reconciler.forge.local import LocalForge

    try:
        number = int(params["number"])
    except ValueError:
        raise NotFoundPage(f"'{params['number']}' is not a pull request's number") from None
    if state.root is None:
        where = f" (they are on GitHub: {state.github}/pulls)" if state.github else ""
        raise NotFoundPage(f"this UI reads no local forge: --repo is not a folder{where}")
    try:
        forge = LocalForge(state.root)
        pr = forge.pull_request(number)
    except NotFound as exc:
        raise NotFoundPage(str(exc)) from None
    gates = state.repo.policies.gates if state.repo is not None else None
    approvers = gates.approvers if gates is not None else []
    problems = []
    try:
        approvals = forge.approvals(number, approvers)
    except DenvError as exc:  # the base's allowed signers do not parse
        approvals, problems = None, [f"approvals not counted: {exc}"]
    comments = []
    for comment in forge.comments(number):
        kind = read_marker(comment.body)  # a denv comment: its marker line is not shown
        body = comment.body.partition("\n")[2] if kind else comment.body
        comments.append({"comment": comment, "kind": kind[0] if kind else None, "body": body})
    return Page(
        "pull.html",
        f"Pull request #{number}",
        {
            "pr": pr,
            "approvals": approvals,
            "required": gates.default_approvals if gates is not None else None,
            "checks": forge.checks(pr.head_sha),
            "comments": comments,
            "problems": problems,
        },
    )


def exported(state: UiState) -> list[dict[str, str]]:
    """The pages an export writes: the pull requests the other pages mention that the local
    forge has (a pin may name another forge's)."""
    from reconciler.forge.local import LocalForge

    if state.root is None:
        return []
    known = set(LocalForge(state.root).store.numbers())
    return [{"number": str(n)} for n in mentioned(state) if n in known]
