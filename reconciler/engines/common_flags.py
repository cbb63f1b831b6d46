"""Pure logic: the engine-neutral settings as the flags vLLM and SGLang name alike
(`--dtype`, `--kv-cache-dtype`, `--quantization`), each card passing how it spells the values."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.engines.base import FlagTable
from reconciler.errors import UnsupportedSetting
from reconciler.spec.recipe import Settings

# Quantizations no engine can take as they stand: which method is meant is the checkpoint's.
NO_METHOD = {"int4": "int4 names no one method; use awq or gptq, the checkpoint's format"}


def dtype_flags(settings: Settings, flags: FlagTable, kv_dtypes: Mapping[str, str]) -> list[str]:
    """`--dtype` and `--kv-cache-dtype`, which vLLM and SGLang name alike: the weights' dtype
    as the recipe gives it, the KV cache's as the engine spells it (`kv_dtypes`); `auto`: none."""
    argv: list[str] = []
    if settings.dtype != "auto":
        value = flags.value("--dtype", settings.dtype, "settings.dtype", settings.dtype)
        argv += ["--dtype", value]
    kv = settings.kv_cache.dtype
    if kv != "auto":
        value = flags.value("--kv-cache-dtype", kv_dtypes[kv], "settings.kv_cache.dtype", kv)
        argv += ["--kv-cache-dtype", value]
    return argv


def quantization_flags(
    settings: Settings,
    flags: FlagTable,
    methods: Mapping[str, str],
    refused: Mapping[str, str] | None = None,
) -> list[str]:
    """`--quantization`, which vLLM and SGLang name alike: the engine's method for the
    recipe's quantization; UnsupportedSetting, with the reason, for one in NO_METHOD or in
    what the engine refuses (`refused`)."""
    quantization = settings.quantization
    refused = {**NO_METHOD, **(refused or {})}
    if quantization in refused:
        raise UnsupportedSetting(
            "settings.quantization", quantization, flags.label, refused[quantization]
        )
    if quantization == "none":
        return []
    method = flags.value(
        "--quantization", methods[quantization], "settings.quantization", quantization
    )
    return ["--quantization", method]
