"""A scheduler's job states: the model's (fleet/model/observed.py, which says when a job has
ended) are the agent's (fleet/host/slurm.py, which runs on the login node and imports none of
denv's package): one list, read from the agent's source."""

from __future__ import annotations

import ast
from pathlib import Path

from reconciler.fleet.model import observed
from reconciler.fleet.model.observed import ACTIVE_JOB_STATES

AGENT = Path(observed.__file__).parents[1] / "host" / "slurm.py"


def test_the_active_job_states_are_the_agents() -> None:
    source = AGENT.read_text()
    [found] = [
        node.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["ACTIVE"]
    ]
    assert frozenset(ast.literal_eval(found)) == ACTIVE_JOB_STATES
