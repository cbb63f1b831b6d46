"""Pure logic: how a recipe's engine-neutral settings read in the simulator — speculative
decoding's tokens per step, and each engine's defaults for the settings a recipe leaves out
(`Limits`, filled by each engine card's `sim_limits`); bytes per weight and per KV value are
the catalog's (catalog/footprint.py). Every constant is explained in docs/simulator.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.engines.model.calibration import MTP_ACCEPTANCE

# Per-draft-token acceptance rate by speculative method. MTP is fitted (calibration.py);
# the others are assumptions, stated in docs/simulator.md, not calibrated.
ACCEPTANCE: dict[str, float] = {
    "mtp": MTP_ACCEPTANCE,
    "eagle": 0.6,
    "eagle3": 0.7,
    "draft_model": 0.6,
    "ngram": 0.3,
}
# GPU time of one draft pass, as a share of the target model's decode step: MTP and EAGLE
# heads are one transformer layer (1 / layers, filled in by the model); a separate draft model
# is taken as a tenth of the target; n-gram lookup runs on the CPU and costs nothing here.
DRAFT_MODEL_SHARE = 0.1


def tokens_per_step(acceptance: float, draft_tokens: int) -> float:
    """Expected tokens a request emits per verify step with `draft_tokens` drafts whose
    acceptances are independent with rate `acceptance` (Leviathan et al. 2023, eq. 1):
    (1 - a^(n+1)) / (1 - a)."""
    if draft_tokens <= 0:
        return 1.0
    if acceptance >= 1.0:
        return float(draft_tokens + 1)
    return (1.0 - acceptance ** (draft_tokens + 1)) / (1.0 - acceptance)


@dataclass(frozen=True)
class Limits:
    """The scheduler's limits once engine defaults fill what the recipe leaves out."""

    max_batch: int  # running requests per engine
    token_budget: int  # tokens computed per step (prefill chunks + decode tokens)
    chunk_tokens: int | None  # prefill tokens of one request per step; None: no chunking
    mixed_batches: bool  # decode and prefill share a step (vLLM) or prefill runs alone (SGLang)
    cuda_graph_max_batch: int  # decode batches up to this replay a captured graph
    # Admission keeps KV for this share of every running request's remaining output and for
    # all of the new request's (SGLang's new_token_ratio at start); vLLM admits greedily (0)
    # and preempts when KV runs out.
    reserve_ratio: float
    # While requests run, new ones are looked at every this many steps (SGLang's
    # --scheduler-recv-interval and --num-continuous-decode-steps); 1 elsewhere.
    poll_interval: int = 1
    # The share falls by reserve_decay each decode step, down to reserve_floor; a retraction
    # sets it anew (SGLang). 0: it stays at reserve_ratio.
    reserve_decay: float = 0.0
    reserve_floor: float = 0.0
    # Each request's remaining output counts at most this much in the reservation (SGLang's
    # CLIP_MAX_NEW_TOKENS); None: uncapped.
    reserve_clip: int | None = None
    # KV short in decode: None preempts the newest request (vLLM); else SGLang's
    # retract_decode, whose new share counts this many more decode steps per request kept.
    retract_decode_steps: int | None = None
    # Once a request is refused for KV, admission waits until a running request leaves
    # (SGLang's batch_is_full); False tries every step (vLLM).
    hold_after_refusal: bool = False
    # An ignore_eos request without a prefix cache is admitted only if KV holds every running
    # request to its end plus this many tokens each (SGLang's add_one_req_ignore_eos,
    # IGNORE_EOS_RESERVE_TOKENS); None: no such check (vLLM).
    end_reserve_tokens: int | None = None


def flag_value(args: Sequence[str], name: str) -> int | None:
    """The integer value of `--name N` or `--name=N` among engine args, if given."""
    for i, arg in enumerate(args):
        text = None
        if arg == name and i + 1 < len(args):
            text = args[i + 1]
        elif arg.startswith(name + "="):
            text = arg.split("=", 1)[1]
        if text is not None and text.isdigit() and int(text) > 0:
            return int(text)
    return None


def chunk_size(setting: bool | int | None, default: int) -> int | None:
    """The prefill chunk of settings.chunked_prefill: the engine's default when on or left
    out, None when off, else the size given."""
    if setting is None or setting is True:
        return default
    if setting is False:
        return None
    return int(setting)
