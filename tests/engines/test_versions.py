"""Engine versions denv has no flag table for: refused where they are written (a recipe's
engine.version, a release's overrides.engine), with the versions denv knows and the nearest
one it could use — before anything renders."""

from __future__ import annotations

import pytest

from reconciler.engines.sglang import argv as sglang
from reconciler.engines.versions import known_versions, version_refusal
from reconciler.engines.vllm import argv as vllm


def test_known_versions_are_the_flag_tables_oldest_first() -> None:
    assert known_versions("vllm") == sorted(
        vllm.TABLES, key=lambda v: tuple(map(int, v.split(".")))
    )
    assert known_versions("sglang") == ["0.5.8", "0.5.9", "0.5.12", "0.5.16", "0.5.23"]
    assert set(known_versions("sglang")) == set(sglang.TABLES)
    assert known_versions("sim") == []


@pytest.mark.parametrize(
    ("engine", "version"),
    [
        pytest.param("sglang", "0.5.8", id="oldest-table"),
        pytest.param("sglang", "0.5.12.post1", id="post-release-uses-the-table-below"),
        pytest.param("sglang", "0.5.24", id="newer-than-every-table"),
        pytest.param("vllm", "0.33.0", id="vllm-table"),
        pytest.param("sim", "0.0.1", id="the-simulator-takes-any-version"),
    ],
)
def test_versions_a_table_covers_are_accepted(engine: str, version: str) -> None:
    assert version_refusal(engine, version) is None


@pytest.mark.parametrize(
    ("engine", "version", "known", "nearest"),
    [
        pytest.param("vllm", "0.11.0", "vllm 0.32.0, 0.33.0", "0.32.0", id="vllm-older"),
        pytest.param(
            "sglang",
            "0.5.8rc1",
            "sglang 0.5.8, 0.5.9, 0.5.12, 0.5.16, 0.5.23",
            "0.5.8",
            id="sglang-release-candidate-before-the-oldest",
        ),
        pytest.param(
            "sglang",
            "0.4.10",
            "sglang 0.5.8, 0.5.9, 0.5.12, 0.5.16, 0.5.23",
            "0.5.8",
            id="sglang-older",
        ),
    ],
)
def test_a_version_older_than_every_table_is_refused(
    engine: str, version: str, known: str, nearest: str
) -> None:
    assert version_refusal(engine, version) == (
        f"{engine} {version} has no flag table in denv (it knows {known}); the nearest it "
        f"could use is {nearest}, or add a table for {version} (docs/engines.md, 'Adding a "
        "version')"
    )
