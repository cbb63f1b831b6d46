"""The settings flags vLLM and SGLang name alike, from each card's spelling of the values."""

from __future__ import annotations

import pytest

from reconciler.engines.base import FlagTable
from reconciler.engines.common_flags import dtype_flags, quantization_flags
from reconciler.errors import UnsupportedSetting
from reconciler.spec.recipe import Settings

TABLE = FlagTable(
    engine="toy",
    version="1.0",
    table="1.0",
    flags=frozenset({"--dtype", "--kv-cache-dtype", "--quantization"}),
    choices={"--kv-cache-dtype": frozenset({"fp8_e4m3"})},
)


def settings(**fields: object) -> Settings:
    return Settings.model_validate(fields)


def test_auto_dtypes_write_nothing_and_the_kv_dtype_is_spelled_by_the_card() -> None:
    assert dtype_flags(settings(), TABLE, {}) == []
    spelled = dtype_flags(
        settings(dtype="bfloat16", kv_cache={"dtype": "fp8"}), TABLE, {"fp8": "fp8_e4m3"}
    )
    assert spelled == ["--dtype", "bfloat16", "--kv-cache-dtype", "fp8_e4m3"]


def test_a_kv_dtype_the_version_does_not_take_names_the_setting() -> None:
    with pytest.raises(UnsupportedSetting, match=r"settings\.kv_cache\.dtype"):
        dtype_flags(settings(kv_cache={"dtype": "fp8"}), TABLE, {"fp8": "fp8"})


def test_quantization_is_the_card_s_method_or_refused_with_its_reason() -> None:
    assert quantization_flags(settings(), TABLE, {}, {}) == []
    methods = {"nvfp4": "modelopt_fp4"}
    assert quantization_flags(settings(quantization="nvfp4"), TABLE, methods, {}) == [
        "--quantization",
        "modelopt_fp4",
    ]
    with pytest.raises(UnsupportedSetting, match="names no one method"):
        quantization_flags(settings(quantization="int4"), TABLE, {"int4": "int4"})
    with pytest.raises(UnsupportedSetting, match="has no w8a8_fp8"):
        refused = {"w8a8_fp8": "has no w8a8_fp8"}
        quantization_flags(settings(quantization="w8a8_fp8"), TABLE, {}, refused)
