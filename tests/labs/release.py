"""The release the tests deploy: chat-8b, Llama 3.1 8B on the vLLM recipe, aggregated, its
stages given by the test (one canary on one fleet unless told otherwise)."""

from __future__ import annotations

WEIGHTS = "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659"
RECIPE = "llama-3.1-8b/vllm@1"


def stage(name: str, fleets: str, *settings: str) -> str:
    """One stage's lines: `settings` are its other keys as written ("bake: 2s")."""
    return f"  - name: {name}\n    fleets: [{fleets}]\n" + "".join(f"    {s}\n" for s in settings)


def release_yaml(
    *stages: str,
    model: str = "chat-8b",
    weights: str = WEIGHTS,
    batch: int | str | None = 128,
    replicas: int = 1,
    gpus: int = 1,
    head: str = "",
    note: str = "",
) -> str:
    """denv.yaml of the release: `batch` its max_batch override (None: no override, `note` a
    comment after it), `head` lines before it, `stages` (stage()) after it; no stage given:
    a canary on fleet `local`."""
    settings = f"  overrides:\n    settings: {{ max_batch: {batch} }}{note}\n"
    return (
        f"{head}release:\n  model: {model}\n  weights: {weights}\n  recipe: {RECIPE}\n"
        + (settings if batch is not None else "")
        + f"  topology: {{ mode: aggregated, replicas: {replicas}, gpus: {gpus}, "
        f"parallel: {{ tp: {gpus} }} }}\nstages:\n" + "".join(stages or (stage("canary", "local"),))
    )
