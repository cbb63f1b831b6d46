"""The routers the bot last saw, kept with its lease note: a host that answered says what
runs there now; one that did not keeps what was seen there last; a note never carries a
router's environment or command line; what a note garbles is left out, not guessed."""

from __future__ import annotations

from reconciler.fleet.model.observed import FleetObservation, HostObservation, UnitRecord
from reconciler.reconcile.routers_seen import (
    dump,
    parse,
    remember,
    unreached_routers,
    with_desired,
)
from tests.reconcile.conftest import GitRepo, desired_of


def router(release: str, alive: bool = True, port: int = 8000) -> UnitRecord:
    labels = {"release": release, "stage": "canary", "fleet": "lab", "role": "router"}
    return UnitRecord(
        id=f"{release}.canary.lab.router",
        digest="d",
        port=port,
        alive=alive,
        labels=labels,
        env={"HF_TOKEN": "hf_secret"},
        argv=("sglang-router", "--api-key", "sk-secret"),
    )


def looked(
    answered: dict[str, tuple[UnitRecord, ...]], failed: tuple[str, ...]
) -> FleetObservation:
    seen = FleetObservation("lab")
    for host, units in answered.items():
        seen.hosts[host] = HostObservation(host=host, source="simulated", units=units)
    for host in failed:
        seen.errors[host] = f"{host}: refused"
    return seen


def test_a_host_that_answers_says_a_host_that_does_not_keeps() -> None:
    engine = UnitRecord(id="chat.canary.lab.aggregated-0", digest="d", alive=True)
    first = remember(
        {}, {"lab": looked({"h0": (router("chat"), engine), "h1": (router("faq"),)}, ())}
    )
    assert {h: [r.id for r in rs] for h, rs in first["lab"].items()} == {
        "h0": ["chat.canary.lab.router"],
        "h1": ["faq.canary.lab.router"],
    }
    later = remember(first, {"lab": looked({"h0": (router("chat", alive=False),)}, ("h1",))})
    assert "h0" not in later["lab"]  # it answered: its router is not running
    assert later["lab"]["h1"] == first["lab"]["h1"]  # not reached: as seen last
    assert unreached_routers(looked({"h0": ()}, ("h1",)), later) == {"h1": list(first["lab"]["h1"])}


def test_a_note_keeps_no_secret_and_drops_what_does_not_read() -> None:
    known = remember({}, {"lab": looked({"h0": (router("chat"),)}, ())})
    written = dump(known)
    assert "secret" not in str(written)
    assert parse(written)["lab"]["h0"][0].port == 8000
    garbled = {"lab": {"h0": [{"id": 3}, written["lab"]["h0"][0]], "h1": "nope"}, "x": 1}
    assert [r.id for r in parse(garbled)["lab"]["h0"]] == ["chat.canary.lab.router"]
    assert parse("not a note") == {} and parse(None) == {}


def test_a_router_the_pass_started_is_known_after_it(git_repo: GitRepo) -> None:
    desired = desired_of(git_repo)
    routers = [u for d in desired.deployments for u in d.units if u.unit.role == "router"]
    assert routers
    known = with_desired({}, desired.deployments)
    for unit in routers:
        [record] = known[unit.fleet][unit.host]
        assert (record.id, record.digest, record.port, record.alive) == (
            unit.id, unit.digest, unit.unit.port, True,
        )  # fmt: skip
    assert with_desired(known, desired.deployments) == known  # once
