"""`denv bench run`'s pure parts besides its trial: its price, its levels and what each result
file says about the run."""

from __future__ import annotations

import datetime as dt

import pytest

from reconciler.bench.run_info import (
    parse_levels,
    run_info,
    workload_requests,
)
from reconciler.bench.traffic import TraceLine, trace_digest
from reconciler.catalog.cost import PriceChoice, trial_price
from reconciler.errors import UsageError
from reconciler.spec.catalog import Offer
from reconciler.spec.fleet import Fleet
from reconciler.trials.plan import recipe_digest
from tests.engines.conftest import fleet, recipe

OFFER = Offer.model_validate(
    {
        "hardware": "h200",
        "provider": "cloud",
        "region": "us",
        "tier": "hyperscaler",
        "gpu_hour": 4.5,
        "as_of": "2026-01-01",
        "source": {"url": "https://example.invalid/prices"},
    }
)


@pytest.mark.parametrize(
    ("given", "fleet_price", "offers", "expected"),
    [
        (2.0, 3.8, [OFFER], (2.0, "--price")),
        (None, 3.8, [OFFER], (3.8, "fleet test: our rate")),
        (None, None, [OFFER], (4.5, "cloud, as of 2026-01-01, https://example.invalid/prices")),
        (None, None, [], None),
    ],
    ids=["given", "fleet", "offer", "none"],
)
def test_trial_price_order(
    given: float | None,
    fleet_price: float | None,
    offers: list[Offer],
    expected: tuple[float, str] | None,
) -> None:
    target = fleet(trial=1)
    if fleet_price is not None:
        price = {"gpu_hour": fleet_price, "note": "our rate"}
        target = Fleet.model_validate({**target.model_dump(), "price": price})
    choice = trial_price(target, "h200", given, offers, {})
    assert ((choice.gpu_hour, choice.source) if choice else None) == expected


@pytest.mark.parametrize(
    ("text", "option", "error"),
    [
        ("1,x", "--concurrency", "--concurrency '1,x': 'x' is not a number"),
        ("0,4", "--rate", "--rate '0,4': 0 is not above zero"),
        ("1.5", "--concurrency", "--concurrency '1.5': 1.5 is not a whole number of clients"),
        ("4,4", "--concurrency", "--concurrency '4,4': 4 is given twice"),
    ],
    ids=["not-a-number", "zero", "fraction", "twice"],
)
def test_bad_levels_are_refused(text: str, option: str, error: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_levels(text, option)
    assert str(caught.value) == error


def test_levels_and_workload_lengths() -> None:
    assert parse_levels(" 1, 8,32", "--concurrency") == [1.0, 8.0, 32.0]
    assert parse_levels("2.5", "--rate") == [2.5]
    assert workload_requests("concurrency", [1, 8], None) == 88  # 11 a client at 8
    assert workload_requests("concurrency", [1], None) == 50  # at least 50
    assert workload_requests("rate", [2.0], None) == 100
    assert workload_requests("rate", [2.0], 7) == 7


def test_run_info_says_what_ran() -> None:
    spec = recipe(settings={"quantization": "fp8"})
    lines = [TraceLine(timestamp=0, input_length=10, output_length=5, hash_ids=[1])]
    at = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
    price = PriceChoice(gpu_hour=3.8, source="fleet test")
    info = run_info(
        spec,
        hardware="h200",
        simulated=True,
        weights="hf://org/model",
        traffic=lines,
        workload=None,
        price=price,
        at=at,
        gpu_names=["H200 SXM (simulated)"],
        prompt="text",
    )
    assert info.recipe_digest == recipe_digest(spec) != recipe_digest(recipe())
    assert info.traffic_digest == trace_digest(lines)
    assert (info.engine, info.engine_version, info.precision) == ("vllm", "0.33.0", "fp8")
    assert (info.gpu_hour, info.price_source, info.simulated) == (3.8, "fleet test", True)
