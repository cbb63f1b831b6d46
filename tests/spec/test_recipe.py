"""Topology models: a pool's parallel layout, left out, follows from its GPUs as the engines
do (tensor parallel = the replica's GPUs); given, it must add up to them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from reconciler.spec.recipe import Topology

TOPOLOGY: TypeAdapter[Any] = TypeAdapter(Topology)


def layouts(topology: dict[str, Any]) -> list[tuple[str, int, int, int, int, int]]:
    parsed = TOPOLOGY.validate_python(topology)
    return [
        (role, p.gpus, p.parallel.tp, p.parallel.pp, p.parallel.dp, p.parallel.ep)
        for role, p in parsed.pools()
    ]


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        pytest.param(
            {"mode": "aggregated", "replicas": 2, "gpus": 8},
            [("aggregated", 8, 8, 1, 1, 1)],
            id="aggregated-without-parallel-is-tp-gpus",
        ),
        pytest.param(
            {
                "mode": "disaggregated",
                "prefill": {"gpus": 4, "replicas": 3},
                "decode": {"gpus": 8},
            },
            [("prefill", 4, 4, 1, 1, 1), ("decode", 8, 8, 1, 1, 1)],
            id="disaggregated-without-parallel-is-tp-gpus",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 8, "parallel": {"ep": 8}},
            [("aggregated", 8, 8, 1, 1, 8)],
            id="tp-left-out-beside-ep",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 8, "parallel": {"dp": 2}},
            [("aggregated", 8, 4, 1, 2, 1)],
            id="tp-left-out-beside-dp",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 8, "parallel": {"pp": 2}},
            [("aggregated", 8, 4, 2, 1, 1)],
            id="tp-left-out-beside-pp",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 8, "parallel": {"dp": 8, "dp_attention": True}},
            [("aggregated", 8, 8, 1, 8, 1)],
            id="tp-left-out-with-attention-dp",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 8, "parallel": {"tp": 2, "dp": 4}},
            [("aggregated", 8, 2, 1, 4, 1)],
            id="given-layout-kept",
        ),
    ],
)
def test_parallel_follows_from_the_gpus(
    topology: dict[str, Any], expected: list[tuple[str, int, int, int, int, int]]
) -> None:
    assert layouts(topology) == expected


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        pytest.param(
            {"mode": "aggregated", "gpus": 4, "parallel": {"tp": 2}},
            "gpus is 4 but parallel gives 2 (tp 2 × pp 1 × dp 1)",
            id="given-tp-too-small",
        ),
        pytest.param(
            {
                "mode": "disaggregated",
                "prefill": {"gpus": 4},
                "decode": {"gpus": 8, "parallel": {"tp": 4}},
            },
            "gpus is 8 but parallel gives 4 (tp 4 × pp 1 × dp 1)",
            id="given-decode-tp-too-small",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 8, "parallel": {"dp": 3}},
            "gpus is 8 but parallel gives 3 (tp 1 × pp 1 × dp 3)",
            id="dp-does-not-divide-the-gpus",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 4, "parallel": {"ep": 8}},
            "ep (8) exceeds the replica's 4 GPUs",
            id="ep-beyond-the-gpus",
        ),
    ],
)
def test_an_inconsistent_parallel_is_refused(topology: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TOPOLOGY.validate_python(topology)
    assert message in str(caught.value)
