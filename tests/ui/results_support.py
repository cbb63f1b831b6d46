"""What the results explorer's tests share: this repository's head, loaded once per test run
(its results, catalog and recipes), and a page rendered as the server would render it."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from functools import cache

from reconciler.spec.loader import open_repo
from reconciler.spec.repo import Repo
from reconciler.ui.pages import ROUTES
from reconciler.ui.site import Links, render
from reconciler.ui.state import UiState
from tests.conftest import ROOT

RESULT_ROUTES = [r for r in ROUTES if r.name in ("results", "result", "compare")]


@cache
def head() -> Repo:
    repo = open_repo(ROOT)
    assert not repo.errors, repo.problems
    return repo


def state(repo: Repo | None = None) -> UiState:
    return UiState(repo=repo or head(), label="denv")


def small(every: int = 30) -> Repo:
    """The head with every `every`-th result only: an export of it is quick to write."""
    repo = copy.copy(head())
    repo.results = head().results[::every]
    return repo


def page(
    name: str, params: Mapping[str, str], seen: UiState | None = None, export: bool = False
) -> tuple[int, str]:
    """(status, HTML) of a route's page."""
    seen = seen or state()
    route = next(r for r in ROUTES if r.name == name)
    shown = route.view(seen, dict(params))
    return shown.status, render(shown, seen, Links(ROUTES, export), ROUTES, False)


def table_ids(html: str, part: str) -> list[str]:
    """The result ids of a ranking table's rows ('ranked' or 'missed'), in order."""
    found = re.search(rf'<table class="ranking" data-part="{part}">(.*?)</table>', html, re.S)
    return re.findall(r'<tr data-result="([^"]+)"', found.group(1)) if found else []


def points(html: str) -> dict[str, str]:
    """The Pareto chart's points: result id -> the tag of its link."""
    tags = re.finditer(r'<a href="[^"]+" class="point[^>]*data-result="([^"]+)"[^>]*>', html)
    return {m.group(1): m.group(0) for m in tags}
