"""`denv ui --export DIR`: every page as a static file, the data written into it, links
between them relative, the style and script beside them: the folder opens from file:// (an
artifact of a workflow, GitHub Pages) and shows what the server would have shown then."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from reconciler.ui.site import Links, Route, render
from reconciler.ui.state import UiState


def export(
    state: UiState,
    routes: list[Route],
    folder: Path,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> list[Path]:
    """Write the pages and the static files into `folder`; the files written, pages first.
    `progress(done, total)` after each page."""
    links = Links(routes, export=True)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with state.lock:
        wanted = [(route, params) for route in routes for params in route.exported(state)]
        for route, params in wanted:
            path = folder / links(route.name, **params)
            path.write_text(render(route.view(state, params), state, links, routes, False))
            written.append(path)
            progress(len(written), len(wanted))
    static = folder / "static"
    static.mkdir(exist_ok=True)
    for item in files("reconciler.ui").joinpath("static").iterdir():
        if item.is_file():
            target = static / item.name
            with item.open("rb") as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink)
            written.append(target)
    return written
