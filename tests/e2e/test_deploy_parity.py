"""Deploy-time parity: a stage serving the release's weights with different recipes on two
fleets is checked with the parity suite once both are ready; status shows the verdict, and a
recipe the simulator perturbs (an fp8 KV cache) marks the stage degraded."""

from __future__ import annotations

from typing import Any

from tests.e2e.test_reconcile import Lab, lab
from tests.labs.release import release_yaml, stage
from tests.labs.sshd import ssh_lab

__all__ = ["lab", "ssh_lab"]  # fixtures

FP8_KV = """\
recipe:
  id: llama-3.1-8b/vllm@9
  model: llama-3.1-8b
  engine: {name: vllm, version: 0.33.0}
  hardware: [h200]
  topology: {mode: aggregated, replicas: 1, gpus: 1, parallel: {tp: 1}}
  settings: {kv_cache: {dtype: fp8}}
"""


def mixed(lab: Lab, recipe: str) -> dict[str, Any]:
    text = release_yaml(stage("canary", "lab, lab2"))
    lab.repo.write("releases/chat-8b/denv.yaml", text + f"    recipes: {{lab2: {recipe}}}\n")
    lab.repo.commit(f"chat-8b on lab2 with {recipe}")
    done = lab.reconcile()
    assert "parity chat-8b/canary: lab vs lab2" in done.stderr, done.stderr
    status = lab.status()
    found: dict[str, Any] = status["parity"]["chat-8b/canary"]
    return found


SUITE = 96  # prompts of the default suite the lab's repository keeps: the check, not its size


def test_same_weights_pass_and_an_fp8_kv_cache_degrades(lab: Lab) -> None:
    suite = (lab.repo.path / "policies/parity/default.jsonl").read_text().splitlines()
    lab.repo.write("policies/parity/default.jsonl", "\n".join(suite[:SUITE]) + "\n")
    found = mixed(lab, "llama-3.1-8b/sglang@1")  # two engines on the same weights
    assert (found["state"], found["degraded"]) == ("passed", False)
    assert found["verdict"] == f"PARITY {SUITE}/{SUITE}"
    again = lab.reconcile()  # the result is kept until the revision or a recipe changes
    assert "parity chat-8b/canary" not in again.stderr
    lab.repo.write("recipes/llama-3.1-8b/vllm@9.yaml", FP8_KV)
    found = mixed(lab, "llama-3.1-8b/vllm@9")
    assert found["state"] == "failed" and found["degraded"] is True
    passed, total = map(int, found["verdict"].removeprefix("PARITY ").split("/"))
    assert total == SUITE and SUITE * 0.7 < passed < SUITE  # the simulator perturbs a tenth
    assert found["failing"] and all(isinstance(i, str) for i in found["failing"])
    shown = lab.denv("status").stdout
    assert "chat-8b/canary: DEGRADED (no promotion)" in shown
