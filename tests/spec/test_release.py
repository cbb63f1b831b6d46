"""The release model's one rule: which recipe a stage runs on a fleet."""

from __future__ import annotations

from reconciler.spec.release import Release


def test_a_stage_runs_its_own_recipe_for_a_fleet_else_the_releases() -> None:
    release = Release.model_validate(
        {
            "release": {"model": "m", "weights": "hf://o/m@abc", "recipe": "m/vllm@1"},
            "stages": [{"name": "prod", "fleets": ["us", "eu"], "recipes": {"eu": "m/sglang@2"}}],
        }
    )
    stage = release.stages[0]
    assert release.recipe_for(stage, "eu") == "m/sglang@2"
    assert release.recipe_for(stage, "us") == "m/vllm@1"
