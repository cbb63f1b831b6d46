#!/usr/bin/env python3
"""Write denv's default parity suite, policies/parity/default.jsonl: 512 prompts composed
from this script's own templates and word lists (nothing copied), the same bytes every run.

    .venv/bin/python scripts/make_parity_suite.py            # write the file
    .venv/bin/python scripts/make_parity_suite.py --stdout   # print it instead

Domains: code, maths, instructions, summaries, chat, other languages, and groups of prompts
that share one long document as their prefix (prefix caching). Lengths run from a few words
to a few thousand tokens. docs/parity.md describes the format.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from parity_words import LANGUAGES, Prose  # noqa: E402

OUT = REPO / "policies/parity/default.jsonl"
SEED = 8512
TOP_LOGPROBS = 5
Row = dict[str, object]


def _row(pid: str, max_tokens: int, *, messages: list[Row] | None = None, prompt: str = "") -> Row:
    row: Row = {"id": pid, "kind": "chat" if messages is not None else "completion"}
    if messages is not None:
        row["messages"] = messages
    else:
        row["prompt"] = prompt
    row["max_tokens"] = max_tokens
    row["top_logprobs"] = TOP_LOGPROBS
    return row


def _user(text: str, system: str | None = None) -> list[Row]:
    head: list[Row] = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": text}]


class Rows(list[Row]):
    """A domain's rows; `add` refuses a prompt whose text is already in the suite, so the
    builder draws again (every prompt of the suite is different)."""

    def __init__(self, seen: set[str]) -> None:
        super().__init__()
        self.seen = seen
        self.refused = 0

    def add(self, row: Row) -> None:
        key = json.dumps([row.get("messages"), row.get("prompt")], ensure_ascii=False)
        if key in self.seen:
            self.refused += 1
            if self.refused > 1000:
                raise SystemExit(f"cannot compose a new prompt for {row['id']}")
            return
        self.seen.add(key)
        self.append(row)


# -- code ----------------------------------------------------------------------------------

CODE_TASKS = [
    "Write a {lang} function that {task}.",
    "Write a {lang} function that {task}. Add a short docstring and two tests.",
    "In {lang}, how would you {task_inf}? Keep the answer short.",
    "Show how to {task_inf} in {lang} without any third-party library.",
]
CODE_GOALS = [
    ("returns the n-th Fibonacci number iteratively", "compute the n-th Fibonacci number"),
    ("merges two sorted lists into one sorted list", "merge two sorted lists"),
    ("counts the words in a string, ignoring case", "count the words in a string"),
    ("checks whether a string is a palindrome", "check for a palindrome"),
    ("parses a duration such as 1h30m into seconds", "parse a duration like 1h30m"),
    ("removes duplicates from a list but keeps the order", "deduplicate a list in order"),
    ("groups records by a key into a dictionary of lists", "group records by a key"),
    ("retries a call up to three times with a growing delay", "retry a flaky call"),
    ("computes the median of a list of numbers", "compute a median"),
    ("reads a CSV file and sums one column", "sum a column of a CSV file"),
    ("finds the longest common prefix of some strings", "find a longest common prefix"),
    ("rotates a matrix by ninety degrees", "rotate a square matrix"),
]
CODE_LANGS = ["Python", "Go", "Rust", "TypeScript", "C", "Java", "Bash", "SQL"]
PY_TEMPLATES = [
    "def {f}({a}):\n    total = 0\n    for {x} in {a}:\n        if {x} {op} {k}:\n"
    "            total += {x}\n    return total\n",
    "def {f}({a}, {b}={k}):\n    out = []\n    for i, {x} in enumerate({a}):\n"
    "        if i % {b} == 0:\n            out.append({x} * {k2})\n    return out\n",
    "class {C}:\n    def __init__(self, {a}):\n        self.{a} = list({a})\n\n"
    "    def {f}(self):\n        return max(self.{a}) - min(self.{a})\n",
    "def {f}({a}):\n    seen = {{}}\n    for {x} in {a}:\n"
    "        seen[{x}] = seen.get({x}, 0) + 1\n"
    "    return [k for k, v in seen.items() if v {op} {k}]\n",
]
JS_TEMPLATES = [
    "function {f}({a}) {{\n"
    "  return {a}.filter(({x}) => {x} {op} {k}).map(({x}) => {x} * {k2});\n}}\n",
    "const {f} = async ({a}) => {{\n  const res = await fetch({a});\n"
    "  if (!res.ok) throw new Error('status ' + res.status);\n  return res.json();\n}};\n",
]
CODE_QUESTIONS = [
    "What does this code do?",
    "Is there a bug in this code? Explain.",
    "Rewrite this code to be easier to read.",
    "What is the time complexity of this code?",
    "Write unit tests for this code.",
]
IDENTS = ["items", "values", "rows", "scores", "nums", "parts", "events", "orders", "ticks"]
FUNCS = ["tally", "collect", "spread", "pick", "fold", "scan", "crunch", "bucket", "sift"]
COMPLETION_STARTS = [  # (comment, extension, start) of a file named in its first line
    ("#", "py", "def is_prime(n):\n    "),
    ("#", "py", "import json\n\n\ndef load_config(path):\n"),
    ("--", "sql", "SELECT customer_id, SUM(amount)\nFROM payments\n"),
    ("//", "js", "// Binary search over a sorted array\nfunction search(arr, target) {\n"),
    ("//", "rs", "fn main() {\n    let words = vec!["),
    ("#", "sh", "#!/bin/sh\n# Back up the home folder to a dated archive\n"),
]


def _snippet(rng: random.Random, templates: list[str] = PY_TEMPLATES + JS_TEMPLATES) -> str:
    template = rng.choice(templates)
    return template.format(
        f=rng.choice(FUNCS),
        a=rng.choice(IDENTS),
        b="step",
        x=rng.choice("xyvw"),
        op=rng.choice(["<", ">", ">=", "<=", "=="]),
        k=rng.randint(1, 9),
        k2=rng.randint(2, 7),
        C=rng.choice(["Span", "Window", "Ledger", "Gauge"]),
    )


def code(rng: random.Random, seen: set[str], count: int) -> Rows:
    rows = Rows(seen)
    while (i := len(rows)) < count:
        pid, style = f"code-{i + 1:03d}", i % 4
        if style == 0:
            task, task_inf = rng.choice(CODE_GOALS)
            ask = rng.choice(CODE_TASKS).format(
                lang=rng.choice(CODE_LANGS), task=task, task_inf=task_inf
            )
            rows.add(_row(pid, rng.choice([128, 256]), messages=_user(ask)))
        elif style in (1, 2):
            parts = [_snippet(rng) for _ in range(1 if style == 1 else rng.randint(3, 12))]
            ask = "\n".join(parts) + "\n" + rng.choice(CODE_QUESTIONS)
            rows.add(_row(pid, rng.choice([128, 256]), messages=_user(ask)))
        else:
            comment, ext, start = rng.choice(COMPLETION_STARTS)
            head = f"{comment} {rng.choice(FUNCS)}_{rng.choice(IDENTS)}.{ext}\n"
            before = _snippet(rng, PY_TEMPLATES) + "\n\n" if ext == "py" else ""
            rows.add(_row(pid, 128, prompt=head + before + start))
    return rows


# -- maths ---------------------------------------------------------------------------------


def _maths_question(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(100, 999)
    kind = rng.randrange(9)
    if kind == 0:
        return f"What is {a} times {b}?"
    if kind == 1:
        return f"Solve for x: {a}x + {b} = {c}. Show each step."
    if kind == 2:
        return (
            f"A train leaves at {rng.randint(5, 11)}:{rng.choice(['00', '15', '30', '45'])} and "
            f"travels {c} km at {a + 40} km/h. When does it arrive?"
        )
    if kind == 3:
        return f"Is {c + (c % 2 == 0)} a prime number? Explain how you checked."
    if kind == 4:
        return f"Differentiate f(x) = {a}x^3 - {b}x^2 + {rng.randint(1, 9)}x with respect to x."
    if kind == 5:
        return f"What is the sum of the integers from 1 to {c}?"
    if kind == 6:
        return (
            f"A bag holds {a} red and {b} blue marbles. Two are drawn without replacement. "
            "What is the probability that both are red?"
        )
    if kind == 7:
        return f"Prove that the product of any {a % 8 + 2} consecutive integers is even."
    return f"Find the next two terms: {a}, {a + b}, {a + 2 * b}, {a + 3 * b}, ..."


def maths(rng: random.Random, seen: set[str], count: int) -> Rows:
    rows = Rows(seen)
    while (i := len(rows)) < count:
        pid = f"maths-{i + 1:03d}"
        if i % 5 == 4:
            prompt = f"Q: {_maths_question(rng)}\nA:"
            rows.add(_row(pid, rng.choice([64, 128]), prompt=prompt))
        elif i % 5 == 3:
            asks = [f"{n}. {_maths_question(rng)}" for n in range(1, rng.randint(3, 9))]
            text = "Answer each question briefly.\n" + "\n".join(asks)
            rows.add(_row(pid, 256, messages=_user(text)))
        else:
            rows.add(_row(pid, rng.choice([64, 128, 256]), messages=_user(_maths_question(rng))))
    return rows


# -- instructions --------------------------------------------------------------------------

FORMS = ["a haiku", "a limerick", "a four-line poem", "a product description", "a short story"]
TOPICS = [
    "a lighthouse keeper",
    "rain on a tin roof",
    "a lost umbrella",
    "the first day of spring",
    "a quiet library",
    "a bicycle repair shop",
    "a kettle that sings",
    "a night train",
    "a garden in winter",
    "an old map",
    "a city at dawn",
    "a cat who hates Mondays",
]
INSTRUCTIONS = [
    "Write {form} about {topic}.",
    "List {n} tips for {goal}.",
    "Give {n} ideas for {goal}, one line each.",
    "Write an email to {who} explaining that {event}. Keep it polite and under 120 words.",
    "Rewrite this sentence in the passive voice: {sentence}",
    "Turn this sentence into a question: {sentence}",
    "Return a JSON object with the fields {fields} for a made-up {thing}.",
    "Explain {concept} to a ten-year-old.",
    "Explain {concept} in one paragraph.",
    "{greeting}",
    "Say '{phrase}' in {n} languages.",
]
GOALS = [
    "sleeping better",
    "learning to cook",
    "keeping a small garden",
    "saving money on groceries",
    "running a meeting",
    "writing clear emails",
    "studying for exams",
    "packing for a trip",
]
WHO = ["a landlord", "a colleague", "a customer", "a teacher", "the building manager"]
EVENTS = [
    "the delivery will be two days late",
    "the heating stopped working",
    "the meeting moves to Thursday",
    "the invoice was paid twice",
]
GREETINGS = [
    "Hi!",
    "Hello there.",
    "Good morning!",
    "Hey, how are you?",
    "Hi, quick question.",
    "Good evening.",
    "Hello! Are you there?",
    "Morning!",
    "Hey there!",
    "Hi again.",
]
PHRASES = ["hello", "thank you", "good night", "see you tomorrow", "happy birthday"]
FIELDS = [
    "name, city and age",
    "title, year and rating",
    "id, price and stock",
    "from, to and date",
]
THINGS = ["person", "book", "product", "trip", "film", "shop"]
CONCEPTS = [
    "how a rainbow forms",
    "what inflation is",
    "why the sky is blue",
    "how vaccines work",
    "what a database index does",
    "how a bicycle stays upright",
    "what compound interest is",
]


def instructions(rng: random.Random, seen: set[str], count: int) -> Rows:
    prose = Prose(rng)
    rows = Rows(seen)
    while (i := len(rows)) < count:
        pid = f"instructions-{i + 1:03d}"
        text = INSTRUCTIONS[i % len(INSTRUCTIONS)].format(
            form=rng.choice(FORMS),
            topic=rng.choice(TOPICS),
            n=rng.randint(3, 10),
            goal=rng.choice(GOALS),
            who=rng.choice(WHO),
            event=rng.choice(EVENTS),
            sentence=prose.sentence(),
            concept=rng.choice(CONCEPTS),
            greeting=rng.choice(GREETINGS),
            phrase=rng.choice(PHRASES),
            fields=rng.choice(FIELDS),
            thing=rng.choice(THINGS),
        )
        if i % 7 == 6:
            rows.add(_row(pid, 64, prompt=f"Instruction: {text}\nResponse:"))
        else:
            rows.add(_row(pid, rng.choice([32, 64, 128]), messages=_user(text)))
    return rows


# -- summaries -----------------------------------------------------------------------------

SUMMARY_ASKS = [
    "Summarize the text above in three sentences.",
    "Summarize the text above in one sentence.",
    "List the five most important facts in the text above.",
    "Write a headline for the text above.",
    "What decisions does the text above report? Answer as a bulleted list.",
]


def summaries(rng: random.Random, seen: set[str], count: int) -> Rows:
    prose = Prose(rng)
    rows = Rows(seen)
    while (i := len(rows)) < count:
        pid = f"summaries-{i + 1:03d}"
        # log-uniform lengths: many short texts, a few of a few thousand tokens
        words = int(40 * (2400 / 40) ** (i / (count - 1)))
        doc = prose.document(words)
        if i % 4 == 3:
            rows.add(_row(pid, 64, prompt=f"{doc}\n\nTL;DR:"))
        else:
            ask = f"{doc}\n\n{rng.choice(SUMMARY_ASKS)}"
            rows.add(_row(pid, rng.choice([64, 128]), messages=_user(ask)))
    return rows


# -- chat ----------------------------------------------------------------------------------

SYSTEMS = [
    None,
    "You are a helpful assistant. Answer briefly.",
    "You are a patient tutor. Ask one question back when something is unclear.",
    "You are the support assistant of a small bicycle shop. Be friendly and concrete.",
    "You are a travel planner. Suggest plans with times and rough costs.",
]
OPENERS = [
    "Can you help me plan a weekend?",
    "I need a name for my new cat.",
    "What should I cook tonight with rice, eggs and spinach?",
    "My bike chain keeps slipping.",
    "How do I start learning to draw?",
    "Is it better to rent or buy a car for a month?",
    "I have an interview tomorrow. Any advice?",
    "Recommend a board game for four people.",
]
FOLLOW_UPS = [
    "Thanks! Can you make it shorter?",
    "What would you change if it rains?",
    "Why do you suggest that?",
    "And what if I only have an hour?",
    "Can you give me a second option?",
    "Great, what is the next step?",
]
REPLIES = [
    "Sure. Start with the simplest option and see how it goes.",
    "Here is a plan: morning walk, lunch at the market, a museum in the afternoon.",
    "Try cleaning and oiling the chain first, then check the gear cables.",
    "A short, calm answer with one example usually works best.",
]


def chat(rng: random.Random, seen: set[str], count: int) -> Rows:
    rows = Rows(seen)
    while (i := len(rows)) < count:
        pid = f"chat-{i + 1:03d}"
        system = SYSTEMS[i % len(SYSTEMS)]
        messages = _user(rng.choice(OPENERS), system)
        for _ in range(rng.choice([0, 0, 1, 2, 3, 5])):
            messages.append({"role": "assistant", "content": rng.choice(REPLIES)})
            messages.append({"role": "user", "content": rng.choice(FOLLOW_UPS)})
        rows.add(_row(pid, rng.choice([32, 64, 128]), messages=messages))
    return rows


# -- other languages -----------------------------------------------------------------------


def languages(rng: random.Random, seen: set[str], count: int) -> Rows:
    prose = Prose(rng)
    codes = sorted(LANGUAGES)
    rows = Rows(seen)
    while (i := len(rows)) < count:
        code_ = codes[i % len(codes)]
        lang = LANGUAGES[code_]
        pid = f"languages-{code_}-{i // len(codes) + 1:02d}"
        if i // len(codes) % 3 == 2:
            text = f"Translate into {lang.name}: {prose.sentence()} {prose.sentence()}"
        else:
            text = rng.choice(lang.asks).format(topic=rng.choice(lang.topics))
        if i // len(codes) % 4 == 3:
            rows.add(_row(pid, 64, prompt=text + "\n"))
        else:
            rows.add(_row(pid, rng.choice([64, 128]), messages=_user(text)))
    return rows


# -- shared long prefixes ------------------------------------------------------------------

PREFIX_WORDS = [400, 600, 800, 1000, 1300, 1600, 2000, 2500]
PREFIX_QUESTIONS = [
    "Which team is mentioned first in the report?",
    "What numbers does the report give? List them.",
    "Summarize the report in two sentences.",
    "What risks does the report raise?",
    "Write three follow-up questions about the report.",
    "Which place is mentioned most often?",
]


def prefix(rng: random.Random, seen: set[str], count: int) -> Rows:
    prose = Prose(rng)
    per_group = count // len(PREFIX_WORDS)
    rows = Rows(seen)
    for g, words in enumerate(PREFIX_WORDS):
        doc = prose.document(words)
        system = f"Answer questions about this report.\n\n{doc}"
        for q in range(per_group):
            pid = f"prefix-{g + 1}-{q + 1}"
            question = PREFIX_QUESTIONS[q % len(PREFIX_QUESTIONS)]
            if g % 2:
                rows.add(_row(pid, 32, prompt=f"{doc}\n\nQuestion: {question}\nAnswer:"))
            else:
                rows.add(_row(pid, 64, messages=_user(question, system)))
    return rows


DOMAINS: list[tuple[Callable[[random.Random, set[str], int], Rows], int]] = [
    (code, 88),
    (maths, 80),
    (instructions, 80),
    (summaries, 64),
    (chat, 80),
    (languages, 72),
    (prefix, 48),
]


def render() -> str:
    """The suite file's text: one JSON object per line."""
    rows: list[Row] = []
    seen: set[str] = set()
    for index, (build, count) in enumerate(DOMAINS):
        rows += build(random.Random(SEED * 100 + index), seen, count)
    assert len(rows) == sum(count for _, count in DOMAINS), "a domain repeated a prompt"
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdout", action="store_true", help="print instead of writing")
    args = parser.parse_args()
    text = render()
    if args.stdout:
        sys.stdout.write(text)
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}: {text.count(chr(10))} prompts, {len(text):,} chars")


if __name__ == "__main__":
    main()
