"""Pure logic: SGLang — `python -m sglang.launch_server` argv, env, ports and probes for every
unit of a deployment.

Flags per version as read from SGLang's own parsers (flags.py); where a flag changed
between versions (attention DP, turning CUDA graphs off) the table decides which spelling
is used. A multi-node replica runs one process per node (`--nnodes`, `--node-rank`,
`--dist-init-addr`); the HTTP server is node 0's. P/D pools use `--disaggregation-mode`.
"""

from __future__ import annotations

from reconciler.catalog.deployments import Deployment
from reconciler.engines.base import (
    FlagTable,
    check_args,
    check_consistent,
    flag_tables,
    health,
    model_source,
    number,
    parallel_where,
    pick_table,
    visible_devices,
    weights_source,
)
from reconciler.engines.common_flags import dtype_flags, quantization_flags
from reconciler.engines.placement import BOOTSTRAP, DIST_INIT, HTTP, Placement, Slot
from reconciler.engines.replicas import engine_unit, replica_units
from reconciler.engines.sglang.flags import SGLANG_CHOICES, SGLANG_FLAG_HISTORY
from reconciler.engines.units import EngineContext, Unit
from reconciler.errors import UnsupportedSetting
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Parallel, Pool, Recipe, Role, Settings

TABLES = flag_tables(SGLANG_FLAG_HISTORY)

_TOPOLOGY = [
    "--tp-size",
    "--tensor-parallel-size",
    "--pp-size",
    "--pipeline-parallel-size",
    "--dp-size",
    "--data-parallel-size",
    "--ep-size",
    "--expert-parallel-size",
    "--ep",
    "--attn-dp-size",
    "--attention-data-parallel-size",
    "--enable-dp-attention",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--nccl-init-addr",
    "--disaggregation-mode",
    "--disaggregation-transfer-backend",
    "--disaggregation-bootstrap-port",
]
_SPECULATIVE = [
    "--speculative-algorithm",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-draft-model-path",
    "--speculative-draft-model",
    "--speculative-draft-model-revision",
]
# Flags denv sets itself, with what sets them; recipe.args may not pass them.
MANAGED: dict[str, str] = {
    **dict.fromkeys(["--model-path", "--model", "--served-model-name"], "the release"),
    "--revision": "the release's weights",
    **dict.fromkeys(["--host", "--port"], "placement"),
    **dict.fromkeys(_TOPOLOGY, "topology"),
    **dict.fromkeys(_SPECULATIVE, "settings.speculative"),
    "--max-running-requests": "settings.max_batch",
    "--max-prefill-tokens": "settings.max_batched_tokens",
    "--chunked-prefill-size": "settings.chunked_prefill",
    "--context-length": "settings.max_model_len",
    "--dtype": "settings.dtype",
    "--kv-cache-dtype": "settings.kv_cache.dtype",
    "--disable-radix-cache": "settings.kv_cache.prefix_caching",
    "--mem-fraction-static": "settings.kv_cache.memory_fraction",
    "--enable-hierarchical-cache": "settings.kv_cache.offload",
    "--enable-hicache": "settings.kv_cache.offload",
    "--hicache-size": "settings.kv_cache.offload_gb",
    "--quantization": "settings.quantization",
    "--cuda-graph-backend-decode": "settings.cuda_graphs",
    "--cuda-graph-backend-prefill": "settings.cuda_graphs",
    "--disable-cuda-graph": "settings.cuda_graphs",
    "--enable-metrics": "denv (metrics are always on)",
    "--random-seed": "the engine context's seed",
}

KV_DTYPE = {"bf16": "bf16", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
QUANTIZATION = {
    "fp8": "fp8",
    "fp4": "modelopt_fp4",
    "nvfp4": "modelopt_fp4",
    "mxfp4": "mxfp4",
    "awq": "awq",
    "gptq": "gptq",
    "w8a8_fp8": "w8a8_fp8",
}
SPECULATIVE = {
    "mtp": "NEXTN",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "ngram": "NGRAM",
    "draft_model": "STANDALONE",
}
TRANSFER_BACKEND = {"nvidia": "nixl", "amd": "mori"}  # KV transfer between P/D pools
RUNNING = "sglang:num_running_reqs"  # requests in the running batch
WAITING = "sglang:num_queue_reqs"  # requests queued, not yet running


def table(version: str) -> FlagTable:
    return pick_table("sglang", version, TABLES, SGLANG_CHOICES)


def settings_flags(settings: Settings, flags: FlagTable) -> list[str]:
    """The engine-neutral settings as SGLang flags; UnsupportedSetting for what it lacks."""
    label, s, kv = flags.label, settings, settings.kv_cache
    check_consistent(s, label)
    argv: list[str] = []
    if s.max_batch is not None:
        argv += ["--max-running-requests", str(s.max_batch)]
    if s.max_batched_tokens is not None:
        argv += ["--max-prefill-tokens", str(s.max_batched_tokens)]
    if s.chunked_prefill is False:
        argv += ["--chunked-prefill-size", "-1"]
    elif s.chunked_prefill is not None and s.chunked_prefill is not True:
        argv += ["--chunked-prefill-size", str(s.chunked_prefill)]
    if s.max_model_len is not None:
        argv += ["--context-length", str(s.max_model_len)]  # a plain integer: no k/Ki
    argv += dtype_flags(s, flags, KV_DTYPE)
    if not kv.prefix_caching:
        argv.append("--disable-radix-cache")
    argv += ["--mem-fraction-static", number(kv.memory_fraction)]
    if kv.offload == "cpu":
        argv.append("--enable-hierarchical-cache")
        if kv.offload_gb is not None:
            if not kv.offload_gb.is_integer():
                raise UnsupportedSetting(
                    "settings.kv_cache.offload_gb",
                    number(kv.offload_gb),
                    label,
                    "--hicache-size takes whole GB",
                )
            argv += ["--hicache-size", number(kv.offload_gb)]
    argv += quantization_flags(s, flags, QUANTIZATION)
    argv += _speculative(s)
    if not s.cuda_graphs:
        if flags.has("--cuda-graph-backend-decode"):
            argv += ["--cuda-graph-backend-decode", "disabled"]
            argv += ["--cuda-graph-backend-prefill", "disabled"]
        else:
            argv.append(flags.require("--disable-cuda-graph", "settings.cuda_graphs", "false"))
    return argv


def _speculative(settings: Settings) -> list[str]:
    """Draft `n` tokens a step: EAGLE-style chains of n steps, top-1, n + 1 tokens verified
    (the last accepted token included); NGRAM proposes n + 1 tokens the same way."""
    spec = settings.speculative
    if spec.method == "none" or spec.draft_tokens is None:
        return []
    steps = spec.draft_tokens
    argv = ["--speculative-algorithm", SPECULATIVE[spec.method]]
    if spec.method != "ngram":
        argv += ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1"]
    argv += ["--speculative-num-draft-tokens", str(steps + 1)]
    if spec.draft_model:
        model, revision = weights_source(spec.draft_model)
        argv += ["--speculative-draft-model-path", model]
        argv += ["--speculative-draft-model-revision", revision] if revision else []
    return argv


def check_pool(settings: Settings, p: Parallel, where: str, flags: FlagTable) -> None:
    """Refuse settings SGLang cannot run with a pool's layout (the optimizer asks too)."""
    if settings.speculative.method == "ngram" and p.dp_attention:
        raise UnsupportedSetting(
            "settings.speculative.method",
            "ngram",
            flags.label,
            f"SGLang's ngram drafting does not run with attention DP ({where}.dp_attention)",
        )


def parallel(p: Parallel, nodes: int, where: str, flags: FlagTable) -> list[str]:
    """tp/pp/ep/dp and attention DP as SGLang flags, refusing what it cannot run."""
    label = flags.label
    if p.ep > 1 and p.tp % p.ep:
        raise UnsupportedSetting(
            f"{where}.ep",
            p.ep,
            label,
            f"SGLang runs expert parallelism inside the TP group, so ep must divide tp ({p.tp})",
        )
    if p.dp > 1 and not p.dp_attention and nodes > 1:
        raise UnsupportedSetting(
            f"{where}.dp",
            p.dp,
            label,
            f"a replica over {nodes} hosts spans them with its TP group; DP replicas without "
            f"dp_attention do not span hosts (run them as replicas)",
        )
    sizes = [("--tp-size", p.tp), ("--pp-size", p.pp), ("--ep-size", p.ep)]
    argv = [part for flag, size in sizes if size > 1 for part in (flag, str(size))]
    if p.dp > 1 and not p.dp_attention:
        argv += ["--dp-size", str(p.dp)]
    elif p.dp > 1 and flags.has("--attn-dp-size"):
        argv += ["--attn-dp-size", str(p.dp)]
    elif p.dp > 1:  # before --attn-dp-size: attention DP groups were counted by --dp-size
        argv += ["--dp-size", str(p.dp), "--enable-dp-attention"]
    return argv


def _disaggregation(role: Role, head: Slot, hardware: Hardware, flags: FlagTable) -> list[str]:
    if role == "aggregated":
        return []
    backend = TRANSFER_BACKEND.get(hardware.vendor, "mooncake")
    allowed = flags.choices.get("--disaggregation-transfer-backend", frozenset())
    if backend not in allowed:
        raise UnsupportedSetting(
            "topology.mode",
            "disaggregated",
            flags.label,
            f"denv moves KV between pools with {backend} on {hardware.vendor} hardware, and "
            f"{flags.source} has no {backend} transfer backend",
        )
    argv = ["--disaggregation-mode", role, "--disaggregation-transfer-backend", backend]
    if role == "prefill":
        argv += ["--disaggregation-bootstrap-port", str(head.at(BOOTSTRAP))]
    return argv


def _replica(
    deployment: Deployment,
    role: Role,
    pool: Pool,
    slots: list[Slot],
    context: EngineContext,
    flags: FlagTable,
) -> list[Unit]:
    recipe, head = deployment.recipe, slots[0]
    where = parallel_where(role)
    model, revision = model_source(deployment, context)
    first = [context.engine_python, "-m", "sglang.launch_server", "--model-path", model]
    first += ["--served-model-name", deployment.served_model]
    first += ["--revision", revision] if revision else []
    layout = parallel(pool.parallel, len(slots), where, flags)
    check_pool(recipe.settings, pool.parallel, where, flags)
    tail = settings_flags(recipe.settings, flags)
    tail += _disaggregation(role, head, context.hardware, flags)
    tail += ["--enable-metrics", "--random-seed", str(context.seed)]
    tail += check_args(recipe.args, flags, MANAGED)
    bootstrap = head.at(BOOTSTRAP) if role == "prefill" else None
    init = f"[{head.address}]" if ":" in head.address else head.address
    units = []
    for slot in slots:
        serve = [] if slot.node else ["--host", slot.address, "--port", str(slot.at(HTTP))]
        nodes = []
        if slot.nodes > 1:
            nodes = ["--nnodes", str(slot.nodes), "--node-rank", str(slot.node)]
            nodes += ["--dist-init-addr", f"{init}:{head.at(DIST_INIT)}"]
        units.append(
            engine_unit(
                "sglang",
                role,
                slot,
                first + serve + layout + nodes + tail,
                visible_devices(context.hardware, slot.gpu_indices),
                health(),
                RUNNING,
                flags.source,
                bootstrap_port=bootstrap,
                waiting=WAITING,
            )
        )
    return units


def check_hardware(recipe: Recipe, hardware: Hardware) -> None:
    if hardware.vendor == "cpu":
        label = f"sglang {recipe.engine.version}"
        raise UnsupportedSetting(
            "hardware", hardware.id, label, "denv runs only vLLM's CPU build on CPU"
        )


def units(deployment: Deployment, placement: Placement, context: EngineContext) -> list[Unit]:
    flags = table(deployment.recipe.engine.version)
    check_hardware(deployment.recipe, context.hardware)
    return replica_units(deployment, placement, context, flags, _replica)
