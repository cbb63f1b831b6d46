"""Adapter: the `local` kind of fleet — hosts that are this machine, the agent run as a
process of the bot's own user. No users, no SSH: a host is reached at 127.0.0.1 unless the
fleet file gives an address, and units run with denv's own interpreter."""

from __future__ import annotations

import os
import sys

from reconciler.fleet.drivers.agent import AgentDriver
from reconciler.fleet.transport import LocalTransport, Transport
from reconciler.spec.fleet import Host


class LocalDriver(AgentDriver):
    def dial(self, host: Host) -> Transport:
        return LocalTransport(host.name, env=self.env)

    @property
    def python(self) -> str:
        return sys.executable

    def address(self, host: Host) -> str:
        return host.address if host.address is not None else "127.0.0.1"

    def user_home(self) -> str:
        """Where the agent keeps its state here: DENV_HOME, else ~/.denv (as the agent does)."""
        env = self.env if self.env is not None else os.environ
        return env.get("DENV_HOME") or f"{env.get('HOME', os.path.expanduser('~'))}/.denv"
