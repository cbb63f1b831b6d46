"""Models and pure logic: a parity suite — a JSONL file of prompts, one a line, each with its
own decoding settings (greedy is implied) — parsed into a `Suite`, or a `SpecError` whose
problems name the file, the line and the field (`path:line:col: field: message`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from reconciler.errors import Problem, SpecError
from reconciler.spec.base import Spec
from reconciler.spec.jsonio import read_line
from reconciler.spec.problems import Locate, from_validation
from reconciler.spec.yamlio import decode_utf8

PromptId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=128)]
MAX_TOP_LOGPROBS = 20  # the most OpenAI-compatible servers (vLLM, SGLang) return


class Message(Spec):
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class SuitePrompt(Spec):
    """One prompt: a chat (`messages`) or a completion (`prompt`), answered greedily."""

    id: PromptId
    kind: Literal["chat", "completion"]
    messages: tuple[Message, ...] | None = None
    prompt: str | None = Field(default=None, min_length=1)
    max_tokens: int = Field(ge=1, le=32768)
    top_logprobs: int = Field(default=5, ge=0, le=MAX_TOP_LOGPROBS)

    @model_validator(mode="after")
    def _kind_has_its_input(self) -> SuitePrompt:
        if self.kind == "chat" and (self.messages is None or self.prompt is not None):
            raise ValueError("a chat prompt has messages and no prompt")
        if self.kind == "completion" and (self.prompt is None or self.messages is not None):
            raise ValueError("a completion prompt has a prompt and no messages")
        if self.messages is not None and not self.messages:
            raise ValueError("messages must not be empty")
        return self


class Suite(Spec):
    name: str
    path: str  # where it was read from, for messages
    prompts: tuple[SuitePrompt, ...]


def _locate_in(number: int, line: str) -> Locate:
    """A field's place: this line, at the column of its key (1 when it is not there)."""

    def locate(where: Sequence[str | int]) -> tuple[int, int]:
        if where and isinstance(where[0], str):
            found = line.find(json.dumps(where[0]))
            return number, found + 1 if found >= 0 else 1
        return number, 1

    return locate


def _parse_line(path: str, number: int, line: str) -> tuple[SuitePrompt | None, list[Problem]]:
    raw, problem = read_line(path, number, line)
    if problem is not None:
        return None, [problem]
    if not isinstance(raw, dict):
        return None, [Problem(path, number, 1, "a prompt line is a JSON object")]
    try:
        return SuitePrompt.model_validate(raw), []
    except ValidationError as exc:
        return None, from_validation(path, raw, exc, _locate_in(number, line))


def parse_suite(name: str, path: str, data: bytes) -> Suite:
    """Every prompt of a suite file, or SpecError listing every bad line (ids must be unique;
    blank lines are skipped)."""
    text, problem = decode_utf8(path, data)
    if text is None:
        raise SpecError([problem] if problem else [])
    prompts: list[SuitePrompt] = []
    problems: list[Problem] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        prompt, found = _parse_line(path, number, line)
        problems += found
        if prompt is None:
            continue
        if prompt.id in first_line:
            col = line.find('"id"') + 1 or 1
            seen = first_line[prompt.id]
            problems.append(Problem(path, number, col, f"id: '{prompt.id}' is on line {seen}"))
            continue
        first_line[prompt.id] = number
        prompts.append(prompt)
    if not prompts and not problems:
        problems.append(Problem(path, 1, 1, "the suite has no prompts"))
    if problems:
        raise SpecError(problems)
    return Suite(name=name, path=path, prompts=tuple(prompts))
