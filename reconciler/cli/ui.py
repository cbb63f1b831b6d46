"""CLI: `denv ui` — the read-only web UI over the state the CLI reads; `--export DIR` writes
its pages as static files instead."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from reconciler.cli.common import JsonOption, console, print_json, seconds
from reconciler.cli.plan import LocationOption, cache_dir

ListenOption = Annotated[
    str,
    typer.Option(
        help="HOST:PORT to serve on (port 0: any free one). Off loopback, DENV_UI_TOKEN must "
        "be set, and every request must carry it."
    ),
]


def ui(
    listen: ListenOption = "127.0.0.1:8080",
    repo: LocationOption = ".",
    refresh: Annotated[
        str, typer.Option(help="How often to look at git and the fleets again.")
    ] = "2s",
    export: Annotated[
        Path | None,
        typer.Option(help="Write the pages into this folder (opens from file://) and exit."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Serve the UI: overview, releases, fleets, results, optimizer; read-only."""
    from reconciler.ui.pages import ROUTES
    from reconciler.ui.server import UiServer
    from reconciler.ui.state import Gather, Refresher, UiState

    state = UiState(refresh=seconds("--refresh", refresh))
    gather = Gather(repo, cache_dir())
    refresher = Refresher(state, gather)
    try:
        if export is not None:
            from reconciler.ui.export import export as write

            refresher.once()
            written = write(state, ROUTES, export)
            pages = [p for p in written if p.suffix == ".html"]
            if as_json:
                print_json({"folder": str(export), "pages": [p.name for p in pages],
                            "error": state.error})  # fmt: skip
                return
            console.print(f"{len(pages)} pages in {export} (open {export / 'index.html'})",
                          markup=False)  # fmt: skip
            if state.error:
                console.print(f"warning: the look failed: {state.error}", markup=False)
            return
        server = UiServer(state, ROUTES, listen, os.environ.get("DENV_UI_TOKEN") or None)
        url = server.start()
        refresher.start()
        if as_json:
            print_json({"url": url})
        else:
            print(f"denv ui: {url}", flush=True)
        _wait_for_a_signal()
        server.stop()
        refresher.stop()
    finally:
        gather.close()


def _wait_for_a_signal() -> None:
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    done.wait()
