"""Hosts that do not answer, and since when: streaks carried from one look to the next."""

from __future__ import annotations

import pytest

from reconciler.reconcile.reach import FleetReach, Unreached, ago, earliest, parse, stamp, track

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


def down(since: float, cause: str = "refused") -> Unreached:
    return Unreached(since=since, cause=cause)


@pytest.mark.parametrize(
    ("previous", "failed", "looked_at", "expected"),
    [
        pytest.param({}, {"lab": {"n0": "refused"}}, ["lab"], {"lab": {"n0": down(T0 + 60)}},
                     id="a-first-failure-starts-a-streak-now"),
        pytest.param({"lab": {"n0": down(T0)}}, {"lab": {"n0": "timed out"}}, ["lab"],
                     {"lab": {"n0": down(T0, "timed out")}},
                     id="a-failing-host-keeps-its-start-with-the-latest-cause"),
        pytest.param({"lab": {"n0": down(T0)}}, {"lab": {}}, ["lab"], {},
                     id="a-host-that-answers-ends-its-streak"),
        pytest.param({"lab": {"n0": down(T0), "n1": down(T0)}}, {"lab": {"n1": "refused"}},
                     ["lab"], {"lab": {"n1": down(T0)}}, id="only-the-host-that-answered-ends"),
        pytest.param({"gone": {"n0": down(T0)}}, {}, ["lab"], {},
                     id="a-fleet-not-looked-at-has-no-streak"),
    ],
)  # fmt: skip
def test_track(
    previous: dict[str, dict[str, Unreached]],
    failed: dict[str, dict[str, str]],
    looked_at: list[str],
    expected: dict[str, dict[str, Unreached]],
) -> None:
    assert track(previous, failed, looked_at, T0 + 60) == expected


def test_earliest_keeps_the_current_hosts_with_the_earliest_start_any_record_has() -> None:
    current = {"lab": {"n0": down(T0 + 60), "n1": down(T0 + 60)}}
    bot = {"lab": {"n0": down(T0)}, "other": {"x": down(T0 - 600)}}
    later = {"lab": {"n1": down(T0 + 120)}}
    assert earliest(current, bot, later) == {"lab": {"n0": down(T0), "n1": down(T0 + 60)}}


@pytest.mark.parametrize(
    "data",
    [None, "x", {"lab": "x"}, {"lab": {"n0": {"since": "soon"}}}],
    ids=["none", "text", "fleet-not-a-map", "host-not-a-streak"],
)
def test_a_record_that_does_not_read_is_no_streak(data: object) -> None:
    assert parse(data) == {}


def test_a_fleet_none_of_whose_hosts_answers_is_unreachable_since_its_last_host_stopped() -> None:
    reach = FleetReach(fleet="lab", hosts=2, unreached={"n0": down(T0), "n1": down(T0 + 60)})
    assert reach.whole and reach.since == T0 + 60
    assert reach.text(T0 + 60 + 720) == (
        "lab: UNREACHABLE since 2027-01-15 08:01:00 UTC (12m ago): no host answered, what runs "
        "there is not known: n0 (refused, since 2027-01-15 08:00:00 UTC), n1 (refused)"
    )


def test_some_hosts_unreachable_since_the_first_of_them() -> None:
    reach = FleetReach(fleet="lab", hosts=3, unreached={"n1": down(T0, "timed out")})
    assert not reach.whole and reach.since == T0
    assert reach.text(T0 + 30) == (
        "lab: 1 of 3 hosts unreachable since 2027-01-15 08:00:00 UTC (30s ago): n1 (timed out)"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s ago"), (119, "119s ago"), (120, "2m ago"), (7199, "120m ago"),
     (7200, "2.0h ago"), (3 * 86400, "3.0d ago"), (-5, "0s ago")],
)  # fmt: skip
def test_ago(seconds: float, text: str) -> None:
    assert ago(seconds) == text


def test_stamp_is_utc() -> None:
    assert stamp(T0) == "2027-01-15 08:00:00 UTC"
