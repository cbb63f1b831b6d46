"""A kind of fleet defined outside the package, as a Kubernetes kind would be: `pods`, with
its own block in the fleet file (`pods: { namespace: … }`), its own way of making a unit
runnable (a pod running the engine's own command, no container runtime on any host), its
own weights location and its own driver, which keeps the pods in memory (launching starts no
process) and reports them back as running. tests/reconcile/test_fleet_kind_seam.py registers
it the way the one registry line would."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field

from reconciler.engines.runtime import Runnable
from reconciler.engines.units import Unit
from reconciler.fleet.model.observed import FleetObservation, Gpu, HostObservation, UnitRecord
from reconciler.spec.base import Spec
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.fleetkinds import FleetKind
from tests.reconcile.memory_driver import QuietVerbs, launched

# What the registry line would say: the card is this module, its block this model.
DRIVER = "tests.reconcile.podkind:PodDriver"
ONE_JOB_PER_REPLICA = False
AGENTS_USER = None
VOLUME = "/models"  # the cluster's shared volume, mounted in every pod


class PodsSettings(Spec):
    namespace: str = Field(pattern=r"^[a-z0-9-]+$")
    pull_policy: str = "IfNotPresent"


class PodRuntime(Spec):
    """How units run on one node of the cluster: in pods of the fleet's namespace."""

    namespace: str
    pull_policy: str


KIND = FleetKind("tests.reconcile.podkind", PodsSettings)


def host_runtimes(
    fleet: Fleet, hardware: Hardware, observation: FleetObservation | None, home: str
) -> dict[str, PodRuntime]:
    settings = fleet.settings(PodsSettings)
    assert settings is not None  # the fleet model requires the block of its kind
    runtime = PodRuntime(namespace=settings.namespace, pull_policy=settings.pull_policy)
    return {host.name: runtime for host in fleet.hosts}


def model_path(source: str) -> str:
    return f"{VOLUME}/{source.rsplit('/', 1)[-1]}"


def runnable(
    unit: Unit,
    unit_id: str,
    version: str,
    image: str | None,
    runtime: Spec,
    weights: str | None,
) -> Runnable:
    """The unit as a pod: the engine's own command, in the fleet's namespace."""
    assert isinstance(runtime, PodRuntime)
    pod = ["pod", "run", unit_id, f"--namespace={runtime.namespace}"]
    pod += [f"--pull={runtime.pull_policy}", f"--volume={VOLUME}", "--", *unit.argv]
    return Runnable(unit=unit.model_copy(update={"argv": pod}))


def jobs(fleet: Fleet, units: list[Unit], trial: bool) -> dict[str, Any]:
    return {}  # the driver starts each pod itself


def runs_here(fleet: Fleet) -> bool:
    return False


def view(fleet: Fleet, seen: FleetObservation) -> dict[str, Any] | None:
    return None


class PodDriver(QuietVerbs):
    """The cluster, held in memory: what is launched is recorded, and observed as running."""

    launched: list[tuple[str, list[str]]] = []  # (node, argv), across drivers made in a test

    def __init__(
        self, fleet: Fleet, warn: Callable[[str], None], env: Mapping[str, str] | None
    ) -> None:
        self.fleet = fleet
        self.running: dict[str, dict[str, UnitRecord]] = {h.name: {} for h in fleet.hosts}

    python = "python3"

    def address(self, host: Host) -> str:
        return f"{host.name}.pods.invalid"

    def default_home(self) -> str:
        return "/var/lib/denv"

    def observe(self, hardware: Hardware | None) -> FleetObservation:
        found = FleetObservation(self.fleet.name)
        for host in self.fleet.hosts:
            found.hosts[host.name] = HostObservation(
                host=host.name,
                source="pods",
                gpus=tuple(Gpu(index=i) for i in range(host.gpus)),
                units=tuple(self.running[host.name].values()),
            )
        return found

    def prepare(self, host: str, payload: Mapping[str, Any], wait: float) -> Any:
        return {"id": payload["id"], "state": "done", "step": "done"}

    def launch(self, host: str, unit: Mapping[str, Any]) -> UnitRecord:
        record = launched(unit)
        self.running[host][record.id] = record
        PodDriver.launched.append((host, list(unit["argv"])))
        return record

    def stop(self, host: str, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        self.running[host].pop(unit_id, None)
        return {"stopped": unit_id}

    def units(self, host: str) -> list[UnitRecord]:
        return list(self.running[host].values())
