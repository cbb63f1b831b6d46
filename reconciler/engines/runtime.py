"""Pure logic: how a unit's process runs on a host — in the engine version's official container
image, or in a per-version Python environment the agent builds — and what must be made ready
on the host (`prepare`) before it starts.

Engine modules write argv as if the engine were installed (`vllm serve …`, `python3 -m
sglang.launch_server …`); this module turns that into the runtime's argv:

- venv: `<home>/engines/<engine>-<version>/bin/python -m <module> …`. The module form, because
  the environment is built in a temporary folder and renamed into place, which leaves console
  scripts (`bin/vllm`) pointing at the temporary path; `bin/python` finds its environment
  wherever the folder is.
- container: `docker|podman run --rm --name denv-<unit id> … <image> …` with host networking
  (ports and the collectives of multi-node replicas are the host's), `--ipc=host`, the GPUs,
  the weights mounted read-only, and the env. The agent stops a container unit by signalling
  the client (which forwards it) and then removing the container by name.
- Routers run in a venv of their own package whatever the runtime: they are small, and the
  vLLM image carries no router.
- The simulator runs in the bot's own environment: nothing to prepare.
"""

from __future__ import annotations

from typing import Literal

from reconciler.engines.cards import card, cards
from reconciler.engines.router import router_packages
from reconciler.engines.units import Unit
from reconciler.errors import EngineError
from reconciler.spec.base import Spec
from reconciler.spec.engines import engine_names

RuntimeKind = Literal["container", "venv", "sim"]
ContainerEngine = Literal["docker", "podman"]
Vendor = Literal["nvidia", "amd", "cpu"]

SHM_SIZE = "16g"  # NCCL and the engines' worker processes share tensors through /dev/shm


class HostRuntime(Spec):
    """How engines run on one host: the fleet's choice, or the host's container engine."""

    kind: RuntimeKind
    home: str  # the agent's state folder on the host (DENV_HOME)
    container_engine: ContainerEngine | None = None
    vendor: Vendor = "nvidia"


class Need(Spec):
    """One thing `prepare` makes ready on a host: a Python environment or a container image."""

    kind: Literal["venv", "container"]
    name: str  # venv folder name (vllm-0.33.0) or image reference
    packages: tuple[str, ...] = ()
    index_urls: tuple[str, ...] = ()
    uninstall: tuple[str, ...] = ()  # removed after the install: what the build cannot load
    container_engine: ContainerEngine | None = None


def choose_runtime(
    declared: RuntimeKind | None,
    simulated: bool,
    found_engine: ContainerEngine | None,
    home: str,
    vendor: Vendor,
) -> HostRuntime:
    """The fleet's `runtime`, else a container where the host has a container engine."""
    if simulated:
        return HostRuntime(kind="sim", home=home, vendor=vendor)
    kind = declared or ("container" if found_engine else "venv")
    if kind == "container" and found_engine is None:
        raise EngineError("runtime container: the host has neither docker nor podman on PATH")
    return HostRuntime(kind=kind, home=home, container_engine=found_engine, vendor=vendor)


def venv_name(package: str, version: str) -> str:
    return f"{package}-{version}"


def image_for(engine: str, version: str, override: str | None, vendor: str = "nvidia") -> str:
    if override:
        return override
    if vendor == "cpu":
        raise EngineError(
            f"{engine} {version} on CPU: the official tags are CUDA builds; set the recipe's "
            f"engine.image to a CPU build, or run the fleet with runtime: venv"
        )
    if vendor != "nvidia":  # the official tags are CUDA builds; ROCm tags name ROCm and GPU
        raise EngineError(
            f"{engine} {version} on {vendor} GPUs: set the recipe's engine.image to the ROCm "
            f"build (e.g. lmsysorg/sglang:v0.5.12-rocm700-mi35x)"
        )
    image = card(engine).IMAGE if engine in engine_names() else None
    if image is None:
        raise EngineError(f"no official image known for engine {engine}; set engine.image")
    return image.format(version=version)


def need_for(unit: Unit, version: str, runtime: HostRuntime, image: str | None = None) -> Need:
    """What must be ready on the unit's host before the unit starts."""
    if unit.role == "router":
        package = unit.engine
        pinned = router_packages()[package]
        return Need(
            kind="venv", name=venv_name(package, pinned), packages=(f"{package}=={pinned}",)
        )
    if runtime.kind == "container":
        return Need(
            kind="container",
            name=image_for(unit.engine, version, image, runtime.vendor),
            container_engine=runtime.container_engine,
        )
    known = card(unit.engine) if unit.engine in engine_names() else None
    package, uninstall = (known.BUILDS if known else {}).get(runtime.vendor, (unit.engine, ()))
    return Need(
        kind="venv",
        name=venv_name(package, version),
        packages=(f"{package}=={version}",),
        index_urls=known.EXTRA_INDEX if known else (),
        uninstall=uninstall,
    )


def unit_id_name(unit_id: str) -> str:
    """The container name of a unit: its id is already unique on the host."""
    return f"denv-{unit_id}"


def _scripts() -> dict[tuple[str, ...], tuple[str, ...]]:
    """argv prefixes the engines' argv builders write, and the module that runs them (each
    card's `SCRIPTS`)."""
    return {prefix: module for c in cards().values() for prefix, module in c.SCRIPTS.items()}


def _script(argv: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(prefix, module form) of the console script argv starts with, if any."""
    for prefix, module in _scripts().items():
        if tuple(argv[: len(prefix)]) == prefix:
            return prefix, module
    return None


def module_argv(argv: list[str]) -> list[str]:
    """argv after the interpreter: `vllm serve …` → `-m vllm.entrypoints.cli.main serve …`,
    `python3 -m x …` → `-m x …`."""
    script = _script(argv)
    if script is not None:
        prefix, module = script
        return [*module, *argv[len(prefix) :]]
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[1:]
    raise EngineError(f"cannot run {argv[0]!r} in a runtime (expected `vllm serve` or `-m`)")


def in_venv(unit: Unit, need: Need, home: str) -> list[str]:
    return [f"{home}/engines/{need.name}/bin/python", *module_argv(unit.argv)]


def in_container(
    unit: Unit, unit_id: str, need: Need, runtime: HostRuntime, weights_dir: str | None
) -> tuple[list[str], list[str]]:
    """(argv, cleanup argv) of a container unit."""
    engine = need.container_engine or "docker"
    name = unit_id_name(unit_id)
    argv = [engine, "run", "--rm", "--name", name, "--network", "host", "--ipc", "host"]
    argv += ["--shm-size", SHM_SIZE, "--init"]
    if unit.gpu_indices and runtime.vendor == "nvidia":
        devices = ",".join(str(i) for i in unit.gpu_indices)
        argv += ["--gpus", f'"device={devices}"']  # quoted: docker splits the value on commas
    elif unit.gpu_indices and runtime.vendor == "amd":  # HIP_VISIBLE_DEVICES (env) picks GPUs
        argv += ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"]
        argv += ["--security-opt", "seccomp=unconfined"]
    if unit.cpus:
        argv += ["--cpuset-cpus", ",".join(str(i) for i in unit.cpus)]
    if weights_dir:
        argv += ["--volume", f"{weights_dir}:{weights_dir}:ro"]
    for key, value in sorted(unit.env.items()):
        if key == "CUDA_VISIBLE_DEVICES" and runtime.vendor == "nvidia":
            continue  # --gpus exposes exactly these GPUs, renumbered from 0
        argv += ["--env", f"{key}={value}"]
    # A console script is the image's own entrypoint (`vllm`); a module runs under python3.
    script = _script(unit.argv) is not None
    interpreter = unit.argv[0] if script else "python3"
    rest = unit.argv[1:] if script else module_argv(unit.argv)
    argv += ["--entrypoint", interpreter, need.name, *rest]
    return argv, [engine, "rm", "--force", name]


class Runnable(Spec):
    """A unit as its host runs it: the runtime's argv, how to clean up after it, what to
    prepare first (None: nothing, the simulator)."""

    unit: Unit
    cleanup: list[str] | None = None
    need: Need | None = None


def in_runtime(
    unit: Unit,
    unit_id: str,
    version: str,
    runtime: HostRuntime,
    image: str | None = None,
    weights_dir: str | None = None,
) -> Runnable:
    """The unit as it runs on a host of `runtime`."""
    if runtime.kind == "sim":
        return Runnable(unit=unit)
    need = need_for(unit, version, runtime, image)
    if need.kind == "venv":
        argv = in_venv(unit, need, runtime.home)
        return Runnable(unit=unit.model_copy(update={"argv": argv}), need=need)
    argv, cleanup = in_container(unit, unit_id, need, runtime, weights_dir)
    return Runnable(unit=unit.model_copy(update={"argv": argv}), cleanup=cleanup, need=need)
