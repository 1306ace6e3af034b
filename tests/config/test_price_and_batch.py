"""Prices by the providers' rules (cache reads and writes, batch and flex discounts) and the
models' `batch:` and `tier:` options, refused in one line where the provider has none."""

from __future__ import annotations

import pytest

from needlescope.config._models import Price
from needlescope.config._sweep import parse_config
from needlescope.errors import ConfigError

M = 1_000_000


def _config(**model: object) -> dict[str, object]:
    base = {"name": "m", "provider": "anthropic", "model": "claude-x"}
    return {
        "name": "p",
        "models": [{**base, **model}],
        "probes": [{"probe": "goto", "line_counts": [10], "orders": ["ordered"]}],
    }


def test_anthropic_prices_cache_reads_and_writes_by_its_published_multiples() -> None:
    config = parse_config(_config(price={"input_per_mtok": 3.0, "output_per_mtok": 15.0}))
    price = config.model("m").price
    assert price is not None
    assert (price.cached_input_per_mtok, price.cache_write_per_mtok) == (0.3, 3.75)
    assert price.cache_write_1h_per_mtok == 6.0
    # 1M prompt tokens: 200K read, 300K written of which 100K for an hour, 500K plain.
    cost = price.cost(M, 0, 200_000, cache_write_tokens=300_000, cache_write_1h_tokens=100_000)
    assert cost == pytest.approx(0.5 * 3 + 0.2 * 0.3 + 0.2 * 3.75 + 0.1 * 6.0)


def test_a_given_cache_rate_wins_and_other_providers_get_no_multiples() -> None:
    anthropic = parse_config(
        _config(price={"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cache_write_per_mtok": 4})
    )
    assert anthropic.model("m").price == Price(
        input_per_mtok=3.0,
        output_per_mtok=15.0,
        cached_input_per_mtok=0.3,
        cache_write_per_mtok=4.0,
        cache_write_1h_per_mtok=6.0,
    )
    openai = parse_config(
        _config(
            provider="openai",
            base_url="http://127.0.0.1:1/v1",
            price={"input_per_mtok": 2.0, "output_per_mtok": 8.0},
        )
    )
    price = openai.model("m").price
    assert price is not None and price.cached_input_per_mtok is None
    assert price.cost(M, 0, 400_000) == pytest.approx(2.0)  # read at the input rate


def test_batch_and_flex_pay_the_discount_or_the_batch_prices() -> None:
    price = Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
    assert price.cost(M, M, 400_000, discounted=True) == pytest.approx((1.2 + 0.2 + 8) / 2)
    own = Price(
        input_per_mtok=2.0, output_per_mtok=8.0, batch_input_per_mtok=1.2, batch_output_per_mtok=2
    )
    assert own.cost(M, M, discounted=True) == pytest.approx(1.2 + 2.0)
    assert own.cost(M, M) == pytest.approx(10.0)


def test_cache_counts_beyond_the_prompt_are_capped_not_negative() -> None:
    price = Price(input_per_mtok=1.0, output_per_mtok=1.0, cache_write_per_mtok=2.0)
    assert price.cost(100, 0, 80, cache_write_tokens=50) == pytest.approx((80 + 20 * 2) / M)


def test_batch_true_takes_the_defaults_and_its_limits_validate() -> None:
    config = parse_config(_config(batch=True))
    batch = config.model("m").batch
    assert batch is not None and (batch.poll_s, batch.rerun, batch.max_requests) == (
        60,
        "batch",
        None,
    )
    assert parse_config(_config(batch=False)).model("m").batch is None
    tuned = parse_config(_config(batch={"max_requests": 500, "wait_s": 0, "rerun": "sync"}))
    assert tuned.model("m").batch is not None and tuned.model("m").batch.max_requests == 500
    with pytest.raises(ConfigError, match="max_requests"):
        parse_config(_config(batch={"max_requests": 0}))
    with pytest.raises(ConfigError, match="poll_interval"):
        parse_config(_config(batch={"poll_interval": 5}))


def test_batch_on_a_provider_without_a_batch_api_is_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(provider="local", model=None, batch=True))
    message = str(caught.value)
    assert "\n" not in message and "has no batch API" in message and "'local'" in message


def test_flex_tier_for_openai_and_gemini_only() -> None:
    gemini = parse_config(_config(provider="gemini", model="gemini-2.5-flash", tier="flex"))
    assert gemini.model("m").discounted
    with pytest.raises(ConfigError, match="has no flex tier"):
        parse_config(_config(tier="flex"))
    with pytest.raises(ConfigError, match="tier"):
        parse_config(_config(provider="gemini", model="g", tier="priority"))


def test_batch_and_tier_leave_the_cell_ids_as_they_are() -> None:
    from needlescope.probes.registry import expand_grid

    plain = {c.cell_id for c in expand_grid(parse_config(_config()))}
    batched = {c.cell_id for c in expand_grid(parse_config(_config(batch=True)))}
    assert plain == batched
