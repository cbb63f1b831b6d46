"""Fleet files: names reserved for documentation, and the example fleets that use them."""

from __future__ import annotations

import pytest

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
