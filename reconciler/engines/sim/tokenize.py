"""Pure logic: the simulator's `POST /tokenize`, in vLLM's request and response shapes — a
completion prompt (`prompt`) or a chat (`messages`, rendered by the simulator's own chat
template), answered with `{"count", "max_model_len", "tokens", "token_strs"}`. The ids are the
ones a generation request with the same prompt would run, so a recording proxy can hash the
prompt blocks the engine's prefix cache sees."""

from __future__ import annotations

from typing import Any

from reconciler.engines.model.tokens import Tokenizer
from reconciler.engines.sim.protocol import ApiError, render_chat

_GENERATION_PROMPT = "\n<|assistant|>\n"  # what render_chat appends for the answer


def tokenize(body: Any, tokenizer: Tokenizer, served_model: str, context: int) -> dict[str, Any]:
    """The answer to one /tokenize body; ApiError names the bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served_model:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    if "messages" in body:
        text = render_chat(body["messages"])
        if body.get("add_generation_prompt", True) is False:
            text = text.removesuffix(_GENERATION_PROMPT)
    elif isinstance(body.get("prompt"), str):
        text = body["prompt"]
    else:
        raise ApiError(400, "give either prompt (text) or messages", "prompt")
    tokens = tokenizer.encode(text)
    return {"count": len(tokens), "max_model_len": context, "tokens": tokens, "token_strs": None}
