"""RULER's needle-in-a-haystack variants (scripts/data/synthetic/niah.py).

``num_needle_k`` keys are planted with ``num_needle_v`` values each; ``num_needle_q`` of them
are asked for and the rest are distractors. Needles go at depths drawn from RULER's 40 evenly
spaced depths, into a haystack of noise sentences, essay words or other needles (distractors
with other keys). Everything is drawn from the cell's seed, the needles apart from the
haystack, so a prompt is rebuilt from (seed, units) and the needles do not change with units.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from needlescope.probes.ruler.fit import (
    Fitted,
    LengthBudget,
    fit_units,
    fit_units_sync,
    prompt_budget,
    text_measure,
    text_measure_async,
)
from needlescope.probes.ruler.haystacks import (
    essay_text,
    grouped,
    insertion_points,
    interleave,
    split_sentences,
)
from needlescope.probes.ruler.prompt import RulerPrompt
from needlescope.probes.ruler.templates import (
    DEPTHS,
    NIAH_NEEDLE,
    NOISE,
    RULER_VERSION,
    singular,
    template,
)
from needlescope.probes.ruler.words import KINDS, Kind, distinct, random_value

HaystackKind = Literal["noise", "essay", "needle"]
HAYSTACK_KINDS: tuple[HaystackKind, ...] = ("noise", "essay", "needle")


@dataclass(frozen=True)
class NiahSpec:
    """A niah variant, in RULER's parameter names (its defaults are RULER's)."""

    type_haystack: HaystackKind = "essay"
    type_needle_k: Kind = "words"
    type_needle_v: Kind = "numbers"
    num_needle_k: int = 1
    num_needle_v: int = 1
    num_needle_q: int = 1

    def __post_init__(self) -> None:
        if self.type_haystack not in HAYSTACK_KINDS:
            raise ValueError(
                f"type_haystack must be one of {', '.join(HAYSTACK_KINDS)},"
                f" not {self.type_haystack!r}"
            )
        for name in ("type_needle_k", "type_needle_v"):
            if getattr(self, name) not in KINDS:
                raise ValueError(f"{name} must be one of {', '.join(KINDS)}")
        for name in ("num_needle_k", "num_needle_v", "num_needle_q"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.needle_count > len(DEPTHS):
            raise ValueError(
                f"{self.needle_count} needles (keys × values) but RULER has {len(DEPTHS)} depths"
            )

    @property
    def planted_keys(self) -> int:
        """RULER plants at least as many keys as it asks about."""
        return max(self.num_needle_k, self.num_needle_q)

    @property
    def needle_count(self) -> int:
        return self.planted_keys * self.num_needle_v


# RULER's synthetic.yaml, by name.
PRESETS: dict[str, NiahSpec] = {
    "niah_single_1": NiahSpec("noise", "words", "numbers"),
    "niah_single_2": NiahSpec("essay", "words", "numbers"),
    "niah_single_3": NiahSpec("essay", "words", "uuids"),
    "niah_multikey_1": NiahSpec("essay", "words", "numbers", num_needle_k=4),
    "niah_multikey_2": NiahSpec("needle", "words", "numbers"),
    "niah_multikey_3": NiahSpec("needle", "uuids", "uuids"),
    "niah_multivalue": NiahSpec("essay", "words", "numbers", num_needle_v=4),
    "niah_multiquery": NiahSpec("essay", "words", "numbers", num_needle_q=4),
}


def preset(name: str) -> NiahSpec:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"no niah preset {name!r}; known: {', '.join(PRESETS)}") from None


@dataclass(frozen=True)
class NiahNeedle:
    key: str
    value: str
    depth: int  # percent, one of DEPTHS
    asked: bool


@dataclass(frozen=True)
class NiahDraw:
    """A cell's needles, in context order, and the keys asked, in the question's order."""

    needles: tuple[NiahNeedle, ...]
    asked_keys: tuple[str, ...]
    expected: tuple[str, ...]  # the asked keys' values, key by key


def _rng(seed: int, stream: str) -> random.Random:
    return random.Random(f"{seed}/niah/{stream}")


def draw(spec: NiahSpec, seed: int) -> NiahDraw:
    """Keys and values (all distinct), their shuffled order and depths, the keys asked."""
    rng = _rng(seed, "needles")
    keys = distinct(lambda r: random_value(spec.type_needle_k, r), spec.planted_keys, rng)
    flat = distinct(lambda r: random_value(spec.type_needle_v, r), spec.needle_count, rng)
    values = [flat[i * spec.num_needle_v : (i + 1) * spec.num_needle_v] for i in range(len(keys))]
    order = [(k, v) for k in range(len(keys)) for v in range(spec.num_needle_v)]
    rng.shuffle(order)
    asked = rng.sample(range(len(keys)), spec.num_needle_q)
    depths = sorted(_rng(seed, "depths").sample(DEPTHS, len(order)))
    needles = tuple(
        NiahNeedle(keys[k], values[k][v], depth, k in asked)
        for (k, v), depth in zip(order, depths, strict=True)
    )
    expected = tuple(value for k in asked for value in values[k])
    return NiahDraw(needles, tuple(keys[k] for k in asked), expected)


def _needle_text(spec: NiahSpec, key: str, value: str) -> str:
    return NIAH_NEEDLE.format(type_needle_v=spec.type_needle_v, key=key, value=value)


def _distractor_needles(
    spec: NiahSpec, seed: int, count: int, taken: set[str]
) -> list[tuple[str, str]]:
    """The needle haystack: ``count`` needles whose keys are not the planted ones (a planted
    key drawn again is redrawn, so the question keeps one answer); the first n are the same
    whatever the count."""
    rng = _rng(seed, "haystack")
    found: list[tuple[str, str]] = []
    while len(found) < count:
        key = random_value(spec.type_needle_k, rng)
        value = random_value(spec.type_needle_v, rng)
        if key not in taken:
            found.append((key, value))
    return found


def build(
    spec: NiahSpec,
    seed: int,
    units: int,
    *,
    essay: str | None = None,
    version: str = RULER_VERSION,
) -> RulerPrompt:
    """The prompt around ``units`` haystack units: noise sentences, essay words or needles."""
    drawn = draw(spec, seed)
    needles = [_needle_text(spec, n.key, n.value) for n in drawn.needles]
    depths = [n.depth for n in drawn.needles]
    distractors = [n.value for n in drawn.needles if not n.asked]
    if spec.type_haystack == "essay":
        if essay is None:
            raise ValueError("niah's essay haystack needs a text")
        sentences = split_sentences(essay_text(essay, units))
        context = grouped(sentences, needles, insertion_points(len(sentences), depths))
    else:
        if spec.type_haystack == "noise":
            sentences = [NOISE] * units
        else:
            others = _distractor_needles(spec, seed, units, {n.key for n in drawn.needles})
            sentences = [_needle_text(spec, key, value) for key, value in others]
            distractors += [value for _, value in others]
        points = insertion_points(len(sentences), depths)
        context = "\n".join(interleave(sentences, needles, points))
    queries = drawn.asked_keys
    query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
    chosen = template("niah", version)
    text, prefix, type_needle_v = chosen.template, chosen.answer_prefix, str(spec.type_needle_v)
    if spec.num_needle_q * spec.num_needle_v == 1:
        text, prefix, type_needle_v = singular(text), singular(prefix), type_needle_v[:-1]
    return RulerPrompt(
        body=text.format(type_needle_v=type_needle_v, context=context, query=query),
        answer_prefix=prefix.format(type_needle_v=type_needle_v, query=query),
        context=context,
        expected=drawn.expected,
        units=units,
        distractors=tuple(dict.fromkeys(v for v in distractors if v not in drawn.expected)),
        facts={
            "needles": [
                {"key": n.key, "value": n.value, "depth": n.depth, "asked": n.asked}
                for n in drawn.needles
            ],
            "query": query,
            "sentences": len(sentences),
        },
    )


def fit_sync(
    spec: NiahSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], int],
    *,
    essay: str | None = None,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    """The longest prompt within ``target`` tokens (see ``fit.prompt_budget``)."""
    return fit_units_sync(
        lambda n: build(spec, seed, n, essay=essay, version=version),
        text_measure(count_tokens),
        prompt_budget(target, "niah", length_budget),
    )


async def fit(
    spec: NiahSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], Awaitable[int]],
    *,
    essay: str | None = None,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    return await fit_units(
        lambda n: build(spec, seed, n, essay=essay, version=version),
        text_measure_async(count_tokens),
        prompt_budget(target, "niah", length_budget),
    )
