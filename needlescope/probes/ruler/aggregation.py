"""RULER's aggregation tasks: common words (``cwe``) and frequent coded words (``fwe``).

cwe (scripts/data/synthetic/common_words_extraction.py): a numbered list in which ``num_cw``
words appear ``freq_cw`` times and the others ``freq_ucw`` times (6 and 1 for a length under
4,096 tokens), shuffled, after RULER's worked example(s) of the same task; the answer is the
common words. fwe (freq_words_extraction.py): words of a vocabulary of random coded words
(the first replaced by ``...``, noise) repeated by a Zipf law of exponent ``alpha``; the
answer is the vocabulary's ranks 2–4. The unit fitted is the list's distinct words (cwe) or
its Zipf size (fwe).
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from needlescope.errors import LengthError
from needlescope.probes.ruler.fit import (
    Fitted,
    LengthBudget,
    fit_units,
    fit_units_sync,
    prompt_budget,
    text_measure,
    text_measure_async,
)
from needlescope.probes.ruler.prompt import RulerPrompt
from needlescope.probes.ruler.templates import RULER_VERSION, template
from needlescope.probes.ruler.words import coded_word, common_vocabulary, distinct

SHORT_LENGTH = 4096  # under it, cwe's frequencies become 6 and 1 and its example shrinks

# ------------------------------------------------------------------------------------ cwe


@dataclass(frozen=True)
class CweSpec:
    num_cw: int = 10
    freq_cw: int = 30
    freq_ucw: int = 3
    num_fewshot: int = 1

    def __post_init__(self) -> None:
        if self.num_cw < 1 or self.freq_cw < 1 or self.freq_ucw < 1 or self.num_fewshot < 0:
            raise ValueError("cwe's num_cw, freq_cw and freq_ucw must be at least 1")


@dataclass(frozen=True)
class _Shape:
    """One list's make-up: distinct words, and how often the common and the others appear."""

    words: int
    common_repeats: int
    uncommon_repeats: int
    common: int


def _shapes(spec: CweSpec, target: int, words: int) -> tuple[_Shape, _Shape]:
    """(example list, task list), as RULER sizes them for a cell of ``target`` tokens."""
    if target < SHORT_LENGTH:
        return _Shape(20, 3, 1, spec.num_cw), _Shape(words, 6, 1, spec.num_cw)
    return _Shape(40, 10, 3, spec.num_cw), _Shape(words, spec.freq_cw, spec.freq_ucw, spec.num_cw)


def _numbered(words: Sequence[str]) -> str:
    return " ".join(f"{i + 1}. {word}" for i, word in enumerate(words))


def _word_list(shape: _Shape, rng: random.Random) -> tuple[str, list[str]]:
    """(numbered list, common words): a random subset of the vocabulary, its first ``common``
    repeated ``common_repeats`` times and the rest ``uncommon_repeats`` times, shuffled."""
    vocabulary = common_vocabulary()
    if shape.words > len(vocabulary):
        raise LengthError(
            f"cwe's vocabulary holds {len(vocabulary):,} words; {shape.words:,} were asked for"
        )
    chosen = list(vocabulary)
    rng.shuffle(chosen)
    chosen = chosen[: shape.words]
    common, uncommon = chosen[: shape.common], chosen[shape.common :]
    entries = common * shape.common_repeats + uncommon * shape.uncommon_repeats
    rng.shuffle(entries)
    return _numbered(entries), common


def build_cwe(
    spec: CweSpec, seed: int, units: int, target: int, *, version: str = RULER_VERSION
) -> RulerPrompt:
    """The prompt with ``units`` distinct words in its list, for a cell of ``target`` tokens
    (which sets the frequencies). Each example is the template, its prefix, a space and its
    numbered answer; examples and the task are a newline apart."""
    example_shape, shape = _shapes(spec, target, units)
    chosen = template("cwe", version)
    examples = []
    for i in range(spec.num_fewshot):
        listed, common = _word_list(example_shape, random.Random(f"{seed}/cwe/fewshot/{i}"))
        text = chosen.template.format(context=listed, query="") + chosen.answer_prefix
        examples.append(f"{text} {_numbered(common)}")
    context, common = _word_list(shape, random.Random(f"{seed}/cwe/list"))
    # RULER joins the examples and the task with a newline even when there is no example.
    body = "\n".join(examples) + "\n" + chosen.template.format(context=context, query="")
    return RulerPrompt(
        body=body,
        answer_prefix=chosen.answer_prefix,
        context=context,
        expected=tuple(common),
        units=units,
        facts={
            "common_repeats": shape.common_repeats,
            "uncommon_repeats": shape.uncommon_repeats,
            "target": target,
        },
    )


def fit_cwe_sync(
    spec: CweSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], int],
    *,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    fitted = fit_units_sync(
        lambda n: build_cwe(spec, seed, n, target, version=version),
        text_measure(count_tokens),
        prompt_budget(target, "cwe", length_budget),
        minimum=spec.num_cw,
        limit=len(common_vocabulary()),
    )
    return _within_vocabulary(fitted, target)


async def fit_cwe(
    spec: CweSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], Awaitable[int]],
    *,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    fitted = await fit_units(
        lambda n: build_cwe(spec, seed, n, target, version=version),
        text_measure_async(count_tokens),
        prompt_budget(target, "cwe", length_budget),
        minimum=spec.num_cw,
        limit=len(common_vocabulary()),
    )
    return _within_vocabulary(fitted, target)


def _within_vocabulary(fitted: Fitted[RulerPrompt], target: int) -> Fitted[RulerPrompt]:
    # RULER then draws from a larger English list it ships; we have no such list.
    if fitted.at_limit:
        raise LengthError(
            f"cwe's {fitted.units:,}-word vocabulary fills only {fitted.measured:,} tokens,"
            f" short of a {target:,}-token cell"
        )
    return fitted


# ------------------------------------------------------------------------------------ fwe


@dataclass(frozen=True)
class FweSpec:
    alpha: float = 2.0
    vocab_size: int = 2000
    coded_wordlen: int = 6

    def __post_init__(self) -> None:
        if not self.alpha > 1:
            raise ValueError(f"fwe's alpha must be above 1 (a Zipf law), not {self.alpha}")
        if self.vocab_size < 4:
            raise ValueError("fwe's vocabulary needs at least 4 words (noise and the answer)")
        if self.coded_wordlen < 3:
            raise ValueError("fwe's coded words need at least 3 letters")


def zeta(s: float) -> float:
    """Riemann's zeta for s > 1 (Euler–Maclaurin after 20 terms: within a few ulps)."""
    if not s > 1:
        raise ValueError(f"zeta diverges at s = {s}")
    n = 20
    total = math.fsum(k**-s for k in range(1, n))
    total += n ** (1 - s) / (s - 1) + n**-s / 2
    # Bernoulli numbers B2, B4, B6, B8, B10 over (2j)!
    rising, power = s, n ** (-s - 1)
    for j, coefficient in enumerate((1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160)):
        total += coefficient * rising * power
        rising *= (s + 2 * j + 1) * (s + 2 * j + 2)
        power /= n * n
    return total


def zipf_counts(words: int, vocab_size: int, alpha: float) -> list[int]:
    """RULER's count for each rank k: int(words × k^-alpha / zeta(alpha))."""
    scale = words / zeta(alpha)
    return [int(scale * k**-alpha) for k in range(1, vocab_size + 1)]


def draw_vocabulary(spec: FweSpec, seed: int) -> list[str]:
    """Distinct coded words in random order, the first replaced by ``...`` (RULER's noise)."""
    rng = random.Random(f"{seed}/fwe/vocabulary")
    vocabulary = distinct(lambda r: coded_word(r, spec.coded_wordlen), spec.vocab_size, rng)
    vocabulary[0] = "..."
    return vocabulary


def build_fwe(spec: FweSpec, seed: int, units: int, *, version: str = RULER_VERSION) -> RulerPrompt:
    """The prompt whose coded text has the Zipf counts of ``units`` words."""
    vocabulary = draw_vocabulary(spec, seed)
    counts = zipf_counts(units, len(vocabulary), spec.alpha)
    text = [word for word, count in zip(vocabulary, counts, strict=True) for _ in range(count)]
    random.Random(f"{seed}/fwe/order").shuffle(text)
    context = " ".join(text)
    chosen = template("fwe", version)
    return RulerPrompt(
        body=chosen.template.format(context=context, query=""),
        answer_prefix=chosen.answer_prefix,
        context=context,
        expected=tuple(vocabulary[1:4]),
        units=units,
        facts={"counts": counts[:4], "words": len(text)},
    )


def fit_fwe_sync(
    spec: FweSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], int],
    *,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    return fit_units_sync(
        lambda n: build_fwe(spec, seed, n, version=version),
        text_measure(count_tokens),
        prompt_budget(target, "fwe", length_budget),
    )


async def fit_fwe(
    spec: FweSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], Awaitable[int]],
    *,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    return await fit_units(
        lambda n: build_fwe(spec, seed, n, version=version),
        text_measure_async(count_tokens),
        prompt_budget(target, "fwe", length_budget),
    )
