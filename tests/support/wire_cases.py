"""Named wire cases: replies the hosted APIs really send, as the fake servers send them.

Each case is a reply (or a sequence of replies, one per attempt) of one wire format, built by
the fake's own code in the field layout of a real reply: the recorded examples of
``../shared/data/wire-examples/`` (``Case.example`` names the file it reproduces; a test
compares the two field by field) and every finish/stop reason the SDKs' types define. With
each case goes what needlescope must store for it (``Case.stored``), whether the request is
retried, and how long the client waits before re-sending.

``CaseBook`` is a fake server's responder that hands the cases out: the first request of a
prompt not seen before gets the next case, and every request of that prompt then gets the
case's reply for its attempt (past the last one: a normal, right answer). So a sweep sends
each case to a cell of its own, and the test learns which from ``CaseBook.assigned``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_server import WireReply


@dataclass(frozen=True)
class Request:
    """What a case's reply is built from: the request, its right answer, its prompt's size."""

    body: dict[str, Any]
    answer: str
    prompt_tokens: int


Builder = Callable[[Request], WireReply]
# A stored value a case expects: a value, or computed from the request that got the case.
Expected = Any


@dataclass(frozen=True)
class Derived:
    """An expected value that depends on the request (its prompt's size, its answer)."""

    of: Callable[[Request], Any]


@dataclass(frozen=True)
class Case:
    name: str
    api: str  # "openai" | "anthropic" | "gemini": the fake that serves it
    replies: tuple[Builder, ...]  # one per attempt; past the last: a normal answer
    stored: Mapping[str, Expected]  # answers-table columns → what needlescope stores
    example: str | None = None  # the wire-examples file this case reproduces
    source: str = ""  # where the layout comes from when it is no example: the SDK type
    # The model settings that get the case (a config's model entry, over the API's defaults).
    model: Mapping[str, Any] = field(default_factory=dict)
    retryable: bool | None = None  # for a failure: whether the orchestrator retries it
    requests: int = 1  # requests the client sends for one complete() call
    waited: tuple[float, ...] = ()  # seconds the client waits before re-sending, in order

    def expected(self, request: Request) -> dict[str, Any]:
        return {k: v.of(request) if isinstance(v, Derived) else v for k, v in self.stored.items()}

    @property
    def fails(self) -> bool:
        return self.stored.get("error_kind") is not None


def answer_of(prompt: str) -> str:
    """The right answer to a recall prompt: every four-digit needle, in order, as JSON."""
    match = re.search(r"<text>(.*)</text>", prompt, re.DOTALL)
    haystack = match.group(1) if match else prompt
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def prompt_of(api: str, body: Mapping[str, Any]) -> str:
    """The last user turn of a request body in ``api``'s wire format."""
    if api == "gemini":
        contents = body.get("contents") or [{}]
        return str((contents[-1].get("parts") or [{}])[-1].get("text", ""))
    content = (body.get("messages") or [{}])[-1].get("content", "")
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


def prompt_sha256(api: str, body: Mapping[str, Any]) -> str:
    """As the cells table's ``prompt_sha256`` (a one-message prompt)."""
    return hashlib.sha256(prompt_of(api, body).encode()).hexdigest()


class CaseBook:
    """A responder handing ``cases`` out, one per new (model, prompt), in order."""

    def __init__(
        self, api: str, cases: Sequence[Case], count: Callable[[dict[str, Any]], int]
    ) -> None:
        self.api = api
        self.cases = list(cases)
        self.count = count  # the fake's prompt-token count of a body
        self.assigned: dict[tuple[str, str], Case | None] = {}  # (model, prompt sha) → case
        self.sent: Counter[tuple[str, str]] = Counter()
        self.bodies: dict[tuple[str, str], dict[str, Any]] = {}  # the first request of each
        self.statuses: list[int] = []  # the HTTP status of every reply handed out

    def key(self, body: Mapping[str, Any]) -> tuple[str, str]:
        return str(body.get("model", "")), prompt_sha256(self.api, body)

    def __call__(self, body: dict[str, Any]) -> str | WireReply:
        key = self.key(body)
        if key not in self.assigned:
            index = len(self.assigned)
            self.assigned[key] = self.cases[index] if index < len(self.cases) else None
            self.bodies[key] = body
        attempt = self.sent[key]
        self.sent[key] += 1
        request = self.request(body)
        case = self.assigned[key]
        if case is None or attempt >= len(case.replies):
            self.statuses.append(200)
            return request.answer
        reply = case.replies[attempt](request)
        self.statuses.append(reply.status)
        return reply

    def request(self, body: dict[str, Any]) -> Request:
        return Request(body, answer_of(prompt_of(self.api, body)), self.count(body))

    def case_of(self, model: str, sha: str) -> Case | None:
        return self.assigned.get((model, sha))


# --- comparing a fake's reply with a recorded one --------------------------------------------


def shape(value: Any, path: str = "") -> set[tuple[str, str]]:
    """Every field path of a JSON value with its type (list items merged under ``[]``)."""
    if isinstance(value, dict):
        found = {(path, "object")}
        for key, item in value.items():
            found |= shape(item, f"{path}.{key}" if path else key)
        return found
    if isinstance(value, list):
        found = {(path, "array")}
        for item in value:
            found |= shape(item, f"{path}[]")
        return found
    kinds = {bool: "boolean", int: "number", float: "number", str: "string", type(None): "null"}
    return {(path, kinds[type(value)])}


def header_names(headers: Mapping[str, str]) -> set[str]:
    return {name.lower() for name in headers}
