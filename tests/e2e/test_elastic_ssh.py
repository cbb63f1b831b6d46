"""Elastic stages on SSH hosts, end to end: `denv reconcile --once` passes (each a bot that
starts again, reading the count from the fleets and its history from the lease note) scale
simulator engines behind the real sglang-router on sshd hosts in network namespaces, under
load from the official openai client."""

from __future__ import annotations

import sys

from tests.e2e.load import light_load
from tests.e2e.test_reconcile import Lab, endpoint, fleet_file, lab
from tests.labs.elastic import decisions, elastic_release, passes, row, tolerate_a_short_queue
from tests.labs.operated import actions_done
from tests.labs.sshd import SshLab, SshServer, ssh_lab

__all__ = ["lab", "ssh_lab"]  # the fixtures


def engines(lab: Lab, fleet: str = "lab") -> list[str]:
    return [u.id for u in lab.units(fleet) if u.alive and not u.id.endswith("router")]


def test_replicas_follow_the_load_and_drain_on_the_way_down(lab: Lab) -> None:
    """Bounds 1–3 on a 4-GPU host: under load one replica more a pass, each started and then
    added to the router; a count inside the bounds is no drift. After the load, one fewer a
    pass (a second apart), each out of the router and drained first: no request fails."""
    elastic_release(lab.repo, "lab")
    lab.reconcile()
    first = row(lab.status(), "lab")
    assert (first["replicas"], first["ready"], first["drift"]) == (1, 1, ""), first
    url = endpoint(lab.status())
    with light_load(url, workers=8, max_tokens=64) as heavy:
        heavy.more(8, "traffic on one replica")
        up = passes(lab, lambda: len(engines(lab)) == 3, most=4)
        heavy.more(8, "traffic on three replicas")
    assert decisions(up)[:2] == [(1, 2), (2, 3)], [r.stdout for r in up]
    for run in [r for r in up if decisions([r])]:  # each new replica started (joining its router)
        assert {"start": 1}.items() <= actions_done(run.stdout).items(), "\n=====\n".join(
            r.stdout + r.stderr for r in up
        )
    three = row(lab.status(), "lab")
    assert (three["replicas"], three["ready"], three["drift"]) == (3, 3, ""), three
    assert heavy.failed == []
    # two workers: requests in flight, a moment's queue at most (no reason to scale up again)
    tolerate_a_short_queue(lab.repo)
    with light_load(url, workers=2, max_tokens=64) as calm:
        calm.more(4, "traffic on three replicas, calm")
        down = passes(lab, lambda: len(engines(lab)) == 1, most=6)
        calm.more(4, "traffic on one replica")
    assert decisions(down) == [(3, 2), (2, 1)], [r.stdout for r in down]
    assert sum(actions_done(r.stdout).get("drain", 0) for r in down) == 2
    assert calm.failed == []
    last = row(lab.status(), "lab")
    assert (last["replicas"], last["ready"], last["drift"]) == (1, 1, ""), last


def duo_fleet(lab: SshLab, servers: dict[str, SshServer]) -> str:
    """Fleet `duo`: the lab's two hosts, one GPU each."""
    hosts = "".join(
        f"    - {{ name: duo-h{i}, address: {servers[name].address}, gpus: 1 }}\n"
        for i, name in enumerate(("lab", "lab2"))
    )
    return (
        "fleet:\n  name: duo\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  python: {sys.executable}\n  transport: ssh\n"
        f"  ssh: {{ user: root, key_file: {lab.client_key}, known_hosts: {lab.known_hosts}, "
        f"connect_timeout: 2 }}\n  hosts:\n{hosts}"
    )


def test_a_full_host_sends_new_replicas_to_the_next_and_pending_ones_go_first(lab: Lab) -> None:
    """One GPU on each of two hosts: the second replica goes to the other host; a third has
    no GPU anywhere — pending, never counted, the stage serving — and, the load fallen, is the
    first to go with the first step down, by a bot started again (each pass is one): the two
    that run serve on."""
    lab.repo.write("fleets/duo.yaml", duo_fleet(lab.ssh, lab.servers))
    elastic_release(lab.repo, "duo", policy="held")
    lab.reconcile()
    url = endpoint(lab.status(), "duo")
    with light_load(url, workers=8, max_tokens=64) as heavy:
        heavy.more(8, "traffic on one replica")
        up = passes(lab, lambda: len(engines(lab) + engines(lab, "lab2")) == 2, most=3)
        assert decisions(up)[:1] == [(1, 2)]
        assert (len(engines(lab)), len(engines(lab, "lab2"))) == (1, 1)
        full = [lab.reconcile(), lab.reconcile()]
        heavy.more(8, "traffic on two hosts")
    assert decisions(full) == [(2, 3)], [r.stdout + r.stderr for r in full]  # asked once
    shown = row(lab.status(), "duo")
    assert (shown["replicas"], shown["ready"], shown["drift"]) == (2, 2, ""), shown
    assert heavy.failed == []
    # the delays of a step down passed (as any step down waits them): the held policy's made 0
    text = (lab.repo.path / "policies/scaling.yaml").read_text()
    lab.repo.write("policies/scaling.yaml", text.replace("delay: 10m", "delay: 0s"))
    lab.repo.commit("scaling: the held policy steps down at once")
    calm = lab.reconcile()
    assert decisions([calm]) == [(3, 2)], calm.stdout + calm.stderr
    assert "pending given up" in calm.stdout + calm.stderr
    assert (len(engines(lab)), len(engines(lab, "lab2"))) == (1, 1)  # both still serve


def priced(lab: Lab, name: str, gpu_hour: float, gpus: int) -> None:
    """The lab's fleet `name` at `gpu_hour` $ a GPU-hour, on `gpus` GPUs."""
    text = fleet_file(name, lab.servers[name], lab.ssh)
    text = text.replace(
        "  transport: ssh\n", f"  price: {{ gpu_hour: {gpu_hour} }}\n  transport: ssh\n"
    )
    lab.repo.write(f"fleets/{name}.yaml", text.replace("gpus: 4", f"gpus: {gpus}"))


def test_a_stage_pool_grows_on_the_cheapest_fleet_first_and_shrinks_from_the_dearest(
    lab: Lab,
) -> None:
    """One count for a stage on two fleets: `lab` at 9 $ a GPU-hour (4 GPUs), `lab2` at 1.20
    (2 GPUs). Under load on both endpoints, the first replica added goes to lab2, the next to
    lab once lab2 is full; after the load, lab gives its extra replica up first, then lab2,
    each drained: one decision a step for the whole stage, no request failed, no drift."""
    priced(lab, "lab", 9.0, 4)
    priced(lab, "lab2", 1.2, 2)
    elastic_release(lab.repo, "lab, lab2", low=2, high=4, pool="stage")
    lab.reconcile()
    assert (len(engines(lab)), len(engines(lab, "lab2"))) == (1, 1)
    first = lab.status()
    assert row(first, "lab")["scale"] == "1 of the stage's 2 (2–4)", row(first, "lab")
    urls = [endpoint(first, name) for name in ("lab", "lab2")]
    with (
        light_load(urls[0], workers=6, max_tokens=64) as dear,
        light_load(urls[1], workers=6, max_tokens=64) as cheap,
    ):
        dear.more(6, "traffic on lab's replica")
        cheap.more(6, "traffic on lab2's replica")
        three = passes(lab, lambda: len(engines(lab)) + len(engines(lab, "lab2")) == 3, most=3)
        assert (len(engines(lab)), len(engines(lab, "lab2"))) == (1, 2)  # the cheapest first
        four = passes(lab, lambda: len(engines(lab)) == 2, most=3)  # lab2 is full
        dear.more(6, "traffic on four replicas")
    assert decisions(three + four) == [(2, 3), (3, 4)], [r.stdout for r in three + four]
    assert "scale chat-8b/canary/*: 2 → 3" in "".join(r.stdout + r.stderr for r in three)
    shown = lab.status()
    for name, count in (("lab", 2), ("lab2", 2)):
        found = row(shown, name)
        assert (found["replicas"], found["ready"], found["drift"]) == (count, count, ""), found
        assert found["scale"] == f"{count} of the stage's 4 (2–4)"
    assert dear.failed == cheap.failed == []
    with light_load(urls[0], workers=1, max_tokens=64) as calm:
        calm.more(2, "calm traffic on lab")
        down = passes(lab, lambda: len(engines(lab)) == 1, most=10)
        assert len(engines(lab, "lab2")) == 2  # the dearest gives its replica up first
        last = passes(lab, lambda: len(engines(lab, "lab2")) == 1, most=10)
        calm.more(2, "calm traffic on one replica a fleet")
    assert decisions(down + last) == [(4, 3), (3, 2)], [r.stdout for r in down + last]
    assert sum(actions_done(r.stdout).get("drain", 0) for r in down + last) == 2
    assert calm.failed == []
