"""Models: the engine registry — every engine denv launches, by the name a recipe gives in
`engine.name`, and the module of its card (`reconciler/engines/<name>/card.py`).

The registry is names and module paths, no engine code, and it sits in spec, the lowest
layer, because the spec is where an engine name is first read: a recipe's `engine.name` is
checked against these names (and the JSON schema lists them) without importing the engines
layer, which spec may not. The engines layer turns a name into its card
(`reconciler.engines.cards.card`), importing the card module when it is first asked for, so
the spec, `denv validate` and the CLI's start-up pay nothing for engines they do not use.

Adding an engine: write its card (`reconciler/engines/<name>/card.py`, the parts
`reconciler.engines.cards.EngineCard` names) and add one line here. Nothing else names
engines: launch, the runtime, the router, the simulator, validate, the optimizer and the
rollout alarms all ask the card.
"""

from __future__ import annotations

# name -> the module of its card. The order is the order engines are listed in (schemas,
# messages).
ENGINE_CARDS: dict[str, str] = {
    "vllm": "reconciler.engines.vllm.card",
    "sglang": "reconciler.engines.sglang.card",
    "sim": "reconciler.engines.sim.card",  # denv's own simulator, as an engine
}


def engine_names() -> tuple[str, ...]:
    """Every registered engine's name, in the registry's order."""
    return tuple(ENGINE_CARDS)
