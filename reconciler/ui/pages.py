"""The UI's routes, in the order of its navigation bar."""

from __future__ import annotations

from reconciler.ui import fleets, optimize, overview, pulls, results
from reconciler.ui.site import Route

ROUTES: list[Route] = [
    Route("overview", "/", overview.overview, nav="Overview"),
    Route("release", "/releases/{name}", overview.release, exported=overview.releases),
    Route("fleets", "/fleets", fleets.fleets, nav="Fleets"),
    Route("results", "/results", results.explorer, nav="Results", exported=results.exported_views),
    Route("result", "/results/{id}", results.result, exported=results.exported_results),
    # two results side by side need a server to pick them: an export has no compare page
    Route("compare", "/compare", results.comparison, exported=lambda state: []),
    Route("optimize", "/optimize", optimize.optimize, nav="Optimizer"),
    Route("pull", "/pulls/{number}", pulls.pull, exported=pulls.exported),
]
