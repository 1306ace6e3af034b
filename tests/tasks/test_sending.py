"""A model's request slots (tasks/sending.py): taken around the request alone, so more task
runs than slots may wait for one; never more requests in flight than the model's
``concurrency``; the budget checked again by a request that waited."""

from __future__ import annotations

import asyncio

import pytest

from needlescope.config._sweep import SweepConfig
from needlescope.providers.base import Reply
from needlescope.tasks.query import live_task_runs
from needlescope.tasks.sending import BudgetSpent, Sending, Spend


def config(budget: int = 0) -> SweepConfig:
    return SweepConfig.model_validate(
        {
            "name": "slots",
            "models": [
                {
                    "name": "m",
                    "provider": "openai",
                    "model": "m",
                    "base_url": "http://127.0.0.1:9",
                }
            ],
            "probes": [
                {"probe": "recall", "lengths": [500], "length_unit": "chars", "needle_counts": [1]}
            ],
            **({"budget": {"tokens": budget}} if budget else {}),
        }
    )


def reply(prompt_tokens: int) -> Reply:
    return Reply("ok", "stop", prompt_tokens, 0, None, 0.01)


async def test_never_more_in_flight_than_the_slots() -> None:
    sending = Sending(3, 0.0, Spend(config()))
    in_flight: list[int] = []

    async def request(i: int) -> int:
        async with sending.turn():
            in_flight.append(sending.in_flight)
            await asyncio.sleep(0.01 * (i % 4))
        return i

    done = await asyncio.gather(*(request(i) for i in range(20)))
    assert done == list(range(20))
    assert max(in_flight) == sending.max_in_flight == 3
    assert sending.in_flight == 0


async def test_a_request_that_waited_sees_the_budget_spent_meanwhile() -> None:
    spend = Spend(config(budget=2))
    sending = Sending(1, 0.0, spend)
    sent: list[str] = []

    async def request(name: str, tokens: int) -> str:
        async with sending.turn():
            sent.append(name)
            await asyncio.sleep(0.01)
            spend.add("m", reply(tokens))
        return name

    first = asyncio.ensure_future(request("first", 2))
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(request("second", 1))
    assert await first == "first"
    with pytest.raises(BudgetSpent, match="budget was spent"):
        await waiting
    assert sent == ["first"]
    assert sending.in_flight == 0


def test_twice_the_task_runs_start_unless_a_tag_limit_or_a_budget_applies() -> None:
    assert live_task_runs(4, None, budgeted=False) == 8
    assert live_task_runs(4, [], budgeted=False) == 8
    assert live_task_runs(4, ["needlescope-provider:openai"], budgeted=False) == 4
    assert live_task_runs(4, None, budgeted=True) == 4


def test_spend_prices_cache_writes_and_batch_replies_by_the_table() -> None:
    base = config().models[0].model_dump()
    priced = SweepConfig.model_validate(
        {
            **config().model_dump(mode="json"),
            "models": [
                {
                    **{k: v for k, v in base.items() if v is not None},
                    "provider": "anthropic",
                    "price": {"input_per_mtok": 4.0, "output_per_mtok": 20.0},
                }
            ],
        }
    )
    reply = Reply(
        "7", "stop", 1_000_000, 0, 0, None, cached_tokens=500_000, cache_write_tokens=500_000
    )
    spend = Spend(priced)
    assert spend.cost("m", reply) == pytest.approx(0.5 * 0.4 + 0.5 * 5.0)
    assert spend.cost("m", reply, batched=True) == pytest.approx((0.2 + 2.5) / 2)
    spend.add("m", reply, batched=True)
    assert spend.usd == pytest.approx(1.35) and spend.tokens == 1_000_000


def test_a_flex_model_pays_batch_prices_on_its_synchronous_replies() -> None:
    def priced(**extra: object) -> SweepConfig:
        model = {
            "name": "m",
            "provider": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9",
            "price": {"input_per_mtok": 2.0, "output_per_mtok": 8.0},
        }
        probe = {"probe": "goto", "line_counts": [10], "orders": ["ordered"]}
        return SweepConfig.model_validate(
            {"name": "f", "models": [{**model, **extra}], "probes": [probe]}
        )

    reply = Reply("7", "stop", 1_000_000, 1_000_000, 0, 1.0)
    assert Spend(priced()).cost("m", reply) == pytest.approx(10.0)
    assert Spend(priced(tier="flex")).cost("m", reply) == pytest.approx(5.0)


def test_an_open_batch_holds_its_worst_case_against_the_budget() -> None:
    spend = Spend(config(budget=1000))
    assert spend.fits(1000, 0.0) and not spend.fits(1001, 0.0)
    spend.reserve(600, 0.0)  # a batch submitted: every prompt and output token it may spend
    assert not spend.fits(401, 0.0) and spend.fits(400, 0.0) and not spend.exhausted()
    spend.add("m", reply(300))  # a synchronous reply meanwhile
    assert not spend.fits(101, 0.0)
    spend.reserve(100, 0.0)
    assert spend.exhausted()  # nothing is left: synchronous requests stop too
    spend.release(700, 0.0)  # the batches were collected (their replies added apart)
    assert spend.fits(700, 0.0) and not spend.exhausted()
    assert Spend(config()).fits(10**12, 10.0**6)  # no budget, no limit
