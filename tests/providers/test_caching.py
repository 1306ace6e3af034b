"""``cache: auto``: the longest prefix cells share, marked where caching it pays by the price
table; Anthropic's body ends it with a cache_control breakpoint, OpenAI's names it with a
prompt_cache_key (which is no sampling setting)."""

from __future__ import annotations

import pytest

from needlescope.config import ModelConfig
from needlescope.errors import ConfigError
from needlescope.provenance.fingerprint import sampling_sent
from needlescope.providers.anthropic import AnthropicProvider
from needlescope.providers.base import CachePrefix, ChatRequest, Message
from needlescope.providers.caching import cache_marks, prompt_order
from needlescope.providers.openai import OpenAIProvider

SHARED = "The essay goes on. " * 400  # 7,600 characters: past 1,024 tokens by any estimate


def model(provider: str = "anthropic", **more: object) -> ModelConfig:
    base = {"name": "m", "provider": provider, "model": "claude-sonnet-4-5", "cache": "auto"}
    if provider == "openai":
        base |= {"base_url": "http://127.0.0.1:9/v1", "model": "gpt-4o"}
    return ModelConfig.model_validate(base | more)


def prompt(tail: str, system: str | None = None) -> tuple[Message, ...]:
    user = Message("user", SHARED + tail)
    return (Message("system", system), user) if system else (user,)


def test_a_run_of_neighbours_shares_the_prefix_that_saves_the_most() -> None:
    prompts = [prompt("needle A. Question?"), prompt("needle B. Question?"), prompt("x")]
    a, b, x = cache_marks(prompts, model(), batched=False)
    assert a is not None and b is not None and x is not None
    # One mark on the essay, read twice, saves more than a longer one read once by b alone.
    assert (a.message, a.chars, a.ttl) == (0, len(SHARED), "5m")
    assert a == b == x
    assert prompt_order(prompts) == [0, 1, 2]
    # Two pairs that share much more with each other than with the other pair: a mark per pair.
    long_a, long_b = "A" * 40_000, "B" * 40_000
    pairs = [prompt(long_a + "1"), prompt(long_b + "1"), prompt(long_a + "2"), prompt(long_b + "2")]
    marks = cache_marks(pairs, model(), batched=False)
    assert all(m is not None for m in marks)
    assert marks[0] == marks[2] and marks[1] == marks[3] and marks[0] != marks[1]
    assert marks[0] is not None and marks[0].chars == len(SHARED + long_a)


def test_a_staircase_of_prefixes_shares_few_marks_each_read_many_times() -> None:
    # The gkamradt grid: one needle at every depth of one text, so each prompt shares a longer
    # prefix with the next. A mark per prompt would have nearly every prompt pay the write.
    text = "".join(f"Sentence {i} of the essay. " for i in range(4000))
    needle = "The magic number is 7. "
    depths = [len(text) * d // 200 for d in range(100, 200)]
    prompts = [(Message("user", text[:at] + needle + text[at:] + "Q?"),) for at in depths]
    marks = cache_marks(prompts, model(), batched=True)
    assert all(m is not None for m in marks)
    keys = {m.key for m in marks if m}
    assert len(keys) <= 100 // 3  # each mark is read by two or more prompts
    written = sum(m.chars for m in {m.key: m for m in marks if m}.values())
    read = sum(m.chars for m in marks if m) - written
    uncached = sum(len(p[0].content) for p in prompts)
    # Priced as Anthropic's 1-hour cache: writes 2×, reads 0.1×, the rest 1×.
    cost = 2 * written + 0.1 * read + (uncached - written - read)
    assert cost < 0.75 * uncached
    for mark, at in zip(marks, depths, strict=True):
        assert mark is not None and mark.chars <= at  # never past the prompt's own needle


def test_a_batch_writes_the_hour_cache_only_where_enough_cells_read_it() -> None:
    two = [prompt("a"), prompt("b")]
    # 1-hour writes cost 2× the input: one reader at 0.1× does not pay it back; two do.
    assert cache_marks(two, model(), batched=True) == [None, None]
    three = cache_marks([*two, prompt("c")], model(), batched=True)
    assert all(m is not None and m.ttl == "1h" for m in three)
    # Two prompts share more with each other than with the third: the shorter prefix all three
    # share is the one that pays.
    pair_and_one = cache_marks([prompt("xa"), prompt("xb"), prompt("y")], model(), batched=True)
    assert {(m.chars, m.key) for m in pair_and_one if m} == {(len(SHARED), pair_and_one[2].key)}
    assert all(pair_and_one)
    # A 5-minute write (1.25×) pays with one reader.
    assert all(m is not None for m in cache_marks(two, model(), batched=False))
    # The price table rules: writes at 3× the input need more readers than reads at 0.1×.
    dear = model(price={"input_per_mtok": 1, "output_per_mtok": 1, "cache_write_per_mtok": 3})
    assert cache_marks(two, dear, batched=False) == [None, None]


def test_short_or_unshared_prefixes_are_not_marked() -> None:
    short = [(Message("user", "hello a"),), (Message("user", "hello b"),)]
    assert cache_marks(short, model(), batched=False) == [None, None]
    assert cache_marks([prompt("a"), (Message("user", "other"),)], model(), batched=False) == [
        None,
        None,
    ]
    # OpenAI charges no write: two cells are enough, even for its batch.
    assert all(cache_marks([prompt("a"), prompt("b")], model("openai"), batched=True))


def test_cache_auto_is_refused_where_nothing_is_marked() -> None:
    with pytest.raises((ValueError, ConfigError), match="cache: auto marks prompt prefixes"):
        ModelConfig.model_validate(
            {"name": "g", "provider": "gemini", "model": "gemini-2.5-flash", "cache": "auto"}
        )


def test_anthropic_ends_the_prefix_with_a_breakpoint() -> None:
    provider = AnthropicProvider(name="m", base_url="http://127.0.0.1:9", model="c", api_key="k")
    mark = CachePrefix(1, len(SHARED), "k1", "1h")
    body = provider.request_body(ChatRequest(prompt("tail", system="Be brief."), 10, cache=mark))
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": SHARED,
                    "cache_control": {"type": "ephemeral", "ttl": "1h"},
                },
                {"type": "text", "text": "tail"},
            ],
        }
    ]
    on_system = CachePrefix(0, 5, "k2")
    body = provider.request_body(ChatRequest(prompt("t", system="Be brief."), 10, cache=on_system))
    assert body["system"] == [
        {"type": "text", "text": "Be br", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "ief."},
    ]
    assert body["messages"][0]["content"] == SHARED + "t"


def test_openai_names_the_prefix_and_the_name_is_no_sampling_setting() -> None:
    provider = OpenAIProvider(name="m", base_url="http://127.0.0.1:9/v1", model="g", api_key="k")
    request = ChatRequest(prompt("t"), 10, cache=CachePrefix(0, 10, "prefix-key"))
    body = provider.request_body(request)
    assert body["prompt_cache_key"] == "prefix-key"
    plain = provider.request_body(ChatRequest(prompt("t"), 10))
    assert "prompt_cache_key" not in plain
    assert sampling_sent(body) == sampling_sent(plain)
