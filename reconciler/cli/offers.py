"""CLI: `denv offers` — where to get a GPU and at what price: providers' public list prices,
then modelled total-cost-of-ownership tiers, which are estimates and not quotes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.errors import NotFound
from reconciler.spec.catalog import Offer

KINDS = {
    "list_price": "public list prices: what a provider publishes for renting it",
    "modelled_tco": "modelled TCO, not a quote: a cost model's $/GPU-hour for owning or "
    "renting it (SemiAnalysis AI Cloud TCO model)",
}


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
    """Where to get HARDWARE: providers' list prices, then modelled TCO tiers; cheapest first."""
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
        print_json(
            {
                "hardware": spec.id,
                "kinds": KINDS,
                "offers": [o.model_dump(mode="json") for o in chosen],
            }
        )
        return
    for kind, heading in KINDS.items():
        part = [o for o in chosen if o.kind == kind]
        console.print(f"{spec.name} ({spec.id}) — {heading}; cheapest first", markup=False)
        if part:
            console.print(_table(part))
        elif kind == "list_price":
            console.print(
                f"  none for {spec.id} in catalog/offers.yaml (the reference data has none); "
                "add a provider's price as kind: list_price with its page and date",
                markup=False,
            )
        else:
            console.print(f"  none for {spec.id} in catalog/offers.yaml", markup=False)
        console.print("")


def _table(part: list[Offer]) -> Table:
    table = Table("PROVIDER", "TIER", "REGION", "$/GPU-HOUR", "AS-OF", "SOURCE", box=None)
    for offer in part:
        table.add_row(
            offer.provider,
            offer.tier or "…",
            offer.region,
            f"{offer.gpu_hour:.2f}",
            offer.as_of.isoformat(),
            offer.source.url,
        )
    return table
