"""Models: what the host agent reports — GPUs and denv's units on one host."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Observed(BaseModel):
    """Agent answers: tolerant of keys a newer agent adds, frozen once read."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class GpuProcess(Observed):
    pid: int
    used_mib: int | None = None


class Gpu(Observed):
    index: int
    uuid: str | None = None
    name: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    domain: str | None = None  # NVLink domain (fabric cluster/clique) where the driver says


class UnitRecord(Observed):
    id: str
    digest: str
    argv: tuple[str, ...] = ()
    port: int | None = None
    gpus: tuple[int, ...] = ()
    pid: int | None = None
    start_time: int | None = None
    started_at: float | None = None
    restart: bool = False  # its supervisor starts it again when it exits (a router)
    restarts: int = 0
    exit_code: int | None = None
    exited_at: float | None = None
    log: str | None = None
    log_error: str | None = None
    alive: bool = False
    env: dict[str, str] = {}
    labels: dict[str, str] = {}  # what the reconciler launched it as: release, stage, fleet, …


class HostObservation(Observed):
    host: str
    source: str  # nvml, amdsmi, nvidia-smi, amd-smi, simulated or none
    driver: str | None = None
    runtime: str | None = None
    gpus: tuple[Gpu, ...] = ()
    units: tuple[UnitRecord, ...] = ()
    tried: tuple[str, ...] = ()
    home: str | None = None  # the agent's state folder (DENV_HOME) on the host
    container_engine: str | None = None  # docker or podman when on PATH
    listening: tuple[int, ...] = ()  # TCP ports some process listens on (denv's units too)
