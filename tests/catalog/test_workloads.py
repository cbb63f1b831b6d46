from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from reconciler.catalog.workloads import matches, profile_for
from reconciler.errors import UsageError
from reconciler.spec.result import Result, Workload
from reconciler.spec.workload import WorkloadsFile
from tests.catalog.factories import PROFILES, result


@pytest.mark.parametrize(
    ("isl", "osl", "expected"),
    [
        pytest.param(1024, 1024, {"chat", "batch"}, id="1k-1k"),
        pytest.param(8192, 1024, {"agent", "rag", "coding", "batch"}, id="8k-1k"),
        pytest.param(1024, 8192, {"reasoning", "batch"}, id="1k-8k"),
        pytest.param(2048, 2048, {"chat", "batch"}, id="upper-bound-included"),
        pytest.param(2049, 2049, {"reasoning", "batch"}, id="long-output"),
        pytest.param(16384, 4096, {"batch"}, id="long-both-batch-only"),
    ],
)
def test_matches_by_lengths(isl: int, osl: int, expected: set[str]) -> None:
    run = result(isl=isl, osl=osl)
    assert {p.id for p in PROFILES if matches(p, run)} == expected


def _with_workload(**fields: object) -> Result:
    return result().model_copy(update={"workload": Workload.model_validate(fields)})


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        pytest.param(_with_workload(name="rag"), {"rag"}, id="named-no-lengths"),
        pytest.param(
            _with_workload(name="Chat", isl=8192, osl=1024),
            {"chat", "agent", "rag", "coding", "batch"},
            id="name-adds-to-lengths",
        ),
        pytest.param(_with_workload(traffic_digest="sha256:ab"), set(), id="unknown-lengths"),
    ],
)
def test_matches_by_name(run: Result, expected: set[str]) -> None:
    assert {p.id for p in PROFILES if matches(p, run)} == expected


def test_profile_for_any_case() -> None:
    assert profile_for("Agent", PROFILES).id == "agent"


def test_profile_for_unknown_lists_known() -> None:
    with pytest.raises(UsageError) as caught:
        profile_for("chatt", PROFILES)
    assert str(caught.value) == (
        "unknown workload 'chatt' (known: chat, agent, rag, coding, reasoning, batch)"
    )


@pytest.mark.parametrize(
    ("change", "error"),
    [
        pytest.param(
            {"input_tokens": {"min": 10, "max": 5}}, "min (10) is above max (5)", id="range"
        ),
        pytest.param({"prefix_reuse": 1.5}, "less than or equal to 1", id="reuse"),
        pytest.param({"extra": 1}, "Extra inputs are not permitted", id="extra"),
    ],
)
def test_profile_model_rejects(change: dict[str, object], error: str) -> None:
    data = PROFILES[0].model_dump(mode="json") | change
    with pytest.raises(ValidationError, match=re.escape(error)):
        WorkloadsFile.model_validate({"workloads": [data]})


def test_duplicate_ids_rejected() -> None:
    data = PROFILES[0].model_dump(mode="json")
    with pytest.raises(ValidationError, match="workload 'chat' is defined twice"):
        WorkloadsFile.model_validate({"workloads": [data, data]})
