"""Helpers the batch clients' tests share: requests to send, a chat echo, and running a batch.

``opened`` holds a batch client whose provider it closes on the way out; ``run`` submits a batch,
polls it until it has ended and reads its results; ``failure`` is the ProviderError a call raises;
``sync_failures`` the errors the synchronous path gives for injected faults.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from needlescope.errors import ProviderError
from needlescope.providers.base import ChatRequest, Message
from needlescope.providers.batch import BatchClient
from needlescope.providers.batch.base import BatchRequest, BatchResult
from needlescope.providers.http import HttpProvider
from tests.support.fake_server import FakeServer

P = TypeVar("P", bound=HttpProvider)
C = TypeVar("C")


def ask(question: str, max_tokens: int | None = 20, **extra: Any) -> ChatRequest:
    return ChatRequest((Message("user", question),), max_tokens=max_tokens, extra=extra)


def echo(body: dict[str, Any]) -> str:
    """A responder for chat-shaped bodies (Anthropic's, OpenAI's): the last message, echoed."""
    return f"You asked: {body['messages'][-1]['content']}"


def items(requests: dict[str, ChatRequest]) -> list[BatchRequest]:
    return [BatchRequest(custom_id, request) for custom_id, request in requests.items()]


@asynccontextmanager
async def opened(provider: P, client: Callable[[P], C]) -> AsyncIterator[C]:
    """The batch client of ``provider``, which is closed on the way out."""
    try:
        yield client(provider)
    finally:
        await provider.aclose()


async def run(
    client: BatchClient, requests: Sequence[BatchRequest], tag: str = "sweep"
) -> dict[str, BatchResult]:
    """Submit, poll until ended, and read every result by custom id."""
    state = await client.submit(requests, tag)
    for _ in range(100):
        state = await client.state(state.batch_id)
        if state.ended:
            break
    assert state.ended
    return {r.custom_id: r for r in await client.results(state.batch_id)}


async def failure(coro: Awaitable[Any]) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await coro
    return info.value


async def sync_failures(
    srv: FakeServer[Any], provider: HttpProvider, faults: Mapping[str, Any]
) -> dict[str, ProviderError]:
    """Each fault's error on the synchronous path: ``ask("Q?")`` completed with it injected."""
    errors = {}
    for cid, fault in faults.items():
        srv.add_faults(fault)
        errors[cid] = await failure(provider.complete(ask("Q?")))
    return errors
