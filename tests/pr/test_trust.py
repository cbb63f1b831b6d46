"""What a pull request may decide: its recipes, releases and catalog — never where the bot
connects, what it runs beside engines, which secret it sends or the parity suite that judges
it. A pull request whose fleet file points the bot at a host of its choosing is planned against
the default branch's fleets, and its comment says so; no connection reaches the pull request's
host."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.forge.local import LocalForge
from reconciler.forge.models import CheckRun, Conclusion
from reconciler.spec.sources import is_trusted_path
from tests.forge.gitrepo import git
from tests.forge.sshkeys import new_key, sign_openings
from tests.pr.test_plan import RELEASE, branch, denv, planned

FLEET = "fleets/local.yaml"


class Listener:
    """A TCP port on loopback that counts the connections made to it and closes each."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept() that close() alone would not
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(timeout=5)


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


def hostile_fleet(port: int) -> str:
    return f"""\
fleet:
  name: local
  provider: local
  hardware: h200
  simulated: true
  transport: ssh
  ssh: {{ user: denv, key_file: ~/.ssh/id_ed25519, port: {port}, check_host_keys: false }}
  hosts:
    - {{ name: attacker, address: 127.0.0.1, gpus: 16 }}
  trial_gpus: 8
"""


@pytest.mark.parametrize(
    ("path", "trusted"),
    [
        ("fleets/local.yaml", True),
        ("policies/gates.yaml", True),
        ("policies/alarms.yaml", True),
        ("policies/parity/default.jsonl", True),
        ("releases/chat-8b/denv.yaml", False),
        ("recipes/llama-3.1-8b/vllm@1.yaml", False),
        ("catalog/hardware.yaml", False),
    ],
)
def test_what_a_pull_request_may_change(path: str, trusted: bool) -> None:
    assert is_trusted_path(path) is trusted


def test_a_pull_request_fleet_is_never_dialled(git_repo: Path, listener: Listener) -> None:
    release = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    git(git_repo, "checkout", "-q", "-b", "hostile")
    (git_repo / FLEET).write_text(hostile_fleet(listener.port))
    (git_repo / RELEASE).write_text(release)
    git(git_repo, "commit", "-q", "-am", "hostile: point the local fleet at my host")
    git(git_repo, "checkout", "-q", "main")
    sign_openings(git_repo)
    assert denv(git_repo, "open", "--head", "hostile").returncode == 0

    answer = planned(git_repo, 1)

    assert listener.accepted == 0
    assert answer["files"] == [FLEET, RELEASE]
    assert answer["problems"] == [] == answer["unplaceable"]
    [comment] = LocalForge(git_repo).comments(1)
    assert (
        "changes `fleets/local.yaml`: fleets, policies and parity suites are read from the "
        "default branch, `main`" in comment.body
    )


def test_a_pull_request_without_its_base_branch_is_refused(git_repo: Path) -> None:
    bigger = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    branch(git_repo, "bigger", RELEASE, bigger)
    sign_openings(git_repo)
    assert denv(git_repo, "open", "--head", "bigger").returncode == 0
    git(git_repo, "checkout", "-q", "bigger")
    git(git_repo, "branch", "-q", "-m", "main", "gone")

    run = denv(git_repo, "plan", "--pr", "1")

    assert run.returncode == 1
    assert "no branch 'main'" in run.stderr and "Traceback" not in run.stderr


def test_a_pull_request_cannot_lower_the_approvals_it_needs(git_repo: Path) -> None:
    gates = (git_repo / "policies/gates.yaml").read_text()
    assert "default_approvals: 1 " in gates
    branch(
        git_repo,
        "no-gate",
        "policies/gates.yaml",
        gates.replace("default_approvals: 1 ", "default_approvals: 0 "),
    )
    sign_openings(git_repo)
    assert denv(git_repo, "open", "--head", "no-gate").returncode == 0
    git(git_repo, "checkout", "-q", "no-gate")  # the work tree now says 0 approvals
    LocalForge(git_repo).set_check(
        git(git_repo, "rev-parse", "HEAD"),
        CheckRun(name="denv plan", title="ok", summary="ok", conclusion=Conclusion.SUCCESS),
    )

    run = denv(git_repo, "merge", "1")

    assert run.returncode == 1, run.stdout
    assert "cannot merge yet" in run.stderr and "approval" in run.stderr
    shown = denv(git_repo, "show", "1")
    assert "approvals: 0 of 1" in shown.stdout


def test_a_review_that_does_not_count_benches_nothing(
    git_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    gates = (git_repo / "policies/gates.yaml").read_text()
    git(git_repo, "checkout", "-q", "main")
    (git_repo / "policies/gates.yaml").write_text(
        gates.replace("approvers: []", "approvers: [grace]")
    )
    git(git_repo, "commit", "-q", "-am", "only grace approves")
    bigger = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    branch(git_repo, "bigger", RELEASE, bigger)
    sign_openings(git_repo, listed=True)
    assert denv(git_repo, "open", "--head", "bigger").returncode == 0
    mallory = new_key(tmp_path_factory.mktemp("keys"), "mallory")
    assert denv(git_repo, "approve", "1", "--as", "mallory", "--key", str(mallory)).returncode == 0

    run = denv(git_repo, "bench", "--pr", "1", "--approved-by", "mallory")

    assert run.returncode == 1
    assert "mallory's review does not count (not named in the approvers policy)" in run.stderr
    assert LocalForge(git_repo).comments(1) == []
