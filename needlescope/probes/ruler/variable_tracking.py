"""RULER's variable tracking, ``vt`` (scripts/data/synthetic/variable_tracking.py).

``num_chains`` chains of ``num_hops`` hops: ``VAR ABCDE = 12345``, then ``VAR FGHIJ = VAR
ABCDE `` and so on, each chain's statements spread in order through a noise haystack; the
question gives the first chain's value and asks for every variable holding it. As RULER
does, the question follows one worked example (``fewshot``): a chain of 3-letter names in its
own noise, fitted to 500 tokens, with its answer.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

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
from needlescope.probes.ruler.templates import NOISE, RULER_VERSION, template
from needlescope.probes.ruler.words import distinct, variable_name

FEWSHOT_TOKENS = 500  # RULER fits its worked example to 500 tokens
_FEWSHOT_MAX_HOPS = 10
_NAME_LETTERS = 5
_FEWSHOT_NAME_LETTERS = 3


@dataclass(frozen=True)
class VtSpec:
    num_chains: int = 1
    num_hops: int = 4
    fewshot: bool = True

    def __post_init__(self) -> None:
        if self.num_chains < 1 or self.num_hops < 1:
            raise ValueError("num_chains and num_hops must be at least 1")


@dataclass(frozen=True)
class Chains:
    names: tuple[tuple[str, ...], ...]  # per chain: the value's variable, then each hop's
    values: tuple[int, ...]

    def statements(self, chain: int) -> list[str]:
        names = self.names[chain]
        first = [f"VAR {names[0]} = {self.values[chain]}"]
        # RULER's hop statements end with a space.
        return first + [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(len(names) - 1)]


def draw_chains(
    num_chains: int, num_hops: int, rng: random.Random, letters: int = _NAME_LETTERS
) -> Chains:
    """Names all distinct (RULER lets a repeat through), values 10000–99999."""
    size = num_hops + 1
    flat = distinct(lambda r: variable_name(r, letters), num_chains * size, rng)
    names = tuple(tuple(flat[c * size : (c + 1) * size]) for c in range(num_chains))
    return Chains(names, tuple(rng.randint(10000, 99999) for _ in range(num_chains)))


def _text(chains: Chains, noises: int, rng: random.Random, version: str) -> tuple[str, str, str]:
    """(context, body, answer prefix): each chain's statements at sorted random places."""
    sentences = [NOISE] * noises
    for chain in range(len(chains.names)):
        statements = chains.statements(chain)
        positions = sorted(rng.sample(range(len(sentences)), len(statements)))
        for j, position in enumerate(positions):
            sentences.insert(position + j, statements[j])
    context = "\n".join(sentences).replace(". \n", ".\n")
    chosen = template("variable_tracking", version)
    fields = {"context": context, "query": chains.values[0], "num_v": len(chains.names[0])}
    return context, chosen.template.format(**fields), chosen.answer_prefix.format(**fields)


def _rng(seed: int, stream: str) -> random.Random:
    return random.Random(f"{seed}/vt/{stream}")


def minimum_units(spec: VtSpec, fewshot: bool = False) -> int:
    """Noise sentences needed to spread the first chain over distinct places."""
    hops = min(_FEWSHOT_MAX_HOPS, spec.num_hops) if fewshot else spec.num_hops
    return hops + 1


def build_fewshot(spec: VtSpec, seed: int, units: int, version: str = RULER_VERSION) -> RulerPrompt:
    """RULER's worked example around ``units`` noise sentences; its ``text`` is what is fitted."""
    chains = draw_chains(
        spec.num_chains,
        min(_FEWSHOT_MAX_HOPS, spec.num_hops),
        _rng(seed, "fewshot"),
        _FEWSHOT_NAME_LETTERS,
    )
    context, body, prefix = _text(chains, units, _rng(seed, "fewshot-positions"), version)
    return RulerPrompt(body, prefix, context, chains.names[0], units)


def build(
    spec: VtSpec,
    seed: int,
    units: int,
    *,
    fewshot_units: int | None = None,
    version: str = RULER_VERSION,
) -> RulerPrompt:
    """The prompt around ``units`` noise sentences (and, with ``fewshot``, the worked example
    around ``fewshot_units``)."""
    chains = draw_chains(spec.num_chains, spec.num_hops, _rng(seed, "chains"))
    context, body, prefix = _text(chains, units, _rng(seed, "positions"), version)
    facts: dict[str, object] = {
        "chains": [list(names) for names in chains.names],
        "values": list(chains.values),
    }
    if spec.fewshot:
        if fewshot_units is None:
            raise ValueError("vt with its worked example needs the example's fewshot_units")
        example = build_fewshot(spec, seed, fewshot_units, version)
        # RULER: the example, a space, its answer and a newline, then a newline and the task.
        body = f"{example.text} {' '.join(example.expected)}\n\n{body}"
        facts["fewshot_units"] = fewshot_units
    return RulerPrompt(
        body=body,
        answer_prefix=prefix,
        context=context,
        expected=chains.names[0],
        units=units,
        distractors=tuple(name for names in chains.names[1:] for name in names),
        facts=facts,
    )


def fit_sync(
    spec: VtSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], int],
    *,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    measure = text_measure(count_tokens)
    fewshot_units = None
    if spec.fewshot:
        fewshot_units = fit_units_sync(
            lambda n: build_fewshot(spec, seed, n, version),
            measure,
            FEWSHOT_TOKENS,
            minimum=minimum_units(spec, fewshot=True),
        ).units
    return fit_units_sync(
        lambda n: build(spec, seed, n, fewshot_units=fewshot_units, version=version),
        measure,
        prompt_budget(target, "variable_tracking", length_budget),
        minimum=minimum_units(spec),
    )


async def fit(
    spec: VtSpec,
    seed: int,
    target: int,
    count_tokens: Callable[[str], Awaitable[int]],
    *,
    length_budget: LengthBudget = "ruler",
    version: str = RULER_VERSION,
) -> Fitted[RulerPrompt]:
    measure = text_measure_async(count_tokens)
    fewshot_units = None
    if spec.fewshot:
        fewshot_units = (
            await fit_units(
                lambda n: build_fewshot(spec, seed, n, version),
                measure,
                FEWSHOT_TOKENS,
                minimum=minimum_units(spec, fewshot=True),
            )
        ).units
    return await fit_units(
        lambda n: build(spec, seed, n, fewshot_units=fewshot_units, version=version),
        measure,
        prompt_budget(target, "variable_tracking", length_budget),
        minimum=minimum_units(spec),
    )
