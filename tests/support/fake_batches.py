"""What the fake batch APIs (Anthropic, OpenAI, Gemini) share: simulated time and SDK checks.

``SimulatedBatches`` is a mixin holding a fake's batch settings and its ``batches``, moved on by
the fake's own ``_step`` (``tick``, ``advance``, ``finish``); ``run_order`` is the seeded order a
batch's requests run in; ``checked`` validates a wire object against the provider SDK's type.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Generic, TypeVar

from aiohttp import web
from pydantic import BaseModel

B = TypeVar("B")  # a fake's Batch
N = TypeVar("N", int, float)  # its clock's seconds: OpenAI's are whole


class SimulatedBatches(Generic[B, N]):
    """Batches moved on one ``_step`` at a time: ``_step`` and ``_ended`` are the fake's."""

    clock: N
    step_s: N  # how far the clock moves in a step

    def _init_batches(
        self,
        group: int,
        step_s: N,
        auto_advance: bool,
        max_batch_requests: int,
        max_batch_bytes: int,
    ) -> None:
        self.group = group  # requests run in one step
        self.step_s = step_s
        self.auto_advance = auto_advance  # a retrieve advances the batch one step
        self.max_batch_requests = max_batch_requests
        self.max_batch_bytes = max_batch_bytes
        self.batches: dict[str, B] = {}  # in creation order
        self.submitted: Counter[str] = Counter()  # request id -> batches it was submitted in
        self.batch_requests = 0  # requests to the batch API (with OpenAI's file endpoints)

    def tick(self, seconds: N) -> None:
        """Move the simulated clock on."""
        self.clock += seconds

    async def advance(self, batch_id: str, steps: int = 1) -> B:
        batch = self.batches[batch_id]
        for _ in range(steps):
            await self._step(batch)
        return batch

    async def finish(self, batch_id: str) -> B:
        """Advance the batch until it has ended."""
        batch = self.batches[batch_id]
        while not self._ended(batch):
            await self._step(batch)
        return batch

    async def _step(self, batch: B) -> None:
        """One step of simulated time."""
        raise NotImplementedError

    def _ended(self, batch: B) -> bool:
        raise NotImplementedError


def run_order(seed: int, batch_id: str, count: int) -> list[int]:
    """The order a batch's ``count`` requests run in: random, seeded by the fake and the batch."""
    order = list(range(count))
    random.Random(f"{seed}:{batch_id}").shuffle(order)
    return order


def list_limit(request: web.Request) -> int:
    """A list request's ``limit`` (20 unless given); 0, out of any range, when it is no integer."""
    try:
        return int(request.query.get("limit", "20"))
    except ValueError:
        return 0


def checked(model: type[BaseModel], obj: dict[str, Any]) -> dict[str, Any]:
    """``obj``, once it validates against the SDK's ``model`` with no field the SDK lacks."""
    _no_extras(model.model_validate(obj), model.__name__)
    return obj


def _no_extras(value: Any, where: str) -> None:
    if isinstance(value, BaseModel):
        extra = value.model_extra or {}
        assert not extra, f"{where} has fields the SDK does not know: {sorted(extra)}"
        for name in type(value).model_fields:
            _no_extras(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _no_extras(item, f"{where}.{i}")
