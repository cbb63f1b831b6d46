"""CLI: `denv fleet …` — the fleets the repository declares."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from reconciler.catalog.deployments import declared_free_gpus
from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.spec.checks import domain_size

app = typer.Typer(help="Fleets: hosts, GPUs and what runs there.", no_args_is_help=True)


@app.command("list")
def list_fleets(repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """Fleets with hardware, NVLink domain size and GPUs (figures from the files)."""
    loaded = load(repo)
    rows = [
        {
            "fleet": name,
            "provider": fleet.provider,
            "hardware": fleet.hardware,
            "domain": domain_size(loaded, name),
            "gpus": fleet.gpus,
            "trial_gpus": fleet.trial_gpus,
            "free_gpus": declared_free_gpus(loaded, name),
            "simulated": fleet.simulated,
            "hosts": len(fleet.hosts),
            "figures": "declared",
        }
        for name, fleet in sorted(loaded.fleets.items())
    ]
    if as_json:
        print_json({"fleets": rows})
        return
    table = Table(
        "FLEET",
        "PROVIDER",
        "HARDWARE",
        "DOMAIN",
        "GPUS",
        "FREE-GPUS",
        box=None,
    )
    for row in rows:
        hardware = f"{row['hardware']} (simulated)" if row["simulated"] else str(row["hardware"])
        table.add_row(
            str(row["fleet"]),
            str(row["provider"]),
            hardware,
            str(row["domain"]),
            str(row["gpus"]),
            str(row["free_gpus"]),
        )
    console.print(table)
    console.print("declared in fleets/*.yaml: FREE-GPUS = GPUS − trial GPUs − what releases ask")
