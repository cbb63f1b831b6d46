"""A fleet as `fleet list`, `fleet probe` and the UI show it: pure, from a fleet and what
was observed."""

from __future__ import annotations

from reconciler.fleet.kinds.slurm import slurm_free_gpus, slurm_view
from reconciler.fleet.listing import host_rows, unit_rows
from reconciler.fleet.model.observed import (
    Cause,
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
    assert slurm_free_gpus(view) == 2 + 1  # the drained node takes nothing


LOCAL = Fleet.model_validate(
    {
        "name": "lab",
        "provider": "test",
        "hardware": "h200",
        "transport": "local",
        "hosts": [{"name": "a", "gpus": 4}, {"name": "b", "gpus": 4}, {"name": "c", "gpus": 2}],
        "trial_gpus": 3,
    }
)


def test_hosts_show_gpus_used_free_and_kept_for_trials_and_why_a_host_did_not_answer() -> None:
    serving = UnitRecord(id="chat.canary.lab.r-0", digest="d", gpus=(0, 1), alive=True)
    a = node("a", "", foreign=1, serving=serving).model_copy(update={"scheduler_state": None})
    b = HostObservation(host="b", source="simulated", gpus=tuple(Gpu(index=i) for i in range(4)))
    seen = FleetObservation(
        "lab",
        hosts={"a": a, "b": b},
        errors={"c": "c: timed out after 2s"},
        causes={"c": Cause.TIMED_OUT},
    )
    rows = {row.name: row for row in host_rows(LOCAL, seen)}
    assert (rows["a"].used, rows["a"].free, rows["a"].trial) == ([0, 1, 3], [2], [])
    # the last 3 GPUs of the hosts that answered, from the end of the file
    assert (rows["b"].used, rows["b"].free, rows["b"].trial) == ([], [0], [1, 2, 3])
    assert not rows["c"].answered and rows["c"].cause == "timed out"
    assert rows["c"].error == "c: timed out after 2s"
    declared = host_rows(LOCAL, None)
    assert [(r.name, r.declared_gpus, r.answered) for r in declared] == [
        ("a", 4, False),
        ("b", 4, False),
        ("c", 2, False),
    ]


def test_units_say_their_state_and_what_they_serve() -> None:
    labels = {"release": "chat", "stage": "canary", "fleet": "lab", "revision": "abc", "role": "w"}
    records = (
        UnitRecord(id="chat.canary.lab.w-0", digest="d", alive=True, labels=labels),
        UnitRecord(id="chat.canary.lab.w-1", digest="d", alive=True, labels=labels),
        UnitRecord(id="chat.canary.lab.router", digest="d", alive=True, labels=labels),
        UnitRecord(id="old", digest="d", alive=False, exit_code=137),
        job("queued-0", "12", ("a",), "PENDING", "Priority"),
        UnitRecord(id="t-1.w", digest="d", alive=True, labels={"trial": "t-1", "role": "w"}),
    )
    seen = FleetObservation(
        "lab", hosts={"a": HostObservation(host="a", source="x", units=records)}
    )
    readiness = {"chat.canary.lab.w-0": True, "chat.canary.lab.w-1": False}
    rows = {row.id: row for row in unit_rows(seen, readiness)}
    assert {k: (r.state, r.reason) for k, r in rows.items()} == {
        "chat.canary.lab.w-0": ("ready", ""),
        "chat.canary.lab.w-1": ("starting", "not ready yet"),
        "chat.canary.lab.router": ("running", ""),
        "old": ("exited", "exit code 137"),
        "queued-0": ("pending", "Priority"),
        "t-1.w": ("running", ""),
    }
    served = rows["chat.canary.lab.w-0"]
    assert (served.release, served.stage, served.revision, served.trial) == (
        "chat",
        "canary",
        "abc",
        None,
    )
    assert rows["t-1.w"].trial == "t-1" and rows["t-1.w"].release is None
