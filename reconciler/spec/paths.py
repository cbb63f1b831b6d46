"""Pure logic: where each kind of file lives in a denv repository (docs/files.md)."""

from __future__ import annotations


def release_file(release: str) -> str:
    return f"releases/{release}/denv.yaml"


def promotions_file(release: str) -> str:
    """The bot-written pins of which release revision each later stage runs."""
    return f"releases/{release}/promotions.yaml"


def recipe_file(recipe: str) -> str:
    """`recipe` is its id, e.g. llama-3.1-8b/vllm@1."""
    return f"recipes/{recipe}.yaml"
