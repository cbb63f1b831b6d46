"""Test helpers: SimSpecs from this repository's catalog, simulator and sglang-router
processes on free loopback ports (always stopped, also on failure), and waiting on
conditions with a timeout."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import selectors
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from ruamel.yaml import YAML

from reconciler.engines.model.spec import SimSpec
from reconciler.engines.placement import Placement, RouterSlot
from reconciler.engines.router import router_unit
from reconciler.engines.units import EngineContext, Metrics, Unit
from reconciler.spec.catalog import HardwareFile, ModelsFile
from reconciler.spec.recipe import RecipeFile
from tests.labs.processes import stop_process

ROOT = Path(__file__).resolve().parents[3]
T = TypeVar("T")


def _yaml(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


@functools.cache
def _catalog() -> tuple[ModelsFile, HardwareFile]:
    models = ModelsFile.model_validate(_yaml(ROOT / "catalog/models.yaml"))
    hardware = HardwareFile.model_validate(_yaml(ROOT / "catalog/hardware.yaml"))
    return models, hardware


def sim_spec(recipe: str = "llama-3.1-8b/vllm@1", hardware: str = "h200", **update: Any) -> SimSpec:
    """A SimSpec for a recipe of this repository; `update` sets SimSpec fields, and
    `settings={...}` merges into the recipe's settings."""
    model_key, name = recipe.split("/")
    loaded = RecipeFile.model_validate(_yaml(ROOT / f"recipes/{model_key}/{name}.yaml")).recipe
    if "settings" in update:
        merged = {**loaded.settings.model_dump(), **update.pop("settings")}
        loaded = loaded.model_copy(update={"settings": type(loaded.settings)(**merged)})
    models, hw = _catalog()
    model = next(m for m in models.models if m.id == model_key)
    fields: dict[str, Any] = {
        "served_model": model_key,
        "weights": f"hf://example/{model_key}@0000000",
        "model": model,
        "hardware": next(h for h in hw.hardware if h.id == hardware),
        "recipe": loaded,
        "gpus": loaded.topology.pools()[0][1].gpus,
        "warmup_s": 0,
    }
    return SimSpec.model_validate({**fields, **update})


def require_sglang_router() -> None:
    """At a test module's top: skip it where sglang-router (a dev dependency, installed by
    `make test`) is missing, except in CI, where that is an error."""
    try:
        import sglang_router  # noqa: F401
    except ImportError:  # pragma: no cover
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(
            "sglang-router is not installed: pip install -e '.[dev]'", allow_module_level=True
        )


def wait_until(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """Status and body; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, TimeoutError):
        return 0, b""


def http_post(url: str, body: dict[str, Any], timeout_s: float = 10.0) -> tuple[int, Any]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    url: str
    bootstrap_port: int | None
    line: str  # what it printed when listening
    log: Path

    def stop(self) -> int:
        stop_process(self.proc)
        return self.proc.returncode


def _read_line(proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    assert proc.stdout is not None
    buffer = b""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise TimeoutError(f"no line within {timeout_s}s")
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buffer += chunk
    return buffer.decode().splitlines()[0] if buffer else ""


@contextlib.contextmanager
def sim_process(spec: SimSpec, log_dir: Path, *flags: str, cpu: int | None = None) -> Iterator[Sim]:
    """`denv sim serve` on a free loopback port; stopped on the way out."""
    argv = [sys.executable, "-m", "reconciler", "sim", "serve", "--host", "127.0.0.1"]
    argv += ["--port", "0", "--spec-json", spec.model_dump_json(), *flags]
    log = log_dir / f"sim-{free_port()}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, cwd=ROOT)
    try:
        try:
            line = _read_line(proc, 30)
        except TimeoutError:
            line = ""
        found = re.search(r"at (http://[^\s,]+)", line)
        if not found:
            stop_process(proc)
            pytest.fail(f"the simulator did not start: {line!r}\n{log.read_text()}")
        bootstrap = re.search(r"bootstrap port (\d+)", line)
        sim = Sim(proc, found.group(1), int(bootstrap.group(1)) if bootstrap else None, line, log)
        yield sim
    finally:
        stop_process(proc)


@contextlib.contextmanager
def pd_pair(log_dir: Path, time_scale: float) -> Iterator[tuple[Sim, Sim]]:
    """A prefill and a decode simulator of llama-3.1-70b's disaggregated recipe (4 and 8
    GPUs), the prefill one with a bootstrap port; both stopped on the way out."""
    recipe = "llama-3.1-70b/vllm-disagg@1"
    prefill_spec = sim_spec(recipe, role="prefill", gpus=4, time_scale=time_scale)
    decode_spec = sim_spec(recipe, role="decode", gpus=8, time_scale=time_scale)
    with (
        sim_process(prefill_spec, log_dir, "--bootstrap-port", "0") as prefill,
        sim_process(decode_spec, log_dir) as decode,
    ):
        yield prefill, decode


@contextlib.contextmanager
def router_process(
    args: list[str],
    log_dir: Path,
    ready: Callable[[str], bool],
    metrics_port: int | None = None,
) -> Iterator[str]:
    """sglang-router on a free loopback port with the given worker arguments; yields its URL
    once `ready(url)` holds. Its /metrics listen on `metrics_port` (else a free port)."""
    port = free_port()
    argv = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--log-level", "warn", *args]
    # its own metrics listener defaults to port 29000: give each router a free one
    metrics = metrics_port or free_port()
    argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics)]
    log = log_dir / f"router-{port}.log"
    # The router looks up a tokenizer for the served model on the Hugging Face hub: point it
    # at a closed loopback port so no test traffic leaves the machine.
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(log_dir / "hf")}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or ready(url), 60, f"sglang-router at {url}")
        if proc.poll() is not None:
            pytest.fail(f"sglang-router exited {proc.returncode}:\n{log.read_text()[-4000:]}")
        yield url
    finally:
        stop_process(proc)


def engine_unit(sim: Sim, replica: int = 0) -> Unit:
    """The unit denv would have started for a running simulator."""
    port = int(sim.url.rsplit(":", 1)[1])
    return Unit(
        name=f"r{replica}", role="aggregated", replica=replica, node=0, engine="sim",
        host="localhost", address="127.0.0.1", argv=[], env={}, port=port, gpus=1,
        gpu_indices=[replica], metrics=Metrics(port=port),
    )  # fmt: skip


def denv_router(sims: list[Sim], spec: SimSpec, url: str = "", metrics_port: int = 0) -> Unit:
    """The router unit denv makes for these simulators; at `url` with its /metrics on
    `metrics_port` once router_process started it there."""
    port = int(url.rsplit(":", 1)[1]) if url else 1024
    slot = RouterSlot(host="localhost", address="127.0.0.1", port=port)
    placement = Placement(fleet="local", slots=[], router=slot)
    workers = [engine_unit(s, i) for i, s in enumerate(sims)]
    context = EngineContext(hardware=spec.hardware, engine_python=sys.executable)
    unit = router_unit("sim", workers, placement, context)
    return unit.model_copy(update={"metrics": Metrics(port=metrics_port)}) if url else unit


def router_args(router: Unit) -> list[str]:
    """A router unit's flags after its --host and --port (router_process sets those)."""
    return router.argv[router.argv.index("--port") + 2 :]
