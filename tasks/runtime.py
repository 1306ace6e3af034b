"""What the sweep's tasks reach of the running sweep: one ContextVar, set by the flow.

The flow opens the provider clients, makes a :class:`Runtime` and runs its tasks inside
``running(runtime)``; a task finds it with :func:`current`. Tasks run in the flow's event loop,
so they see the flow's context; nothing outlives the run (each run counts its own attempts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from needlescope.providers.base import Provider
from needlescope.tasks.contexts import ContextBuilder
from needlescope.tasks.sending import Sending


@dataclass
class Runtime:
    """The running sweep's live resources, by model name."""

    providers: dict[str, Provider]
    contexts: ContextBuilder  # fillers, measures and the contexts built (prepare.py)
    # Prefect rate limits each model's requests take a slot of (flows/limits.py).
    rate_limits: dict[str, list[str]] = field(default_factory=dict)
    # Requests sent per cell in this run: retries included, cache hits excluded.
    attempts: Counter[str] = field(default_factory=Counter)
    # What serves each local model (GGUF, chat template and llama.cpp hashes and version),
    # added to its replies' fingerprints (flows/serving.py).
    serving: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # Each model's request slots, pacing and budget, taken around each of its requests.
    sending: dict[str, Sending] = field(default_factory=dict)


T = TypeVar("T")
_RUNTIME: ContextVar[Runtime] = ContextVar("needlescope_runtime")


def current() -> Runtime:
    try:
        return _RUNTIME.get()
    except LookupError:
        raise RuntimeError("no sweep is running in this context") from None


@contextmanager
def scoped(var: ContextVar[T], value: T) -> Iterator[T]:
    """``var`` holds ``value`` for the block (and every task it starts), then what it held."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


def running(runtime: Runtime) -> AbstractContextManager[Runtime]:
    """``runtime`` is the tasks' for the block."""
    return scoped(_RUNTIME, runtime)
