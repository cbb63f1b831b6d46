"""Models: the simulator's efficiency constants — the few fitted numbers that turn hardware
peaks into what an engine reaches, with where each came from.

Fitted by `scripts/calibrate_sim.py` on the InferenceX DeepSeek-R1 SGLang rows of
results/published/inferencex.jsonl: per GPU generation, five efficiencies; the MTP acceptance;
the P/D hand-off time; a hardware whose own constants predict its held-out points better has its
own (OWN_CONSTANTS). docs/simulator.md says how and how well. Re-fit with
`.venv/bin/python scripts/calibrate_sim.py --fit --write`, which rewrites the block between the
`fitted` markers below.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Efficiency:
    """What a serving engine reaches on one GPU generation, as shares of the spec sheet.

    mfu: share of the dense tensor TFLOPS that GEMMs and attention reach when compute-bound.
    hbm: share of the HBM bandwidth that weight reads (GEMMs) reach when memory-bound.
    kv_hbm: share of the HBM bandwidth that attention's KV reads reach when memory-bound.
    layer_floor_s: GPU time per layer per forward step that no roofline explains: kernels that
        cannot fill the GPU at small sizes, synchronisation, norms, sampling (seconds).
    collective_s: fixed latency of one all-reduce over the scale-up link (seconds).
    request_overhead_s: HTTP, tokenisation and scheduling before a request reaches the batch.
    """

    mfu: float
    hbm: float
    kv_hbm: float
    layer_floor_s: float
    collective_s: float
    request_overhead_s: float

    def scaled(self, kernel: float) -> Efficiency:
        """An engine whose kernels are `kernel` times as efficient as the calibrated one."""
        return replace(
            self,
            mfu=min(self.mfu * kernel, 1.0),
            hbm=min(self.hbm * kernel, 1.0),
            kv_hbm=min(self.kv_hbm * kernel, 1.0),
            layer_floor_s=self.layer_floor_s / kernel,
        )


# Small-message all-reduce latency inside one scale-up domain. Not fitted: every calibration
# point runs TP 4 or 8, where the count of all-reduces per step (2 per layer) is the same, so
# the data cannot tell it from the per-layer floor. ~10 µs is the one-shot custom all-reduce
# vLLM and SGLang use on NVLink; RCCL on Infinity Fabric is taken as twice that.
COLLECTIVE_S: dict[str, float] = {"nvidia": 10e-6, "amd": 20e-6, "intel": 20e-6}

# GPU generations: one architecture and software stack, so one set of efficiencies. A GPU
# missing here takes its vendor's newest generation.
GENERATION: dict[str, str] = {
    "h100": "hopper",
    "h200": "hopper",
    "b200": "blackwell",
    "b300": "blackwell",
    "gb200-nvl72": "blackwell",
    "gb300-nvl72": "blackwell",
    "mi300x": "cdna3",
    "mi325x": "cdna3",
    "mi355x": "cdna4",
}
VENDOR_GENERATION: dict[str, str] = {"nvidia": "blackwell", "amd": "cdna4", "intel": "hopper"}

# Hardware with constants of its own instead of its generation's. `calibrate_sim.py --cv`
# weighs, for every hardware with enough configurations to fit alone, the held-out error of
# both choices (docs/simulator.md, "Per hardware or per generation"); this set is its verdict.
OWN_CONSTANTS: frozenset[str] = frozenset()

# --- fitted: begin ---
# Fitted 2026-12-03 by `.venv/bin/python scripts/calibrate_sim.py --fit --write`
# on 168 InferenceX SGLang aggregated DeepSeek-R1 points (concurrency <= 256) and,
# for PD_HANDOFF_S, 37 disaggregated ones (concurrency <= 8).
EFFICIENCY: dict[str, Efficiency] = {
    "hopper": Efficiency(
        mfu=0.335,
        hbm=0.900,
        kv_hbm=0.900,
        layer_floor_s=96.0e-6,
        collective_s=COLLECTIVE_S["nvidia"],
        request_overhead_s=0.1138,
    ),
    "blackwell": Efficiency(
        mfu=0.186,
        hbm=0.636,
        kv_hbm=0.400,
        layer_floor_s=75.9e-6,
        collective_s=COLLECTIVE_S["nvidia"],
        request_overhead_s=0.1280,
    ),
    "cdna3": Efficiency(
        mfu=0.129,
        hbm=0.373,
        kv_hbm=0.684,
        layer_floor_s=142.3e-6,
        collective_s=COLLECTIVE_S["amd"],
        request_overhead_s=0.0332,
    ),
    "cdna4": Efficiency(
        mfu=0.154,
        hbm=0.563,
        kv_hbm=0.645,
        layer_floor_s=70.3e-6,
        collective_s=COLLECTIVE_S["amd"],
        request_overhead_s=0.0472,
    ),
}
# Per-draft-token acceptance of DeepSeek MTP on InferenceX's random-token prompts.
MTP_ACCEPTANCE = 0.497
# Fixed time of one P/D hand-off (bootstrap, transfer setup, the decode side taking it
# over).
PD_HANDOFF_S = 0.0863
# --- fitted: end ---

# Kernel efficiency of each engine relative to the calibrated SGLang, from a version on
# (newest first). No vLLM point is in the calibration set, so vLLM is assumed equal to SGLang;
# `sim` (the simulator as an engine of its own) is SGLang's twin by definition.
ENGINE_KERNEL_SCALE: dict[str, tuple[tuple[str, float], ...]] = {
    "sglang": (("0.0", 1.0),),
    "vllm": (("0.0", 1.0),),
    "sim": (("0.0", 1.0),),
}


def _version_key(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.replace("-", ".").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits and piece[0].isdigit() else 0)
    return tuple(parts)


@dataclass(frozen=True)
class Tuning:
    """Candidates for the fitted constants, in place of the ones above (None: keep those).
    The calibration script passes them; nothing else needs to."""

    efficiency: Efficiency | None = None
    mtp_acceptance: float | None = None
    pd_handoff_s: float | None = None


def generation(hardware_id: str, vendor: str) -> str:
    return GENERATION.get(hardware_id) or VENDOR_GENERATION.get(vendor, "hopper")


def constants_of(hardware_id: str, vendor: str, own: frozenset[str] = OWN_CONSTANTS) -> str:
    """Whose fitted constants a GPU runs on: its own where `own` names it, else its
    generation's."""
    return hardware_id if hardware_id in own else generation(hardware_id, vendor)


def efficiency(hardware_id: str, vendor: str, engine: str, version: str) -> Efficiency:
    """The efficiency an engine version reaches on a GPU."""
    base = EFFICIENCY[constants_of(hardware_id, vendor)]
    rows = ENGINE_KERNEL_SCALE.get(engine, (("0.0", 1.0),))
    scale = next(
        (s for since, s in rows if _version_key(version) >= _version_key(since)),
        rows[-1][1],
    )
    return base.scaled(scale) if scale != 1.0 else base
