"""The Slurm view of `fleet list` and `fleet probe`: pure, from a fleet and an observation."""

from __future__ import annotations

from reconciler.cli.fleet_slurm import free_gpus, slurm_view
from reconciler.fleet.model.observed import (
    FleetObservation,
    Gpu,
    GpuProcess,
    HostObservation,
    UnitRecord,
)
from reconciler.spec.fleet import Fleet

FLEET = Fleet.model_validate(
    {
        "name": "hpc",
        "provider": "test",
        "hardware": "h200",
        "transport": "slurm",
        "slurm": {"partition": "serve"},
        "hosts": [
            {"name": "login", "gpus": 0},
            *({"name": f"n{i}", "gpus": 4} for i in (1, 2, 3, 4)),
        ],
    }
)


def node(name: str, state: str, foreign: int = 0, **jobs: UnitRecord) -> HostObservation:
    gpus = tuple(
        Gpu(index=i, processes=(GpuProcess(pid=0),) if i >= 4 - foreign else ()) for i in range(4)
    )
    return HostObservation(
        host=name,
        source="slurm",
        gpus=gpus,
        units=tuple(jobs.values()),
        scheduler_state=state,
        cordoned="drained: disk" if state == "drained" else None,
    )


def job(
    unit: str, number: str, nodes: tuple[str, ...], state: str, reason: str | None = None
) -> UnitRecord:
    return UnitRecord(
        id=unit,
        digest="d",
        gpus=(0, 1),
        alive=state == "RUNNING",
        job=number,
        queue=state,
        queue_reason=reason,
        nodes=nodes,
        partition="serve",
    )


def test_a_job_over_two_nodes_holds_gpus_on_both_a_pending_one_holds_none() -> None:
    wide = job("big-0", "7", ("n1", "n2"), "RUNNING")
    waiting = job("small-0", "9", ("n3",), "PENDING", "Resources")
    seen = FleetObservation(
        "hpc",
        hosts={
            "login": HostObservation(host="login", source="none"),
            "n1": node("n1", "mixed", wide=wide),
            "n2": node("n2", "mixed", foreign=1),
            "n3": node("n3", "drained", waiting=waiting),
        },
        errors={"n4": "n4: not a node of partition serve"},
    )
    view = slurm_view(FLEET, seen)
    assert view["login"] == {"host": "login", "reached": True, "units": [], "error": None}
    rows = {row["node"]: row for row in view["nodes"]}
    assert {name: (r["state"], r["gpus"], r["free_gpus"]) for name, r in rows.items()} == {
        "n1": ("mixed", 4, 2),
        "n2": ("mixed", 4, 1),  # the wide job's two GPUs and one a foreign job holds
        "n3": ("drained", 4, 4),
        "n4": (None, None, None),
    }
    assert rows["n3"]["cordoned"] == "drained: disk" and rows["n4"]["error"].startswith("n4:")
    assert [(j["unit"], j["state"], j["reason"], j["nodes"]) for j in view["queue"]] == [
        ("big-0", "RUNNING", None, ["n1", "n2"]),
        ("small-0", "PENDING", "Resources", ["n3"]),
    ]
    assert free_gpus(view) == 2 + 1  # the drained node takes nothing
