"""What RULER's three probes (``niah``, ``variable_tracking``, ``aggregation``) share as
needlescope probes: their cells, how the answer prefix is sent, building and grading.

A RULER cell is sized by whole haystack units (noise sentences, essay words, list words),
fitted as RULER fits them (``fit``), so ``build`` sizes it itself (``FITS_FILLER`` is False)
and the cells table's ``filler_chars`` holds those units: a prompt is rebuilt from its cell
row (its seed, parameters and units, and vt's worked example's units in ``facts``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

from needlescope.config import ModelConfig, SweepConfig
from needlescope.grid import Cell, model_fields
from needlescope.probes.base import BuildTools, Context, Grade, NeedleResult, Rendered
from needlescope.probes.build import measure_rendered
from needlescope.probes.ruler.entry import RulerProbeBase
from needlescope.probes.ruler.fit import Fitted
from needlescope.probes.ruler.prompt import AnswerPrefixMode, RulerPrompt, prompt_messages
from needlescope.probes.ruler.scoring import match_all
from needlescope.probes.ruler.templates import TOKENS_TO_GENERATE, Family
from needlescope.provenance import canonical_json

# Providers whose chat API continues a trailing assistant message: Anthropic's Messages API,
# and llama.cpp's server (it prefills a trailing assistant turn since ggml-org/llama.cpp#13174,
# unless started with --no-prefill-assistant). Neither does while the model reasons first.
PREFILL_PROVIDERS = frozenset({"anthropic", "local"})
RULER_OUTCOMES = "ruler_outcomes"  # the per-string outcomes table
FILLER_KIND = "ruler"  # the filler_spec kind of a haystack RULER's own code makes
PLACEMENT = "ruler"


def answer_prefix_mode(setting: str, model: ModelConfig) -> AnswerPrefixMode:
    """``auto``: a prefill where the model's provider continues one, else ``append``."""
    if setting == "prefill":
        return "prefill"
    if setting == "append":
        return "append"
    return "prefill" if model.provider in PREFILL_PROVIDERS and not model.thinks else "append"


def own_haystack(name: str) -> tuple[str, str]:
    """(filler, filler_spec) of a haystack RULER's code makes (noise, needles, lists)."""
    return name, canonical_json({"kind": FILLER_KIND, "haystack": name, "version": 1})


def ruler_cells(
    config: SweepConfig,
    probe: RulerProbeBase,
    name: str,
    variants: Sequence[tuple[dict[str, Any], int, tuple[str, str]]],
) -> Iterator[Cell]:
    """The grid: models × variants (params, needle count, (filler, filler_spec)) × lengths ×
    prompts × repeats. A cell's params hold every parameter and the answer prefix's mode."""
    for model in config.tested_models():
        mode = answer_prefix_mode(probe.answer_prefix, model)
        for params, needles, (filler, filler_spec) in variants:
            full = {**params, "length_budget": probe.length_budget, "answer_prefix_mode": mode}
            for length in probe.lengths:
                for prompt in probe.prompts:
                    for repeat in range(probe.repeats):
                        yield Cell(
                            **model_fields(model),
                            probe=name,
                            probe_params=canonical_json(full),
                            filler=filler,
                            filler_spec=filler_spec,
                            placement=PLACEMENT,
                            region="whole",
                            prompt_version=prompt,
                            length=length,
                            length_unit="tokens",
                            needle_count=needles,
                            repeat=repeat,
                            seed=config.seed,
                        )


def mode_of(cell: Cell) -> AnswerPrefixMode:
    return "prefill" if cell.params().get("answer_prefix_mode") == "prefill" else "append"


def planted_at(prompt: RulerPrompt) -> tuple[int, ...]:
    """Where each expected string was planted in the haystack (niah's values, vt's names):
    the drill-down shows the text around it. Empty when one is not there as planted."""
    offsets = tuple(prompt.context.find(text) for text in prompt.expected)
    return () if any(offset < 0 for offset in offsets) else offsets


def rendered(
    cell: Cell,
    prompt: RulerPrompt,
    facts: Mapping[str, Any] | None = None,
    *,
    located: bool = False,
) -> Rendered:
    """The prompt as sent: RULER's input (``body`` + answer prefix) is the prompt's text; the
    messages carry the prefix as the cell's mode says. ``located``: the expected strings were
    planted once each (niah, vt), so their offsets are kept (cwe's words are everywhere)."""
    mode = mode_of(cell)
    messages = prompt_messages(prompt, mode)
    offsets = planted_at(prompt) if located else ()
    size = max(len(prompt.context), 1)
    return Rendered(
        prompt_text=prompt.text,
        haystack_text=prompt.context,
        expected=list(prompt.expected),
        fractions=tuple(offset / size for offset in offsets),
        offsets=offsets,
        facts={
            **prompt.facts,
            **(facts or {}),
            "units": prompt.units,
            "answer_prefix_mode": mode,
            "answer_prefix": prompt.answer_prefix,
            "distractors": list(prompt.distractors),
        },
        messages=messages if mode == "prefill" else (),
    )


def family_budget(family: Family, cell: Cell, max_tokens: int | None) -> int:
    """RULER's ``tokens_to_generate``, unless the model's answer budget is configured."""
    return max_tokens if max_tokens is not None else TOKENS_TO_GENERATE[family]


CountTokens = Callable[[str], Awaitable[int]]


async def build_fitted(
    cell: Cell,
    tools: BuildTools,
    fit: Callable[[CountTokens], Awaitable[Fitted[RulerPrompt]]],
    budget: int,
    render: Callable[[Cell, RulerPrompt], Rendered] = rendered,
) -> Context:
    """Fit as RULER does (its input's own tokens, no chat template), then measure the prompt
    as sent: ``prompt_length`` is the whole prompt's, chat template included. ``render``: the
    family's own (the one its ``rebuild`` uses)."""
    count = tools.measure_haystack or tools.measure
    fitted = await fit(count)
    built = render(cell, fitted.prompt)
    length = await measure_rendered(built, tools.measure, tools.measure_messages)
    return Context(cell, built, fitted.units, length, budget)


def _number(text: str) -> int | None:
    return int(text) if text.isdecimal() and len(text) <= 18 else None


def without_prefill(response: str, facts: Mapping[str, Any]) -> tuple[str, bool]:
    """The model's own continuation: llama.cpp's server returns a prefilled turn whole (the
    prefill, then what the model added), Anthropic's only what the model added. RULER grades
    the continuation alone: the prefix holds words of the question (niah's keys, vt's value,
    and cwe's "list", "words", "top" could be common words)."""
    prefix = str(facts.get("answer_prefix") or "").strip()
    if facts.get("answer_prefix_mode") != "prefill" or not prefix:
        return response, False
    stripped = response.lstrip()
    if stripped.startswith(prefix):
        return stripped[len(prefix) :], True
    return response, False


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    """RULER's ``string_match_all``: the share of expected strings in the answer × 100. Per
    expected string, found or not (``needle_outcomes`` and ``ruler_outcomes``); the planted
    distractors the answer holds are ``ruler_outcomes`` rows of role ``distractor``."""
    strings = [str(e) for e in expected] if isinstance(expected, list | tuple) else []
    if not strings:
        return Grade(parse_ok=False, parse_error="no expected strings to look for", accuracy=None)
    planted = facts.get("distractors")
    distractors = [str(d) for d in planted] if isinstance(planted, list) else []
    answer, echoed = without_prefill(response, facts)
    match = match_all(answer, strings, distractors)
    found = sum(match.found)
    rows = [
        {"role": "expected", "string_index": i + 1, "text": text, "found": hit}
        for i, (text, hit) in enumerate(zip(strings, match.found, strict=True))
    ]
    rows += [
        {"role": "distractor", "string_index": i + 1, "text": text, "found": True}
        for i, text in enumerate(match.distractors_found)
    ]
    return Grade(
        parse_ok=True,
        parse_error=None,
        accuracy=match.accuracy,
        figures={
            "correct": found,
            "missing": len(strings) - found,
            "wrong": len(match.distractors_found),
        },
        detail={
            "found": list(match.found),
            "distractors_found": list(match.distractors_found),
            **({"prefill_echoed": True} if echoed else {}),
        },
        needles=tuple(
            NeedleResult(i + 1, _number(text), hit, "correct" if hit else "missing")
            for i, (text, hit) in enumerate(zip(strings, match.found, strict=True))
        ),
        tables={RULER_OUTCOMES: tuple(rows)},
    )
