"""Fleet-kind cards: every registered kind's card has every part FleetCard names, and a kind
whose card lacks one, or a name not registered, is refused naming what is wrong."""

from __future__ import annotations

import pytest

from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import driver_kind
from reconciler.fleet.kinds.cards import card
from reconciler.spec.fleetkinds import FLEET_KINDS, FleetKind, kind_names


@pytest.mark.parametrize("name", kind_names())
def test_every_registered_kind_has_a_whole_card_and_a_driver(name: str) -> None:
    found = card(name)
    assert callable(driver_kind(name)), found.DRIVER


def test_a_card_that_lacks_a_part_is_refused_with_the_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(FLEET_KINDS, "half", FleetKind("reconciler.fleet.kinds.agenthosts"))
    with pytest.raises(DenvError, match=r"fleet kind 'half' .* lacks DRIVER, runs_here$"):
        card("half")


def test_an_unregistered_kind_names_the_registered_ones() -> None:
    with pytest.raises(DenvError, match=r"'kube' is not registered .* local, ssh, slurm\)$"):
        card("kube")
