from __future__ import annotations

import datetime as dt

import pytest

from reconciler.catalog.cost import (
    PriceChoice,
    default_offer,
    parse_price_overrides,
    price_for,
    usd_per_m_output,
)
from reconciler.errors import UsageError
from reconciler.spec.catalog import Offer
from reconciler.spec.result import Result
from tests.catalog.factories import offer, result

OLD = dt.date(2026, 4, 3)
NEW = dt.date(2026, 7, 31)


@pytest.mark.parametrize(
    ("gpus", "gpu_hour", "tok_s", "usd"),
    [
        # 4 prefill + 8 decode GPUs: 12 × 2 / (1200 × 3600) × 1e6
        pytest.param(12, 2.0, 1200.0, 5.5556, id="disaggregated-all-gpus"),
        pytest.param(8, 1.22, 8000.0, 0.3389, id="h200-aggregated"),
        pytest.param(1, 3600.0, 1e6, 1.0, id="unit"),
    ],
)
def test_usd_per_m_output(gpus: int, gpu_hour: float, tok_s: float, usd: float) -> None:
    assert usd_per_m_output(gpus, gpu_hour, tok_s) == pytest.approx(usd, abs=5e-5)


@pytest.mark.parametrize(
    ("gpus", "tok_s"), [pytest.param(0, 1.0, id="no-gpus"), pytest.param(8, 0.0, id="no-tokens")]
)
def test_usd_per_m_output_rejects(gpus: int, tok_s: float) -> None:
    with pytest.raises(ValueError, match="cost needs"):
        usd_per_m_output(gpus, 2.0, tok_s)


OFFERS = [
    offer("h200", 2.05, provider="retail", tier="3yr_rental", as_of=NEW),
    offer("h200", 1.59, provider="neocloud", tier="neocloud", as_of=NEW),
    offer("h200", 1.22, provider="hyperscaler", tier="hyperscaler", as_of=NEW, url="https://x.org"),
    offer("h200", 1.41, provider="older", tier="hyperscaler", as_of=OLD),
    offer("mi355x", 2.09, provider="neo", tier="neocloud", as_of=NEW),
    offer("mi355x", 1.80, provider="cheap", tier="spot", as_of=NEW),
    offer("mi355x", 1.48, provider="stale", tier="hyperscaler", as_of=OLD),
]


@pytest.mark.parametrize(
    ("hardware", "provider"),
    [
        pytest.param("h200", "hyperscaler", id="newest-hyperscaler"),
        pytest.param("mi355x", "cheap", id="newest-without-hyperscaler-cheapest"),
        pytest.param("gaudi3", None, id="none"),
    ],
)
def test_default_offer(hardware: str, provider: str | None) -> None:
    chosen = default_offer(hardware, OFFERS)
    assert (chosen.provider if chosen else None) == provider


@pytest.mark.parametrize(
    ("run", "user", "expected"),
    [
        pytest.param(
            result(hardware="h200", price=(3.8, "fleet h200-use1")),
            {"h200": 2.5},
            PriceChoice(gpu_hour=2.5, source="--price"),
            id="user-beats-result-and-offer",
        ),
        pytest.param(
            result(hardware="h200", price=(3.8, "fleet h200-use1")),
            {"b200": 2.5},
            PriceChoice(gpu_hour=3.8, source="fleet h200-use1"),
            id="result-beats-offer",
        ),
        pytest.param(
            result(hardware="h200"),
            {},
            PriceChoice(gpu_hour=1.22, source="hyperscaler, as of 2026-07-31, https://x.org"),
            id="offer",
        ),
        pytest.param(result(hardware="gaudi3"), {}, None, id="no-price"),
        pytest.param(
            result(hardware="gb200"),
            {"GB200-NVL72": 2.0},
            PriceChoice(gpu_hour=2.0, source="--price"),
            id="user-price-by-alias",
        ),
    ],
)
def test_price_for(run: Result, user: dict[str, float], expected: PriceChoice | None) -> None:
    aliases = {"gb200": "gb200-nvl72"}
    assert price_for(run, user, OFFERS, aliases=aliases) == expected


def test_price_for_offer_under_alias() -> None:
    offers = [Offer.model_validate(offer("gb200-nvl72", 1.86).model_dump())]
    choice = price_for(result(hardware="gb200"), {}, offers, aliases={"gb200": "gb200-nvl72"})
    assert choice is not None and choice.gpu_hour == 1.86


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param([], {}, id="none"),
        pytest.param(["h200=3.80", "B200 = $4"], {"h200": 3.8, "b200": 4.0}, id="several"),
    ],
)
def test_parse_price_overrides(values: list[str], expected: dict[str, float]) -> None:
    assert parse_price_overrides(values) == expected


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(["h200=abc"], "--price 'h200=abc': 'abc' is not a number", id="nan-text"),
        pytest.param(["h200"], "--price 'h200': missing '='", id="no-equals"),
        pytest.param(["=3"], "--price '=3': missing the hardware", id="no-hardware"),
        pytest.param(["h200=0"], "--price 'h200=0': 0 is not a price above zero", id="zero"),
        pytest.param(["h200=-1"], "--price 'h200=-1': -1 is not a price above zero", id="neg"),
        pytest.param(["h200=nan"], "--price 'h200=nan': nan is not a price", id="nan"),
        pytest.param(["h200=1", "H200=2"], "--price 'H200=2': a price for h200 is given", id="2x"),
    ],
)
def test_parse_price_overrides_rejects(values: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_price_overrides(values)
    assert str(caught.value).startswith(message)
    assert "use HW=USD per GPU-hour" in str(caught.value)
