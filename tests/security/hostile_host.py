"""A hostile host for the attacker's reproductions: a real sshd on loopback whose fleet's
`python` is a program of the host's choosing. The bot's wrapper runs it as `python AGENT VERB`
(one-shot) or `python AGENT serve` (resident), exactly as it would run the interpreter; it runs
the real agent behind it and replaces the answers to the verbs it is told to spoil:

  {"patch": {...}}   the verb's result with these keys replaced (`"expires": "tomorrow"`)
  {"deep": N}        an answer nested N lists deep
  {"big": N}         a valid answer carrying N bytes more (its `driver` field)
  {"flood": N}       one-shot: N bytes of output without a newline, and no answer

What to spoil is the host's own file (`python.json` in its folder, found from the DENV_HOME
its sshd sets), so hosts of one fleet, which all run the fleet's one `python`, each answer as
told, and a test changes it between calls as a host owner would."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.labs.sshd import SshLab, SshServer

PROGRAM = """#!{python}
import json, os, subprocess, sys, threading

# this host's own rules: beside its state (sshd gives each host its DENV_HOME)
RULES = json.load(open(os.path.join(os.path.dirname(os.environ["DENV_HOME"]), "python.json")))
agent, args = sys.argv[1], sys.argv[2:]


def spoil(verb, number, result):
    rule = RULES.get(verb)
    if rule is None:
        return None
    if "patch" in rule:
        result = dict(result or {{}}, **rule["patch"])
        return json.dumps({{"id": number, "ok": True, "result": result}}).encode()
    if "deep" in rule:
        deep = "[" * rule["deep"] + "]" * rule["deep"]
        return ('{{"id": %s, "ok": true, "result": %s}}' % (json.dumps(number), deep)).encode()
    if "big" in rule:
        result = dict(result or {{}}, driver="x" * rule["big"])
        return json.dumps({{"id": number, "ok": True, "result": result}}).encode()
    return None


def out(data):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


if args[:1] == ["serve"]:
    real = subprocess.Popen([sys.executable, agent, "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    verbs = {{}}

    def relay():
        for line in sys.stdin.buffer:
            try:
                request = json.loads(line)
                verbs[request.get("id")] = request.get("verb")
            except ValueError:
                pass
            real.stdin.write(line)
            real.stdin.flush()
        real.stdin.close()

    threading.Thread(target=relay, daemon=True).start()
    for line in real.stdout:
        message = json.loads(line)
        number = message.get("id")
        spoilt = spoil(verbs.get(number), number, message.get("result")) if number else None
        out(spoilt + b"\\n" if spoilt is not None else line)
else:
    rule = RULES.get(args[0]) or {{}}
    if "flood" in rule:
        chunk = b"x" * 65536
        for _ in range(rule["flood"] // len(chunk)):
            out(chunk)
        sys.exit(0)
    done = subprocess.run([sys.executable, agent, *args], stdin=sys.stdin, capture_output=True)
    lines = done.stdout.strip().splitlines()
    message = json.loads(lines[-1]) if lines else {{}}
    spoilt = spoil(args[0], None, message.get("result"))
    out(spoilt + b"\\n" if spoilt is not None else done.stdout)
    sys.exit(done.returncode)
"""


class HostileHost:
    """One host of a fleet: a real sshd on loopback, and the program its fleet runs."""

    def __init__(self, lab: SshLab, name: str) -> None:
        self.name = name
        self.lab = lab
        self.server: SshServer = lab.start(name)
        self.program = self.server.folder / "python"
        self.program.write_text(PROGRAM.format(python=sys.executable))
        self.program.chmod(0o755)
        self.spoil({})

    def spoil(self, rules: dict[str, Any]) -> None:
        """What this host answers from now on, by verb (see the module's docstring)."""
        (self.server.folder / "python.json").write_text(json.dumps(rules))

    @property
    def home(self) -> Path:
        """Where the real agent behind it keeps its state (sshd sets DENV_HOME)."""
        return self.server.folder / "denv-home"

    def entry(self, gpus: int = 4) -> str:
        """This host in a fleet file's `hosts`."""
        return (
            f"    - {{ name: {self.name}, address: {self.server.address}, "
            f"port: {self.server.port}, gpus: {gpus} }}\n"
        )


def fleet_file(
    name: str,
    hosts: list[str],
    lab: SshLab,
    python: str = sys.executable,
    simulated: bool = True,
    call_timeout: float = 60,
) -> str:
    """An SSH fleet of H200 hosts on loopback (`hosts`: their entries) run with `python`."""
    return (
        f"fleet:\n  name: {name}\n  provider: test\n  hardware: h200\n"
        f"  simulated: {str(simulated).lower()}\n  python: {python}\n  transport: ssh\n"
        f"  ssh: {{ user: root, key_file: {lab.client_key}, known_hosts: {lab.known_hosts}, "
        f"connect_timeout: 3, call_timeout: {call_timeout:g} }}\n"
        "  hosts:\n" + "".join(hosts)
    )


def good_entry(server: SshServer, name: str, gpus: int = 4) -> str:
    where = f"address: {server.address}, port: {server.port}"
    return f"    - {{ name: {name}, {where}, gpus: {gpus} }}\n"
