"""What every provider's batch API offers needlescope: submit, state, results, list, cancel.

A batch client wraps a provider's ``HttpProvider`` (its session, headers, scrubbing and reply
reader), so a batch result is read by the same ``_reply`` as a synchronous reply: every
validity label, usage figure, fingerprint and error kind means the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable

from needlescope.errors import ProviderError
from needlescope.providers.base import ChatRequest, Reply

# Error kinds of requests a batch never answered (beside the kinds a reply itself can carry).
BATCH_EXPIRED = "batch_expired"  # the batch's window (24 h) ended before the request ran
BATCH_CANCELED = "batch_canceled"  # the batch was canceled before the request ran
BATCH_FAILED = "batch_failed"  # the whole batch failed (validation, the input file)

# Anthropic's rule for a custom id, the strictest of the three providers.
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class BatchRequest:
    custom_id: str  # "answer-<cell id>" or "judge-<cell id>": unique within a batch
    request: ChatRequest

    def __post_init__(self) -> None:
        if not CUSTOM_ID.match(self.custom_id):
            raise ValueError(f"custom id {self.custom_id!r} is not 1-64 of [a-zA-Z0-9_-]")


@dataclass(frozen=True)
class BatchLimits:
    max_requests: int  # requests in one batch
    max_bytes: int  # bytes of one batch's input (file or body)


@dataclass(frozen=True)
class BatchState:
    """A batch as the provider describes it, in needlescope's words."""

    batch_id: str
    status: str  # the provider's own status word, verbatim (e.g. "in_progress", "ended")
    ended: bool  # no more results will come: completed, ended, expired, canceled or failed
    request_count: int
    # Requests by outcome so far: "succeeded", "errored", "canceled", "expired", "processing".
    counts: dict[str, int] = field(default_factory=dict)
    created_at: float | None = None  # Unix seconds, as the provider stamps it
    # What the batch was tagged with at submission, read back (OpenAI: metadata; Gemini: its
    # display name); None where the provider keeps no tag (Anthropic).
    tag: str | None = None
    input_file_id: str | None = None  # OpenAI only
    error: str | None = None  # why the whole batch failed, when it did


@dataclass(frozen=True)
class BatchResult:
    """One request's outcome: its reply, or the error it ended with (never both)."""

    custom_id: str
    reply: Reply | None = None
    error: ProviderError | None = None


@runtime_checkable
class BatchClient(Protocol):
    limits: BatchLimits

    def request_bytes(self, item: BatchRequest) -> int:
        """The bytes ``item`` adds to a batch's input, as the provider measures its limit."""
        ...

    async def submit(self, items: Sequence[BatchRequest], tag: str) -> BatchState:
        """Create one batch of ``items`` (within ``limits``), tagged with ``tag`` where the
        provider keeps a tag."""
        ...

    async def state(self, batch_id: str) -> BatchState: ...

    async def results(self, batch_id: str) -> list[BatchResult]:
        """Every request's outcome of an ended batch, in any order."""
        ...

    async def listed(self, since: float | None = None) -> list[BatchState]:
        """The account's batches created at or after ``since`` (Unix seconds), newest first."""
        ...

    async def cancel(self, batch_id: str) -> BatchState: ...


def counts_text(counts: Mapping[str, int]) -> str:
    """A batch's requests by outcome, for people: "3 processing, 12 succeeded" ("" if none)."""
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if n)


def content_sha256(items: Sequence[BatchRequest]) -> str:
    """The hash of a batch's requests, as its intent records them before the create."""
    digest = hashlib.sha256()
    for item in items:
        line = json.dumps([item.custom_id, asdict(item.request)], sort_keys=True, default=str)
        digest.update(line.encode())
    return digest.hexdigest()


def created_batch(
    listed: Sequence[BatchState], *, tag: str | None, request_count: int, since: float
) -> BatchState | None:
    """The batch a create whose answer was lost made, among ``listed`` (those no record
    names): the one tagged ``tag``; for a provider that keeps no tag (``tag`` None), the
    oldest of ``request_count`` requests created at or after ``since``."""
    if tag is not None:
        return next((s for s in listed if s.tag == tag), None)
    sized = [
        s
        for s in listed
        if s.request_count == request_count and (s.created_at is None or s.created_at >= since)
    ]
    return min(sized, key=lambda s: s.created_at or 0.0) if sized else None
