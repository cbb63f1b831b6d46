"""Pure logic: a surge replica — the new spec of an aggregated, single-node engine replica
moved to other GPUs and another port, to serve beside the old replica during its replace."""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.engines.base import DEVICE_ENV
from reconciler.engines.placement import PORT_BLOCK
from reconciler.engines.units import Unit

SURGE_PORTS = range(20000, 30000, PORT_BLOCK)  # above the deployments' blocks


def surge_unit(unit: Unit, free_gpus: Iterable[int], used_ports: set[int]) -> Unit | None:
    """`unit` on `len(unit.gpu_indices)` of `free_gpus` and a free port block, or None when
    it cannot move that way (not an aggregated single-node engine, or no room)."""
    if unit.role != "aggregated" or unit.node != 0 or unit.port is None:
        return None
    if unit.argv.count("--port") != 1 or str(unit.port) not in unit.argv:
        return None
    count = len(unit.gpu_indices)
    gpus = sorted(free_gpus)[:count]
    if len(gpus) < count:
        return None
    taken = {p // PORT_BLOCK for p in used_ports}
    port = next((p for p in SURGE_PORTS if p // PORT_BLOCK not in taken), None)
    if port is None:
        return None
    argv = list(unit.argv)
    argv[argv.index("--port") + 1] = str(port)
    indices = ",".join(map(str, gpus))
    env = {k: (indices if k in DEVICE_ENV.values() else v) for k, v in unit.env.items()}
    metrics = unit.metrics.model_copy(update={"port": port}) if unit.metrics else None
    cpus = gpus if unit.cpus else []  # a CPU replica's cores are its "GPUs"
    moved = {"argv": argv, "env": env, "port": port, "gpu_indices": gpus, "cpus": cpus}
    return unit.model_copy(update={**moved, "metrics": metrics})
