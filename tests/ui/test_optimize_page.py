"""The optimizer's page and a local-forge pull request's page over a real look at chat-8b on
the local fleet: a study written by the optimizer's own store with a verified candidate that
became a pull request of the local forge, and that pull request with a comment, a check and
an approval that does not count."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pygit2
import pytest

from reconciler.forge.local import LocalForge
from reconciler.forge.models import CheckRun, Conclusion
from reconciler.optimize.candidates import Status, StudyState, table
from reconciler.optimize.state import StateStore, state_home
from reconciler.rollout.state import PromotionPr, RolloutState, StageRecord
from reconciler.ui.export import export
from reconciler.ui.pages import ROUTES
from reconciler.ui.pulls import mentioned
from reconciler.ui.site import Links, NotFoundPage, render
from reconciler.ui.state import UiState
from tests.optimize.states import row, study_state
from tests.reconcile.conftest import GitRepo, git_repo
from tests.ui.looked import look

__all__ = ["git_repo"]  # the fixture


def study(pr: int) -> StudyState:
    return study_state(
        row("current", Status.VERIFIED, 10.0),
        [
            row("c-fp8", Status.REJECTED, 15.0, reason="parity", parity_passed=False),
            row("c-win", Status.VERIFIED, 13.0, parity_passed=True, pr=pr),
        ],
        state="finished",
        trials=12,
    )


@pytest.fixture
def looked(git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> UiState:
    monkeypatch.setenv("DENV_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DENV_OPTIMIZE_HOME", raising=False)
    monkeypatch.delenv("DENV_FORGE", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    git_repo.git.branches.local.create(
        "denv/optimize-chat-8b", git_repo.git.head.peel(pygit2.Commit)
    )
    forge = LocalForge(git_repo.path, user="ada")
    pr = forge.open_pr(
        "denv/optimize-chat-8b",
        "chat-8b: c-win for canary",
        "Goodput **+30%**.\n\n<script>alert(1)</script>",
        author="denv-bot",
    )
    forge.comment(pr.number, "<!-- denv:optimize -->\n### Candidate c-win\n| a | b |", "denv-bot")
    forge.set_check(
        pr.head_sha,
        CheckRun(
            name="denv/parity", title="20 of 20 agree", summary="", conclusion=Conclusion.SUCCESS
        ),
    )
    forge.approve(pr.number, user="grace")  # not counted: main names no signers to check it by
    StateStore(state_home(git_repo.path, os.environ)).save(study(pr.number))
    return look(git_repo.path, git_repo.cache)


def page(state: UiState, route: str, **params: str) -> str:
    found = {r.name: r for r in ROUTES}[route]
    with state.lock:
        return render(found.view(state, params), state, Links(ROUTES), ROUTES, fragment=True)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def rows(html: str, attribute: str) -> dict[str, str]:
    found = re.findall(rf'<tr {attribute}="([^"]+)".*?</tr>', html, re.S)
    bodies = re.findall(rf'<tr {attribute}="[^"]+".*?</tr>', html, re.S)
    return dict(zip(found, [text(b) for b in bodies], strict=True))


def test_the_optimizer_page_shows_the_study_and_its_candidates_table(looked: UiState) -> None:
    html = page(looked, "optimize")
    assert rows(html, "data-study") == {
        "chat-8b/canary": "chat-8b/canary throughput finished 12 c-win #1 2026-12-01 12:00:00 UTC"
    }
    candidates = rows(html, "data-candidate")
    expected = table(looked.studies[0])  # the CLI's own table, cell for cell, with the PR
    assert list(candidates) == [cells[0] for cells in expected] == ["current", "c-win", "c-fp8"]
    for cells in expected:
        assert candidates[cells[0]].startswith(text(" ".join(cells)))
    assert candidates["c-win"].endswith("verified (PR #1) PR #1")
    assert candidates["c-fp8"].endswith("FAIL rejected (parity) —")
    assert '<a href="/pulls/1">PR #1</a>' in html and '<a href="/pulls/1">#1</a>' in html


def test_a_local_pull_request_shows_its_state_approvals_checks_and_comments(
    looked: UiState,
) -> None:
    html = page(looked, "pull", number="1")
    assert "<h1>#1 chat-8b: c-win for canary</h1>" in html
    shown = text(html)
    assert "State open" in shown and "Branches denv/optimize-chat-8b → main" in shown
    assert "Approvals 0 of 1 not counted: grace: main has no policies/allowed_signers" in shown
    assert "Checks denv/parity: success — 20 of 20 agree" in shown
    # markdown as written, escaped: nothing in a description or comment runs on the page
    assert "Goodput **+30%**.\n\n&lt;script&gt;alert(1)&lt;/script&gt;</pre>" in html
    assert "<script>alert" not in html
    assert (
        "[optimize]" in html
        and '<pre class="markdown">### Candidate c-win\n| a | b |</pre>' in html
    )
    assert "denv:optimize" not in html  # the comment's marker line is not shown


def test_an_unknown_pull_request_is_not_found(looked: UiState) -> None:
    with pytest.raises(NotFoundPage, match=r"no local pull request #7 \(known: #1\)"):
        page(looked, "pull", number="7")
    with pytest.raises(NotFoundPage, match="not a pull request's number"):
        page(looked, "pull", number="x")


def test_on_github_a_pr_links_to_github(looked: UiState) -> None:
    looked.github = "https://github.com/acme/models"
    html = page(looked, "optimize")
    assert '<a href="https://github.com/acme/models/pull/1">PR #1</a>' in html
    assert "/pulls/1" not in html


def test_the_overview_and_release_pages_link_local_prs_to_their_page(looked: UiState) -> None:
    assert looked.overview is not None and looked.root is not None
    local = f"file://{looked.root.resolve()}#pr/1"  # the local forge's url: no page
    looked.overview.rollout = RolloutState(
        stages={
            "chat-8b/canary": StageRecord(
                promotion=PromotionPr(number=1, url=local, revision="a" * 40, stage="prod"),
                rollback_pr=1,
            )
        }
    )
    assert '<a href="/pulls/1">PR #1</a>' in page(looked, "release", name="chat-8b")
    assert 'rollback in <a href="/pulls/1">PR #1</a>' in page(looked, "overview")
    assert mentioned(looked) == [1]
    looked.overview.rollout.stages["chat-8b/canary"].rollback_url = "https://github.com/a/b/pull/1"
    assert 'rollback in <a href="https://github.com/a/b/pull/1">PR #1</a>' in page(
        looked, "overview"
    )


def test_the_export_writes_the_pages_of_the_prs_the_others_mention(
    looked: UiState, tmp_path: Path
) -> None:
    written = {p.name for p in export(looked, ROUTES, tmp_path / "site")}
    assert {"optimize.html", "pull-1.html"} <= written
    assert '<a href="pull-1.html">PR #1</a>' in (tmp_path / "site" / "optimize.html").read_text()
    assert (
        "<h1>#1 chat-8b: c-win for canary</h1>" in (tmp_path / "site" / "pull-1.html").read_text()
    )
