"""The mrcr probe: an MRCR conversation per cell, sent as real user / assistant messages.

The conversation is sized by its number of filler request/reply pairs, not by filler text:
``build`` fits that count to the cell's length (fit.py) and stores it as the cell's
``filler_chars``, so ``render`` at that count rebuilds the very messages sent. Every draw
comes from the cell's model-free seed (``Cell.rng_seed``): all models get the same
conversation.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from needlescope.config import SweepConfig
from needlescope.grid import Cell, model_fields
from needlescope.haystack import PROSE_VERSION, Filler
from needlescope.probes.base import (
    BuildTools,
    Context,
    Grade,
    Rendered,
    figures_as_detail,
    grade_each,
    joined,
    render_again,
)
from needlescope.probes.mrcr.conversation import GENERATOR_VERSION, conversation
from needlescope.probes.mrcr.entry import MrcrProbe
from needlescope.probes.mrcr.fit import afit_conversation
from needlescope.probes.mrcr.score import grade as grade_mrcr
from needlescope.provenance import canonical_json
from needlescope.providers.base import Message

NAME = "mrcr"
FITS_FILLER = False
FILLER = "mrcr-pieces"
FILLER_SPEC = canonical_json(
    {"kind": FILLER, "generator": GENERATOR_VERSION, "prose": PROSE_VERSION}
)
PROMPT_VERSION = "mrcr-openai"  # the final question, in OpenAI MRCR's words
PLACEMENT = "random"
REGION = "whole"


def expand(config: SweepConfig, probe: MrcrProbe) -> Iterator[Cell]:
    axes = itertools.product(
        config.tested_models(), probe.lengths, probe.needles, range(probe.repeats)
    )
    for model, length, needles, repeat in axes:
        yield Cell(
            **model_fields(model),
            probe=NAME,
            probe_params=canonical_json({"answer_tokens": probe.answer_tokens}),
            filler=FILLER,
            filler_spec=FILLER_SPEC,
            placement=PLACEMENT,
            region=REGION,
            prompt_version=PROMPT_VERSION,
            length=length,
            length_unit=probe.length_unit,
            needle_count=needles,
            repeat=repeat,
            seed=config.seed,
        )


def render(cell: Cell, filler: Filler | None, filler_kind: str, filler_chars: int) -> Rendered:
    """The conversation of ``filler_chars`` filler pairs (the count ``build`` fitted)."""
    talk = conversation(cell.rng_seed, cell.needle_count, filler_chars)
    before = talk.messages[:-1]
    haystack = joined(before)
    # Where each repeated reply starts in the conversation's text (its pair's assistant turn).
    starts = list(itertools.accumulate((len(m.content) + 2 for m in before), initial=0))
    offsets = tuple(starts[2 * pair + 1] for pair in talk.needle_pairs)
    return Rendered(
        prompt_text=joined(talk.messages),
        haystack_text=haystack,
        expected=talk.expected(),
        fractions=talk.fractions,
        offsets=offsets,
        facts={
            "form": talk.form,
            "topic": talk.topic,
            "ask": talk.ask,
            "filler_pairs": filler_chars,
            "pairs": talk.pairs,
            "needle_pairs": list(talk.needle_pairs),
        },
        messages=talk.messages,
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    if max_tokens is not None:
        return max_tokens
    return int(cell.params()["answer_tokens"])


async def build(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
    """The most filler pairs whose conversation, as sent, is at most the cell's length."""
    measure_messages = tools.measure_messages
    if measure_messages is None:

        async def by_contents(messages: tuple[Message, ...]) -> int:
            return sum([await tools.measure(m.content) for m in messages])

        measure_messages = by_contents
    fitted = await afit_conversation(
        cell.rng_seed, cell.needle_count, measure_messages, cell.length
    )
    rendered = render(cell, filler, filler_kind, fitted.filler_pairs)
    budget = answer_budget(cell, tools.max_tokens)
    return Context(cell, rendered, fitted.filler_pairs, fitted.measured, budget)


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    """OpenAI's rule (score.py); the nonce hit and the occurrence reproduced go in ``detail``,
    the answers' per-probe column (the answers table has no columns of their own)."""
    return figures_as_detail(grade_mrcr(expected, facts, response))


grade_batch = grade_each(grade)
rebuild = render_again(render)
