"""The alarms a stage watches: those it names, and the defaults (an error-rate alarm unless
policies/alarms.yaml says otherwise) on the metrics none of them reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.spec.loader import open_repo
from reconciler.spec.policy import DEFAULT_ALARMS, Alarm, Policies, stage_alarms

TTFT = Alarm(metric="ttft", stat="p99", max=1.5)
ERRORS = Alarm(metric="error_rate", max=0.01)


@pytest.mark.parametrize(
    ("names", "defaults", "expected"),
    [
        ([], None, ["error-rate"]),
        (["ttft"], None, ["ttft", "error-rate"]),
        (["ttft", "errors"], None, ["ttft", "errors"]),  # its own threshold, not two
        (["ttft"], {}, ["ttft"]),  # `defaults: {}`: none
        (["unknown"], None, ["error-rate"]),  # refused by validate; judged as if absent
    ],
    ids=["names-none", "latency-only", "own-error-alarm", "defaults-off", "unknown-name"],
)
def test_a_stage_watches_its_alarms_and_the_defaults_on_other_metrics(
    names: list[str], defaults: dict[str, Alarm] | None, expected: list[str]
) -> None:
    policies = Policies(
        alarms={"ttft": TTFT, "errors": ERRORS},
        default_alarms=DEFAULT_ALARMS if defaults is None else defaults,
    )
    assert list(stage_alarms(policies, names)) == expected


def test_defaults_in_the_alarms_file_replace_the_built_in_ones(denv_repo: Path) -> None:
    assert open_repo(denv_repo).policies.default_alarms == DEFAULT_ALARMS
    path = denv_repo / "policies/alarms.yaml"
    path.write_text(
        path.read_text() + "defaults:\n  errors-5pct: { metric: error_rate, max: 5%, window: 1m }\n"
    )
    found = open_repo(denv_repo).policies.default_alarms
    assert found == {"errors-5pct": Alarm(metric="error_rate", max=0.05, window=60.0)}
