"""The two guides work as written: every command of docs/choose.md ("Choose a model and GPU")
and docs/optimize.md (its walk-through), as the guides print it, runs in a fresh clone on
the local fleet of simulated GPUs with the exit status the guide states (0 unless it says
`# exits N`) and no traceback. scripts/walk_guides.py does the walk; `--write` puts its real
output into the guides."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scripts.walk_guides import GUIDES, ROOT, Block, Command, Outcome, parse, rewrite, walk_guide
from tests.labs.busy import busy_machine

# Steps that fail today because of bugs fixed elsewhere under issue 17. The guides keep these
# commands as a user would type them; empty this list as the fixes land (a step listed here
# that passes fails the test, so the list never hides a regression).
KNOWN_BROKEN: dict[str, str] = {}  # command -> why it fails today; empty: every step works

SAMPLE = """\
# A guide

```sh
denv bench --latency '#p99 exits 2' --limit 3   # it's the top 3
```

```text
old output
```

Prose between: the next block has no output block.

```sh
# a comment line is no command
denv recipe fit big --fleet local   # exits 1: it does not fit
denv optimize start chat-8b/canary \\
  --budget-gpus 4
```

More prose.

```sh
denv one
denv two
```

```
old
```

```sh
denv three
```

```yaml
release: {}
```
"""


def test_parse_finds_commands_exits_and_output_blocks() -> None:
    blocks = parse(SAMPLE, "guide.md")
    assert [[(c.line, c.text, c.expect) for c in b.commands] for b in blocks] == [
        [(4, "denv bench --latency '#p99 exits 2' --limit 3   # it's the top 3", 0)],
        [
            (15, "denv recipe fit big --fleet local   # exits 1: it does not fit", 1),
            (16, "denv optimize start chat-8b/canary --budget-gpus 4", 0),
        ],
        [(23, "denv one", 0), (24, "denv two", 0)],
        [(32, "denv three", 0)],
    ]
    assert [b.output for b in blocks] == [(6, 8, "text"), None, (26, 28, ""), None]
    assert blocks[1].commands[0].where == "guide.md:15"


def test_rewrite_puts_real_output_in_output_blocks_only() -> None:
    blocks = parse(SAMPLE, "guide.md")
    outputs = {4: "ranked\n 1  row", 23: "one's", 24: "two's"}  # line 32 did not run
    text = rewrite(SAMPLE, blocks, outputs)
    assert "```text\nranked\n 1  row\n```" in text
    assert "```\n$ denv one\none's\n$ denv two\ntwo's\n```" in text
    assert "old" not in text and text.endswith("```\n")
    assert rewrite(SAMPLE, blocks, {}) == SAMPLE


def test_an_output_with_fences_of_its_own_gets_a_longer_fence() -> None:
    """`bench run` prints a mermaid chart in ``` fences: the output block must hold it, and
    the next --write must find the same block again."""
    blocks = parse(SAMPLE, "guide.md")
    chart = "results: r.json\n```mermaid\nxychart-beta\n```"
    once = rewrite(SAMPLE, blocks, {4: chart})
    assert f"````text\n{chart}\n````\n" in once
    again = parse(once, "guide.md")
    assert [b.output for b in again][:2] == [(6, 11, "text"), None]
    assert rewrite(once, again, {4: "plain"}).startswith(SAMPLE.split("old output")[0] + "plain")


@pytest.mark.parametrize(
    ("returncode", "stderr", "problems"),
    [
        (0, "", []),
        (1, "", ["exit 1, expected 0"]),
        (3, "Traceback (most recent call last):", ["exit 3, expected 0", "a traceback"]),
        (0, "Traceback (most recent call last):", ["a traceback"]),
    ],
    ids=["ok", "exit", "crash", "traceback-exit-0"],
)
def test_outcome_problems(returncode: int, stderr: str, problems: list[str]) -> None:
    command = Command("guide.md", 1, "denv x", 0)
    assert Outcome(command, returncode, "", stderr, 0.0).problems == problems


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_commands_are_real_and_plain(guide: str) -> None:
    """The guides mark what they run, show its output, and use --json nowhere (they do not
    teach it): what a user reads is what the walk runs."""
    blocks: list[Block] = parse((ROOT / guide).read_text(), guide)
    commands = [c for b in blocks for c in b.commands]
    assert len(commands) >= 5 and any(b.output for b in blocks)
    assert [c.where for c in commands if "--json" in c.text] == []


# docs/optimize.md is walked once, with every core kept busy (the last test here; a hog or
# another test worker on each core, tests/labs/busy.py): its optimizer step verifies a gain
# measured on simulated GPUs that share the CPUs, so a busy machine is the harder walk, and a
# quiet walk of it would add minutes and prove nothing more.
# docs/choose.md reads stored results and the catalog, measuring nothing: it runs with the rest.
MEASURES_A_GAIN = ("docs/optimize.md",)
WALKS = [g for g in GUIDES if g not in MEASURES_A_GAIN]


@pytest.mark.parametrize("guide", WALKS)
def test_walk_the_guide(guide: str) -> None:
    outcomes = walk_guide(guide, report=print_outcome)
    failed = {o.command.text: o for o in outcomes if o.problems}
    unexpected = {text: o for text, o in failed.items() if text not in KNOWN_BROKEN}
    assert not unexpected, "\n".join(describe(o) for o in unexpected.values())
    ran = {o.command.text for o in outcomes}
    fixed = [text for text in KNOWN_BROKEN if text in ran and text not in failed]
    assert not fixed, f"now pass: remove them from KNOWN_BROKEN: {fixed}"
    if failed:
        pytest.xfail("; ".join(f"{text}: {KNOWN_BROKEN[text]}" for text in failed))


@pytest.fixture
def busy() -> Iterator[None]:
    with busy_machine():
        yield


@pytest.mark.slow
def test_the_optimizer_guide_on_a_busy_machine(busy: None) -> None:
    """docs/optimize.md walked with every core kept busy: the candidate may come out
    inconclusive, never rejected for noise, and the guide's retry (`--verify`) then verifies
    it: the walk ends with the guide's pull request, every step as the guide states it."""
    outcomes = walk_guide("docs/optimize.md", report=print_outcome)
    failed = [o for o in outcomes if o.problems]
    assert not failed, "\n".join(describe(o) for o in failed)
    promoted = [o for o in outcomes if o.command.text.startswith("denv optimize promote")]
    assert promoted and "Pull request #1" in promoted[0].stdout


def print_outcome(outcome: Outcome) -> None:
    print(f"{outcome.seconds:6.1f}s exit {outcome.returncode}  {outcome.command.text}")


def describe(outcome: Outcome) -> str:
    tail = (outcome.stdout + outcome.stderr).strip().splitlines()[-15:]
    return "\n".join(
        [f"{outcome.command.where}: {outcome.command.text}: {', '.join(outcome.problems)}"]
        + [f"  | {line}" for line in tail]
    )
