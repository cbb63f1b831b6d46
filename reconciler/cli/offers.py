"""CLI: `denv offers` — where to get a GPU and at what price."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.errors import NotFound
from reconciler.spec.catalog import Offer


def current(offers: list[Offer]) -> list[Offer]:
    """The newest offer of each provider, tier and region: older ones are superseded."""
    newest: dict[tuple[str, str | None, str], Offer] = {}
    for offer in offers:
        key = (offer.provider, offer.tier, offer.region)
        if key not in newest or offer.as_of > newest[key].as_of:
            newest[key] = offer
    return sorted(newest.values(), key=lambda o: (o.gpu_hour, o.provider))


def offers(
    hardware: Annotated[str, typer.Option("--hardware", help="Hardware id, e.g. h200.")],
    show_all: Annotated[bool, typer.Option("--all", help="Also superseded prices.")] = False,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Where to get HARDWARE, cheapest first."""
    loaded = load(repo)
    spec = loaded.resolve_hardware(hardware)
    if spec is None:
        raise NotFound(
            f"unknown hardware '{hardware}' (known: {', '.join(sorted(loaded.hardware))})"
        )
    matching = [o for o in loaded.offers if loaded.resolve_hardware(o.hardware) == spec]
    chosen = (
        sorted(matching, key=lambda o: (o.gpu_hour, o.provider)) if show_all else current(matching)
    )
    if as_json:
        print_json({"hardware": spec.id, "offers": [o.model_dump(mode="json") for o in chosen]})
        return
    table = Table(
        "PROVIDER",
        "TIER",
        "REGION",
        "$/GPU-HOUR",
        "AS-OF",
        "SOURCE",
        box=None,
        title=f"{spec.name} ({spec.id}) — cheapest first",
    )
    for offer in chosen:
        table.add_row(
            offer.provider,
            offer.tier or "…",
            offer.region,
            f"{offer.gpu_hour:.2f}",
            offer.as_of.isoformat(),
            offer.source.url,
        )
    console.print(table)
    if not chosen:
        console.print(f"no offers for {spec.id} in catalog/offers.yaml")
