"""View: every fleet of the repository — transport, hardware, hosts with their GPUs (used, free,
kept for trials) and whether they answered, units and their state, trials in flight and who
owns them. Figures come from the overview's look (the fleets that running stages use) in the
words of `denv fleet list` and `denv fleet trials` (fleet/listing.py, trials/owner.py); a fleet
the look did not observe shows its declared hosts, and is never dialled from here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.fleet.listing import fleet_row, host_rows, unit_rows
from reconciler.spec.kindsettings import SlurmSettings
from reconciler.trials.owner import FoundTrial, TrialState, state_words
from reconciler.ui.site import Page
from reconciler.ui.state import UiState


def fleets(state: UiState, params: Mapping[str, str]) -> Page:
    seen = state.overview
    shown: list[dict[str, Any]] = []
    if seen is not None:
        readiness = {u: ready for row in seen.rows for u, ready in row["readiness"].items()}
        for name, fleet in sorted(seen.repo.fleets.items()):
            observed = seen.snap.observations.get(name)
            trials: list[FoundTrial] = state.trials.get(name, [])
            units = unit_rows(observed, readiness) if observed is not None else []
            shown.append(
                {
                    "name": name,
                    "spec": fleet,
                    "slurm": fleet.settings(SlurmSettings),  # a Slurm fleet's partition, nodes
                    "observed": observed is not None,
                    "row": fleet_row(seen.repo, name, fleet, observed),
                    "hosts": host_rows(fleet, observed),
                    "units": [u for u in units if u.trial is None],
                    "trials": [
                        {
                            "trial": t,
                            "state": state_words(t.state),
                            "bad": t.state == TrialState.ABANDONED,
                            "running": sum(u.alive for u in t.units),
                        }
                        for t in trials
                    ],
                }
            )
    return Page("fleets.html", "Fleets", {"fleets": shown})
