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
    every = seconds("--refresh", refresh)
    if export is not None:
        _export(repo, export, as_json)
        return
    beside = Beside(repo, listen, every)
    try:
        url = beside.start()
        if as_json:
            print_json({"url": url})
        else:
            print(f"denv ui: {url}", flush=True)
        _wait_for_a_signal()
    finally:
        beside.close()


def _export(repo: str, folder: Path, as_json: bool) -> None:
    """One look, every page written into `folder`; progress on stderr."""
    from reconciler.cli.progress import ProgressSink
    from reconciler.ui.export import export
    from reconciler.ui.pages import ROUTES
    from reconciler.ui.state import Gather, Refresher, UiState

    state = UiState()
    with ProgressSink() as shown:
        shown.phase("looking at git and the fleets")
        gather = Gather(repo, cache_dir())
        try:
            Refresher(state, gather).once()
        finally:
            gather.close()
        shown.phase(f"writing the pages into {folder}")
        written = export(state, ROUTES, folder, shown.counter("pages"))
    pages = [p.name for p in written if p.suffix == ".html"]
    if as_json:
        print_json({"folder": str(folder), "pages": pages, "error": state.error})
        return
    console.print(f"{len(pages)} pages in {folder}; open {folder / 'index.html'}", markup=False)
    if state.error:
        console.print(f"warning: the look at git and the fleets failed: {state.error}")


def _wait_for_a_signal() -> None:
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    done.wait()


class Beside:
    """The UI served beside another command (`denv reconcile --ui`), until closed."""

    def __init__(self, repo: str, listen: str, refresh: float) -> None:
        from reconciler.ui.pages import ROUTES
        from reconciler.ui.server import UiServer, parse_hosts
        from reconciler.ui.state import Gather, Refresher, UiState

        state = UiState(refresh=refresh)
        token = os.environ.get("DENV_UI_TOKEN") or None
        hosts = parse_hosts(os.environ.get("DENV_UI_HOSTS"))
        self.server = UiServer(state, ROUTES, listen, token, hosts)
        self.gather = Gather(repo, cache_dir())
        self.refresher = Refresher(state, self.gather)

    def start(self) -> str:
        url = self.server.start()
        self.refresher.start()
        return url

    def close(self) -> None:
        """Promptly: a look in progress has its connections closed under it (it ends with an
        error no page shows), rather than being waited for up to its calls' timeouts."""
        self.server.stop()
        self.refresher.stopped.set()
        self.gather.close()
        self.refresher.stop()
