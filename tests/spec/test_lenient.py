"""A release file read leniently: what it names, and nothing when it does not parse."""

from __future__ import annotations

import pytest

from reconciler.spec.lenient import ReleaseNames, release_names

RELEASE = b"""\
release: { model: m, weights: hf://o/m@abc, recipe: m/vllm@1 }
stages:
  - { name: canary, fleets: [lab] }
  - { name: prod, fleets: [us, eu], recipes: { eu: m/sglang@2 } }
"""


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            RELEASE,
            ReleaseNames(
                ("m/sglang@2", "m/vllm@1"),
                ("eu", "lab", "us"),
                (("canary", "lab"), ("prod", "eu"), ("prod", "us")),
            ),
        ),
        (b"release: [unclosed\n", ReleaseNames()),
        (b"- a list\n", ReleaseNames()),
        (b"stages: [7, {fleets: [x, 3]}]\n", ReleaseNames((), ("x",))),
    ],
    ids=["names", "broken", "not-a-mapping", "odd-entries"],
)
def test_release_names(data: bytes, expected: ReleaseNames) -> None:
    assert release_names(data) == expected
