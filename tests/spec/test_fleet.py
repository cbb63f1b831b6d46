"""Fleet files: names reserved for documentation, and the example fleets that use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.fleet.drivers.registry import rules_of
from reconciler.spec.fleet import reserved_name
from reconciler.spec.loader import open_repo
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("address", "reserved"),
    [
        ("h200-01.h200-use1.example", True),
        ("gb200-t01.gb200-rack.example.", True),
        ("H200-01.EXAMPLE", True),
        ("node.invalid", True),
        ("node.test", True),
        ("example.com", True),
        ("gpu-1.example.org", True),
        ("gpu-1.example.net", True),
        ("10.0.1.11", False),
        ("192.168.1.10", False),
        ("localhost", False),
        ("test", False),  # one label: a machine called `test` may well exist
        ("myexample", False),
        ("examples.com", False),
        ("example.company.com", False),
        ("h200-01.corp.internal", False),
    ],
    ids=lambda value: str(value),
)
def test_reserved_name(address: str, reserved: bool) -> None:
    assert reserved_name(address) is reserved


def test_every_example_ssh_fleet_names_only_reserved_hosts() -> None:
    """A guide or demo command run on the example fleets can never reach anyone's machines."""
    repo = open_repo(ROOT)
    ssh = {name: fleet for name, fleet in repo.fleets.items() if fleet.transport == "ssh"}
    assert ssh, "the repository has example SSH fleets"
    for name, fleet in ssh.items():
        text = (ROOT / "fleets" / f"{name}.yaml").read_text()
        assert "replace" in text.lower(), f"fleets/{name}.yaml: say to replace the hosts"
        for host in fleet.hosts:
            assert reserved_name(host.address or host.name), (
                f"fleets/{name}.yaml: host {host.name} ({host.address}) is not under a name "
                "reserved for documentation (.example)"
            )


SLURM_FLEET = """\
fleet:
  name: hpc
  provider: test
  hardware: h200
  transport: slurm
  slurm:
    partition: gpu
    gpu_request: gres
  hosts:
    - { name: login, address: login.hpc.example, gpus: 0 }
    - { name: n1, address: n1.hpc.example, gpus: 4 }
"""


@pytest.mark.parametrize(
    ("old", "new", "at", "message"),
    [
        pytest.param(
            "  slurm:\n    partition: gpu\n    gpu_request: gres\n",
            "",
            "transport: slurm",
            "fleet.transport: transport slurm needs a slurm block (at least its partition)",
            id="no-slurm-block",
        ),
        pytest.param(
            "    - { name: login, address: login.hpc.example, gpus: 0 }\n",
            "",
            "hosts:",
            "fleet.hosts: transport slurm needs the login node as a host with gpus: 0 (where "
            "jobs are submitted and routers run)",
            id="no-login-node",
        ),
        pytest.param(
            "gpu_request: gres",
            "gpu_request: tres",
            "gpu_request:",
            "fleet.slurm.gpu_request: Input should be 'gres' or 'gpus'",
            id="bad-gpu-request",
        ),
        pytest.param(
            "transport: slurm",
            "transport: ssh\n  ssh: { user: denv }",
            "slurm:",
            "fleet.slurm: a slurm block goes with transport slurm (this fleet's is ssh)",
            id="slurm-block-on-ssh-fleet",
        ),
        pytest.param(
            "transport: slurm",
            "transport: kubernetes",
            "transport:",
            "fleet.transport: Input should be 'local', 'ssh' or 'slurm' (the registered fleet "
            "kinds)",
            id="unknown-kind",
        ),
        pytest.param(
            "transport: slurm",
            "transport: slurm\n  colour: blue",
            "colour:",
            "fleet.colour: unknown field",
            id="unknown-key",
        ),
        pytest.param(
            "partition: gpu",
            "partition: gpu,debug",
            "partition:",
            "fleet.slurm.partition: String should match pattern '^[A-Za-z0-9._-]+$'",
            id="partition-list",
        ),
        pytest.param(
            "    - { name: n1,",
            "    - { name: n1, address: n1.hpc.example, gpus: 4 }\n    - { name: n1,",
            "hosts:",
            "fleet.hosts: host names must be unique: n1",
            id="node-twice",
        ),
        pytest.param(
            "transport: slurm",
            "transport: slurm\n  agent_home: scratch/denv",
            "agent_home:",
            "fleet.agent_home: String should match pattern '^/[A-Za-z0-9._/+-]*$'",
            id="agent-home-relative",
        ),
        pytest.param(
            "transport: slurm",
            "transport: slurm\n  agent_home: $SCRATCH/denv",
            "agent_home:",
            "fleet.agent_home: String should match pattern '^/[A-Za-z0-9._/+-]*$'",
            id="agent-home-variable",
        ),
        pytest.param(
            "transport: slurm",
            "transport: slurm\n  agent_home: /scratch/../home/denv",
            "agent_home:",
            "fleet.agent_home: '/scratch/../home/denv': an agent home is an "
            "absolute folder, without '.' or '..'",
            id="agent-home-dotdot",
        ),
    ],
)
def test_a_bad_slurm_fleet_is_refused_at_its_field(
    denv_repo: Path, old: str, new: str, at: str, message: str
) -> None:
    assert SLURM_FLEET.count(old) == 1
    text = SLURM_FLEET.replace(old, new)
    (denv_repo / "fleets/hpc.yaml").write_text(text)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if at in row)
    problems = [str(p) for p in open_repo(denv_repo).errors]
    assert [p.split(":", 3)[:2] for p in problems] == [["fleets/hpc.yaml", str(line)]], problems
    assert problems[0].split(":", 3)[3].strip() == message


def test_the_slurm_fleet_of_the_docs_validates(denv_repo: Path) -> None:
    """docs/fleets.md's example Slurm fleet, as printed, is a fleet file denv accepts."""
    doc = (ROOT / "docs/fleets.md").read_text().split("## Slurm fleets", 1)[1]
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    (denv_repo / "fleets/hpc.yaml").write_text(example)
    repo = open_repo(denv_repo)
    assert [str(p) for p in repo.problems] == []
    fleet = repo.fleets["hpc"]
    assert fleet.transport == "slurm" and [h.name for h in fleet.hosts if h.gpus == 0]
    assert all(reserved_name(h.address or h.name) for h in fleet.hosts)


def test_an_agent_home_on_scratch_is_where_the_drivers_say_the_agent_keeps_its_state(
    denv_repo: Path,
) -> None:
    text = SLURM_FLEET.replace("transport: slurm", "transport: slurm\n  agent_home: /scratch/denv/")
    (denv_repo / "fleets/hpc.yaml").write_text(text)
    repo = open_repo(denv_repo)
    assert repo.errors == []
    assert repo.fleets["hpc"].agent_home == "/scratch/denv"
    assert rules_of(repo.fleets["hpc"]).default_home() == "/scratch/denv"
    plain = SLURM_FLEET
    (denv_repo / "fleets/hpc.yaml").write_text(plain)
    assert rules_of(open_repo(denv_repo).fleets["hpc"]).default_home() != "/scratch/denv"


def test_a_local_fleet_refuses_an_agent_home(denv_repo: Path) -> None:
    path = denv_repo / "fleets/local.yaml"
    text = path.read_text()
    path.write_text(text.replace("  hosts:", "  agent_home: /scratch/denv\n  hosts:", 1))
    problems = [str(p) for p in open_repo(denv_repo).errors]
    assert len(problems) == 1 and "agent_home is for ssh and slurm fleets" in problems[0]
