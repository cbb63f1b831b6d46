"""The demos' teardown: stop every unit the local agent under DENV_HOME runs (or only those
whose id starts with the given prefix), so no simulator or router outlives a demo."""

import os
import sys

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport

home, prefix = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": home}), python=sys.executable)
for unit in agent.units():
    if unit.id.startswith(prefix):
        agent.stop(unit.id, grace=2)
