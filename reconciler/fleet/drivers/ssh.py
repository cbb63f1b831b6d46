"""Adapter: the `ssh` kind of fleet — hosts reached over SSH as the fleet's user, each running
denv's agent with the fleet's `python`. The only driver that knows users; with
reconciler.fleet.ssh (the transport), the only code that imports fabric and paramiko."""

from __future__ import annotations

from reconciler.fleet.drivers.agent import AgentDriver
from reconciler.fleet.ssh import SshTransport
from reconciler.fleet.transport import Transport
from reconciler.spec.fleet import Host


class SshDriver(AgentDriver):
    def dial(self, host: Host) -> Transport:
        assert self.fleet.ssh is not None  # the fleet model requires it for ssh
        return SshTransport(host, self.fleet.ssh, warn=self.warn, fleet=self.fleet.name)

    def user_home(self) -> str:
        """The SSH user's default home: /root/.denv for root, else /home/<user>/.denv."""
        user = self.fleet.ssh.user if self.fleet.ssh is not None else "root"
        return "/root/.denv" if user == "root" else f"/home/{user}/.denv"
