"""Pure logic: how a simulator describes itself — `/v1/models`, `/server_info` and
`/model_info` bodies (SGLang's shapes, kept to what sglang-router reads), the metrics' info
labels and the `system_fingerprint` of its answers. Each says the engine is simulated and
at which time scale, so no figure it produces passes for a real engine's."""

from __future__ import annotations

from typing import Any

from reconciler.engines.model.spec import SimSpec

OWNER = "denv-sim"


def fingerprint(time_scale: float) -> str:
    """`denv-sim`, or `denv-sim-x10` for a simulator running ten times faster than real time."""
    return OWNER if time_scale == 1 else f"{OWNER}-x{time_scale:g}"


def labels(spec: SimSpec) -> dict[str, str]:
    """The labels of `denv_sim_info`."""
    engine = spec.recipe.engine
    return {
        "simulated": "true",
        "time_scale": f"{spec.time_scale:g}",
        "hardware": spec.hardware.id,
        "gpus": str(spec.gpus),
        "weights": spec.weights,
        "recipe": spec.recipe.id,
        "role": spec.role,
        "engine_name": engine.name,
        "engine_version": engine.version,
    }


def models(spec: SimSpec, context: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": spec.served_model,
                "object": "model",
                "created": 0,
                "owned_by": OWNER,
                "root": spec.weights,
                "parent": None,
                "max_model_len": context,
            }
        ],
    }


def server_info(spec: SimSpec, context: int, bootstrap_port: int | None) -> dict[str, Any]:
    parallel = spec.recipe.topology.pools()[0][1].parallel
    for role, pool in spec.recipe.topology.pools():
        if role == spec.role:
            parallel = pool.parallel
    settings = spec.recipe.settings
    return {
        "model_path": spec.served_model,
        "served_model_name": spec.served_model,
        "tokenizer_path": None,
        "context_length": context,
        "tp_size": parallel.tp,
        "pp_size": parallel.pp,
        "dp_size": parallel.dp,
        "ep_size": parallel.ep,
        "max_running_requests": settings.max_batch,
        "disaggregation_mode": "null" if spec.role == "aggregated" else spec.role,
        "disaggregation_bootstrap_port": bootstrap_port,
        "version": spec.recipe.engine.version,
        "simulated": True,
        "time_scale": spec.time_scale,
        "system_fingerprint": fingerprint(spec.time_scale),
        "hardware": spec.hardware.id,
        "gpus": spec.gpus,
        "weights": spec.weights,
        "recipe": spec.recipe.id,
    }


def model_info(spec: SimSpec) -> dict[str, Any]:
    return {
        "model_path": spec.served_model,
        "tokenizer_path": None,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": spec.weights,
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": None,
        "architectures": None,
    }
