"""The simulator's card models vLLM: what it serves and how it schedules are vLLM's card's,
asked through the registry (the cards import none of each other: pyproject.toml)."""

from __future__ import annotations

import pytest

from reconciler.engines.cards import card
from reconciler.engines.sim import argv as sim_argv
from reconciler.engines.sim.argv import MODELLED
from reconciler.engines.vllm import argv as vllm_argv
from tests.engines.model.perfspecs import hardware, recipe


def test_the_simulator_models_vllm() -> None:
    assert MODELLED == "vllm"


def test_the_simulator_serves_the_modelled_engine_s_metrics() -> None:
    simulated, modelled = card("sim"), card(MODELLED)
    assert simulated.ALARM_SERIES == modelled.ALARM_SERIES
    assert sim_argv.RUNNING == vllm_argv.RUNNING  # the gauge a stop waits on


@pytest.mark.parametrize("gpu", ["h200", "x86-cpu"])
@pytest.mark.parametrize("args", [[], ["--max-cudagraph-capture-size", "64"]])
def test_the_simulator_schedules_as_the_modelled_engine(gpu: str, args: list[str]) -> None:
    settings = recipe(hw=gpu).settings
    limits = card("sim").sim_limits(settings, hardware(gpu), args)
    assert limits == card(MODELLED).sim_limits(settings, hardware(gpu), args)
    assert limits.mixed_batches  # vLLM's: decode and prefill share a step
