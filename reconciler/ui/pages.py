"""The UI's routes, in the order of its navigation bar."""

from __future__ import annotations

from reconciler.ui import fleets, optimize, overview, pulls
from reconciler.ui.site import Route

ROUTES: list[Route] = [
    Route("overview", "/", overview.overview, nav="Overview"),
    Route("release", "/releases/{name}", overview.release, exported=overview.releases),
    Route("fleets", "/fleets", fleets.fleets, nav="Fleets"),
    Route("optimize", "/optimize", optimize.optimize, nav="Optimizer"),
    Route("pull", "/pulls/{number}", pulls.pull, exported=pulls.exported),
]
