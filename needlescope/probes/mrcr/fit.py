"""Fitting an MRCR conversation to a length in the model's tokens: the most filler pairs whose
conversation measures at most the target.

The search is written once, as a generator that proposes filler-pair counts and is sent their
measured lengths, so a plain counter (a tokenizer in a test) and an async one (a provider's
``count_prompt_tokens``) drive the same steps. A filler pair adds a request and a reply of at
least 100 words, so the length grows strictly with the count: interpolation finds it in a few
measurements, and every other step bisects so a bad guess never costs more than a halving.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass

from needlescope.errors import LengthError
from needlescope.probes.mrcr.conversation import Conversation, conversation
from needlescope.providers.base import Message

Count = Callable[[tuple[Message, ...]], int]
Measure = Callable[[tuple[Message, ...]], Awaitable[int]]


def content_tokens(count: Callable[[str], int]) -> Count:
    """OpenAI MRCR's length: the sum of each message's content tokens (no chat template)."""

    def measure(messages: Sequence[Message]) -> int:
        return sum(count(m.content) for m in messages)

    return measure


# OpenAI MRCR reports by bins of prompt tokens that double: 4,096 to 8,192, …, 524,288 to
# 1,048,576. ``length_bin`` continues them below 4,096 for small local models; a count that is
# exactly a power of two opens its bin (the published bins leave that edge unsaid).
OPENAI_BINS = tuple((2**k, 2 ** (k + 1)) for k in range(12, 20))


def length_bin(tokens: int) -> tuple[int, int]:
    """The doubling bin [low, 2 × low) that holds a length in tokens (from [1, 2))."""
    if tokens < 1:
        raise ValueError(f"a length in tokens must be positive, got {tokens}")
    low = 1 << (tokens.bit_length() - 1)
    return low, 2 * low


@dataclass(frozen=True)
class Fitted:
    """A conversation within the target: measured <= target < the length with one pair more."""

    conversation: Conversation
    filler_pairs: int
    measured: int
    calls: int


_Search = Generator[int, int, tuple[int, int]]


def _search(target: int) -> _Search:
    """Yields filler-pair counts, is sent each one's length; returns (count, length)."""
    base = yield 0
    if base > target:
        raise LengthError(f"the repeats and the question alone are {base} tokens, over {target}")
    low, low_value = 0, base
    high: tuple[int, int] | None = None
    step = 0
    while high is None or high[0] - low > 1:
        step += 1
        if high is None:
            # Until a count overshoots: extrapolate from the pairs seen (a first guess: as long
            # as the repeats' pairs), aiming a little past the target so it is bracketed soon.
            per_pair = (low_value - base) / low if low else max(1.0, base / 2)
            n = low + max(1, int((target - low_value) / per_pair) + 1)
        elif step % 2:
            n = (low + high[0]) // 2
        else:
            per_pair = (high[1] - low_value) / (high[0] - low)
            guess = low + int((target - low_value) / per_pair)
            n = min(high[0] - 1, max(low + 1, guess))
        value = yield n
        if value <= target:
            low, low_value = n, value
        else:
            high = (n, value)
    return low, low_value


def fit_conversation(
    seed: int | str, needles: int, count: Count, target: int, *, ask: int | None = None
) -> Fitted:
    """The conversation of the most filler pairs within ``target`` units of ``count``."""
    search = _search(target)
    calls = 0
    n = next(search)
    try:
        while True:
            calls += 1
            n = search.send(count(conversation(seed, needles, n, ask=ask).messages))
    except StopIteration as done:
        pairs, measured = done.value
    # Rebuilt rather than kept: a long conversation is megabytes, and building is cheap.
    return Fitted(conversation(seed, needles, pairs, ask=ask), pairs, measured, calls)


async def afit_conversation(
    seed: int | str, needles: int, measure: Measure, target: int, *, ask: int | None = None
) -> Fitted:
    """``fit_conversation`` with an async measure (a provider counting the prompt as sent)."""
    search = _search(target)
    calls = 0
    n = next(search)
    try:
        while True:
            calls += 1
            n = search.send(await measure(conversation(seed, needles, n, ask=ask).messages))
    except StopIteration as done:
        pairs, measured = done.value
    return Fitted(conversation(seed, needles, pairs, ask=ask), pairs, measured, calls)
