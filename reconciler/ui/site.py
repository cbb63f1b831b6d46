"""The UI's pages: their routes, how a page's links are written (a server's paths, or an
export's file names) and how a page is rendered. A view takes the latest state and the
request's parameters and returns a Page; it does no I/O."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from reconciler.ui.state import UiState


@dataclass(frozen=True)
class Page:
    template: str
    title: str
    context: dict[str, Any] = field(default_factory=dict)
    live: bool = True  # its content follows the fleets: the page refreshes it in place
    status: int = 200  # e.g. 400: the page says what was wrong with its parameters


View = Callable[[UiState, Mapping[str, str]], Page]


@dataclass(frozen=True)
class Route:
    name: str
    path: str  # aiohttp's pattern, e.g. /releases/{name}
    view: View
    nav: str = ""  # its label in the navigation bar, if it has one
    # the parameters of each page an export writes ({} once for a page without any)
    exported: Callable[[UiState], list[dict[str, str]]] = lambda state: [{}]


class NotFoundPage(Exception):
    """A view's answer to a name that is not there (HTTP 404); `back`: the route whose page
    lists what is there."""

    def __init__(self, what: str, back: str = "overview") -> None:
        super().__init__(what)
        self.what, self.back = what, back


def missing(state: UiState, found: NotFoundPage) -> Page:
    """The page for a name a view did not find. Before the first look has ended nothing is
    known yet: the page says it is still looking (200, refreshed in place until the look
    ends, then it is the page asked for), or that the look failed (503); after it, a 404
    page that says what is missing, with a link to where the names are."""
    if state.repo is None:
        status = 503 if state.error else 200
        return Page("missing.html", "Looking", {"found": None}, status=status)
    return Page("missing.html", "Not found", {"found": found}, live=False, status=404)


class Links:
    """Where a page's links point: the server's paths (`export=False`) or the export's
    flat file names, all in one folder so that they open from file://."""

    def __init__(self, routes: list[Route], export: bool = False) -> None:
        self.paths = {r.name: r.path for r in routes}
        self.export = export

    def __call__(self, route: str, /, **params: Any) -> str:
        path = self.paths[route]
        given = {k: str(v) for k, v in params.items() if v not in (None, "")}
        named = []  # the values in the path, in order
        for key in re.findall(r"{(\w+)}", path):
            named.append(given.pop(key))
            path = path.replace("{" + key + "}", quote(named[-1], safe=""))
        if not self.export:
            return path + ("?" + urlencode(given) if given else "")
        return export_name(route, named, given)

    def has(self, route: str) -> bool:
        return route in self.paths

    def static(self, file: str) -> str:
        return ("static/" if self.export else "/static/") + file


def export_name(name: str, named: list[str], query: Mapping[str, str]) -> str:
    """The file an export writes a page to: the overview is index.html; a page with values in
    its path is NAME-VALUE.html; query parameters, sorted, follow as --KEY-VALUE."""
    stem = "index" if name == "overview" else name
    for value in named:
        stem += "-" + _safe(value)
    for key, value in sorted(query.items()):
        stem += f"--{key}-{_safe(value)}"
    return stem + ".html"


def _safe(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", value)


_ENV: Environment | None = None


def environment() -> Environment:
    global _ENV
    if _ENV is None:
        _ENV = Environment(
            loader=PackageLoader("reconciler.ui", "templates"),
            autoescape=select_autoescape(["html"]),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        from reconciler.ui import words

        _ENV.filters.update(words.FILTERS)
    return _ENV


def render(page: Page, state: UiState, links: Links, routes: list[Route], fragment: bool) -> str:
    """The page as HTML; `fragment`: only its <main>'s content (the in-place refresh)."""
    template = environment().get_template(page.template)
    context = {
        **page.context,
        "state": state,
        "url": links,
        "static": links.static,
        "nav": [(r.nav, links(r.name), r.name) for r in routes if r.nav],
        "title": page.title,
        "live": page.live and not links.export,
        "refresh_ms": int(state.refresh * 1000),
        "exported": links.export,
    }
    if fragment:
        return "".join(template.blocks["main"](template.new_context(context)))
    return template.render(context)
