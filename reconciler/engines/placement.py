"""Models and pure logic: where each (role, replica, node) of a deployment runs — host,
GPUs and a block of ports. Which host, GPUs, address and ports is decided by the fleet's placement
(reconciler.fleet.placement); engine modules only read a `Placement`, whoever made it.
Ports come in blocks of PORT_BLOCK from a base port: block 0 is the router's, then one
block per slot in order.
"""

from __future__ import annotations

from reconciler.spec.base import Spec
from reconciler.spec.recipe import Role

PORT_BLOCK = 32  # ports reserved per slot, at offsets:
HTTP = 0  # the engine's HTTP server (OpenAI API, /health, /metrics)
DIST_INIT = 1  # node 0 of a multi-node replica: torch.distributed rendezvous
DP_RPC = 2  # node 0 of a multi-node vLLM DP replica: --data-parallel-rpc-port
BOOTSTRAP = 3  # a prefill replica's KV bootstrap server (SGLang, simulator)
SIDE_CHANNEL = 16  # vLLM NIXL side channel: one port per local DP rank, up to 16
ROUTER_METRICS = 1  # in the router's block: its Prometheus port


class Slot(Spec):
    """One node of one replica: a host, GPUs on it, and a block of ports."""

    role: Role
    replica: int
    node: int
    nodes: int  # hosts this replica spans
    host: str
    address: str
    gpu_indices: list[int]
    port: int  # the first port of this slot's block

    def at(self, offset: int) -> int:
        return self.port + offset


class RouterSlot(Spec):
    host: str
    address: str
    port: int


class Placement(Spec):
    fleet: str
    slots: list[Slot]
    router: RouterSlot

    def replica(self, role: Role, replica: int) -> list[Slot]:
        """The nodes of one replica, node 0 first."""
        return [s for s in self.slots if s.role == role and s.replica == replica]
