"""Pure logic: $/M output tokens and which GPU-hour price a result is costed at.

A price comes, in this order, from the user's `--price HW=USD`, the result's own price,
or the default public offer for the hardware (catalog/offers.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from pydantic import Field

from reconciler.errors import UsageError
from reconciler.spec.base import Spec
from reconciler.spec.catalog import Offer
from reconciler.spec.fleet import Fleet
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result

USER_PRICE_SOURCE = "--price"
DEFAULT_TIER = "hyperscaler"
_NO_ALIASES: Mapping[str, str] = MappingProxyType({})


def usd_per_m_output(gpus: int, gpu_hour: float, output_tok_s: float) -> float:
    """GPUs × $/GPU-hour / (output tok/s × 3600) × 10^6, over every GPU of the deployment
    (prefill GPUs included)."""
    if gpus <= 0 or gpu_hour < 0 or output_tok_s <= 0:
        raise ValueError(
            f"cost needs gpus > 0, gpu_hour >= 0 and output_tok_s > 0 "
            f"(got {gpus}, {gpu_hour}, {output_tok_s})"
        )
    return gpus * gpu_hour / (output_tok_s * 3600) * 1e6


class PriceChoice(Spec):
    """A $/GPU-hour and where it came from, in words shown to the user."""

    gpu_hour: float = Field(gt=0)
    source: str


def canonical_key(key: str, aliases: Mapping[str, str]) -> str:
    """The catalog id for a key or alias, lowercased (aliases map lowercase alias -> id)."""
    key = key.strip().lower()
    return aliases.get(key, key)


def default_offer(
    hardware: str, offers: Sequence[Offer], aliases: Mapping[str, str] = _NO_ALIASES
) -> Offer | None:
    """Among the offers for `hardware` (a catalog id; an offer may name an alias) with the
    newest `as_of`: the cheapest hyperscaler one if any, else the cheapest; ties go by
    provider and region."""
    own = [offer for offer in offers if canonical_key(offer.hardware, aliases) == hardware]
    if not own:
        return None
    newest = max(offer.as_of for offer in own)
    latest = [offer for offer in own if offer.as_of == newest]
    preferred = [offer for offer in latest if offer.tier == DEFAULT_TIER] or latest
    return min(preferred, key=lambda o: (o.gpu_hour, o.provider, o.region))


def default_offers(offers: Sequence[Offer], aliases: Mapping[str, str]) -> list[Offer]:
    """The default offer of each hardware, named by its catalog id: what `price_for` can pick
    from `offers`; given these in their place it picks the same, without going through every
    offer for every result."""
    hardware = {canonical_key(offer.hardware, aliases) for offer in offers}
    chosen = ((key, default_offer(key, offers, aliases)) for key in sorted(hardware))
    return [offer.model_copy(update={"hardware": key}) for key, offer in chosen if offer]


def price_for(
    result: Result,
    user_prices: Mapping[str, float],
    offers: Sequence[Offer],
    *,
    aliases: Mapping[str, str] = _NO_ALIASES,
) -> PriceChoice | None:
    """The price to cost `result` at: `--price` for its hardware, else the result's own
    price, else the default public offer; None when there is none."""
    hardware = canonical_key(result.hardware, aliases)
    for key, usd in user_prices.items():
        if canonical_key(key, aliases) == hardware:
            return PriceChoice(gpu_hour=usd, source=USER_PRICE_SOURCE)
    if result.price is not None:
        return PriceChoice(gpu_hour=result.price.gpu_hour, source=result.price.source)
    return offer_price(hardware, offers, aliases)


def offer_price(
    hardware: str, offers: Sequence[Offer], aliases: Mapping[str, str] = _NO_ALIASES
) -> PriceChoice | None:
    """The default public offer's price for `hardware` (a catalog id), with where it comes
    from; None when no offer lists it."""
    offer = default_offer(hardware, offers, aliases)
    if offer is None:
        return None
    return PriceChoice(
        gpu_hour=offer.gpu_hour,
        source=f"{offer.provider}, as of {offer.as_of.isoformat()}, {offer.source.url}",
    )


def parse_price_overrides(values: Sequence[str]) -> dict[str, float]:
    """`--price h200=3.80` (repeatable) -> {"h200": 3.8}; UsageError names a bad value."""
    prices: dict[str, float] = {}
    for value in values:
        hardware, usd = _parse_price(value)
        if hardware in prices:
            raise _bad_price(value, f"a price for {hardware} is given twice")
        prices[hardware] = usd
    return prices


def _parse_price(value: str) -> tuple[str, float]:
    hardware, sep, usd_text = value.partition("=")
    hardware = hardware.strip().lower()
    if not sep:
        raise _bad_price(value, "missing '='")
    if not hardware:
        raise _bad_price(value, "missing the hardware before '='")
    usd_text = usd_text.strip().removeprefix("$")
    try:
        usd = float(usd_text)
    except ValueError:
        raise _bad_price(value, f"'{usd_text}' is not a number") from None
    if not 0 < usd < float("inf"):
        raise _bad_price(value, f"{usd_text} is not a price above zero")
    return hardware, usd


def _bad_price(value: str, why: str) -> UsageError:
    return UsageError(f"--price '{value}': {why} (use HW=USD per GPU-hour, e.g. h200=3.80)")


def trial_price(
    fleet: Fleet,
    hardware: str,
    given: float | None,
    offers: Sequence[Offer],
    aliases: Mapping[str, str],
) -> PriceChoice | None:
    """What a GPU-hour of `fleet` costs: `given` (`--price`), else the fleet's own price, else
    the default public offer for its `hardware` (as `denv bench` picks it); None when none."""
    if given is not None:
        return PriceChoice(gpu_hour=given, source=USER_PRICE_SOURCE)
    if fleet.price is not None:
        note = f": {fleet.price.note}" if fleet.price.note else ""
        return PriceChoice(gpu_hour=fleet.price.gpu_hour, source=f"fleet {fleet.name}{note}")
    return offer_price(canonical_key(hardware, aliases), offers, aliases)


def fleet_price(repo: Repo, fleet: Fleet, given: float | None = None) -> PriceChoice | None:
    """`trial_price` with the fleet's hardware as the repository's catalog names it."""
    aliases = {alias: hw.id for hw in repo.hardware.values() for alias in hw.aliases}
    hardware = repo.resolve_hardware(fleet.hardware)
    hardware_id = hardware.id if hardware is not None else fleet.hardware
    return trial_price(fleet, hardware_id, given, repo.offers, aliases)
