"""The cases probe: U-NIAH needle cases (needles, a question, a true answer) at depth percents.

The first needle goes at the cell's depth percent, the others evenly between it and the end,
each at the nearest sentence boundary; a case travels in the cell's ``probe_params``. Keyword
recall, the deterministic grade: a needle's recall is the share of its keywords found in the
reply, *recalled* at one half or more; accuracy is the mean over the needles × 100. The LLM
judge (grading/_judge.py) grades the same answer separately; U-NIAH's own terms are in
uniah.py.

Design: docs/design/probes.md#cases
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from needlescope.config import SweepConfig
from needlescope.grading.keywords import RECALLED_SHARE, needle_recall
from needlescope.grid import Cell, filler_identity, model_fields
from needlescope.haystack import Filler, Inserted, insert_needles, last_sentence_end
from needlescope.probes.base import Grade, NeedleResult, Rendered, grade_each, joined, render_again
from needlescope.probes.build import default_build
from needlescope.probes.cases import uniah
from needlescope.probes.cases.case_file import Case, load_cases
from needlescope.probes.cases.distractors import (
    Distractors,
    distractor_hit,
    load_distractors,
    place,
)
from needlescope.probes.cases.entry import CasesProbe
from needlescope.probes.templates import CASES_TEMPLATES, UNIAH
from needlescope.provenance import canonical_json

NAME = "cases"
FITS_FILLER = True
PLACEMENT = "depth"
REGION = "whole"
GRADER = "keywords-v1"  # the keyword-recall rule above; bump it when the rule changes
SIGMOID_STEEPNESS = 0.1  # the original needle test's logistic: 100 / (1 + e^(-0.1 (x - 50)))

Spacing = Literal["linear", "sigmoid"]


def prompt_version(language: str) -> str:
    return f"cases-{language}-v1"


# --- depths -----------------------------------------------------------------------------------


def depth_percents(count: int, spacing: Spacing = "linear") -> list[float]:
    """``count`` depth percents from 0 to 100 (one: 50), evenly or denser at both ends."""
    if count < 1:
        raise ValueError(f"depth count must be positive, got {count}")
    if count == 1:
        return [50.0]
    linear = [100 * i / (count - 1) for i in range(count)]
    if spacing == "linear":
        return [round(x, 3) for x in linear]
    if spacing == "sigmoid":
        return [x if x in (0, 100) else round(_logistic(x), 3) for x in linear]
    raise ValueError(f"depth spacing must be linear or sigmoid, got {spacing!r}")


def _logistic(x: float) -> float:
    return 100 / (1 + math.exp(-SIGMOID_STEEPNESS * (x - 50)))


def needle_depths(first: float, count: int) -> list[float]:
    """The first needle at ``first`` percent, the others evenly spaced after it, before 100."""
    step = (100 - first) / count
    return [first + i * step for i in range(count)]


def probe_depths(probe: CasesProbe) -> list[float]:
    if probe.depths is not None:
        return list(dict.fromkeys(float(d) for d in probe.depths))
    return list(dict.fromkeys(depth_percents(probe.depth_count, probe.depth_spacing)))


# --- grid, prompt, grade ----------------------------------------------------------------------


def budget_params(probe: CasesProbe) -> dict[str, Any]:
    """The length budget's settings, when not the default: older cells keep their ids."""
    if probe.length_budget == "prompt":
        return {}
    return {
        "length_budget": probe.length_budget,
        "final_context_length_buffer": probe.final_context_length_buffer,
    }


def prompts_for(probe: CasesProbe, case: Case) -> list[str]:
    """The probe's prompts; by default needlescope's own in the case's language."""
    return list(probe.prompts) if probe.prompts else [prompt_version(case.language)]


def expand(config: SweepConfig, probe: CasesProbe) -> Iterator[Cell]:
    cases = load_cases(probe.cases_file, probe.cases)
    axes = itertools.product(
        config.tested_models(),
        cases.values(),
        probe.lengths,
        probe_depths(probe),
        probe.fillers,
        range(probe.repeats),
    )
    budget = budget_params(probe)
    # A case's distractors join its cells' params: a case without any keeps its cell ids.
    distractors = load_distractors(probe.cases_file)
    for model, case, length, depth, filler, repeat in axes:
        near_misses = distractors[case.name].content() if case.name in distractors else {}
        params = canonical_json({**case.params(probe.answer_buffer), **budget, **near_misses})
        for prompt in prompts_for(probe, case):
            yield Cell(
                **model_fields(model),
                probe=NAME,
                probe_params=params,
                filler=filler,
                filler_spec=filler_identity(config.filler_spec(filler)),
                placement=PLACEMENT,
                region=REGION,
                prompt_version=prompt,
                length=length,
                length_unit=probe.length_unit,
                needle_count=len(case.needles),
                repeat=repeat,
                seed=config.seed,
                depth=depth,
            )


def case_of(cell: Cell) -> Case:
    return Case.from_params(cell.params())


def seeded(cell: Cell) -> bool:
    """Whether the cell is sized in U-NIAH's terms (``length_budget: seed``)."""
    return cell.params().get("length_budget") == "seed"


def seed_filler_chars(cell: Cell, filler: Filler) -> int:
    """``length_budget: seed``: the filler characters that, with the needles, fill the cell's
    length minus the buffer in cl100k tokens (see probes/uniah.py)."""
    params = cell.params()
    case = case_of(cell)
    share = uniah.haystack_tokens(
        cell.length, int(params["final_context_length_buffer"]), [n.text for n in case.needles]
    )
    return uniah.seed_filler_chars(filler, share)


def haystack(
    case: Case, depth: float, filler: Filler, filler_chars: int, *, end_at_100: bool = False
) -> Inserted:
    """``filler_chars`` of filler with the case's needles at sentence boundaries.

    Depths are fractions of the filler up to its last complete sentence: the filler is cut at
    ``filler_chars``, usually inside a sentence, and a needle never follows a cut sentence.
    With ``end_at_100`` (U-NIAH's rule), depth 100 puts the needles after everything, the cut
    sentence included.
    """
    text = filler.text(filler_chars)
    if end_at_100 and depth >= 100:
        return _appended(text, [n.text for n in case.needles])
    end = last_sentence_end(text)  # the last _SENTENCE_END match, found from the tail
    head = len(text) if end is None else end
    fractions = [d / 100 for d in needle_depths(depth, len(case.needles))]
    inserted = insert_needles(text[:head], [n.text for n in case.needles], fractions, "sentence")
    return Inserted(inserted.text + text[head:], inserted.offsets, inserted.spans)


def _appended(text: str, needles: Sequence[str]) -> Inserted:
    """The needles after ``text``, in order; a space between two words that would touch."""
    pieces = [text]
    offsets: list[int] = []
    spans: list[tuple[int, int]] = []
    size = len(text)
    previous = text[-1:] if text else ""
    for needle in needles:
        touching = previous and needle and not previous.isspace() and not needle[0].isspace()
        lead = " " if touching else ""
        spans.append((size, size + len(lead) + len(needle)))
        offsets.append(size + len(lead))
        pieces.append(lead + needle)
        size += len(lead) + len(needle)
        previous = needle[-1:] or previous
    return Inserted("".join(pieces), tuple(offsets), tuple(spans))


def with_distractors(
    case: Case, depth: float, distractors: Distractors, filler: Filler, filler_chars: int
) -> tuple[Inserted, list[float]]:
    """``haystack`` with the case's distractors at their depths too (distractors.py), under the
    same rule: depths are fractions of the filler up to its last complete sentence. Returns
    the haystack (the needles' offsets) and each distractor's depth."""
    text = filler.text(filler_chars)
    end = last_sentence_end(text)
    head = len(text) if end is None else end
    depths = needle_depths(depth, len(case.needles))
    placed_at = distractors.depths_for(depths)
    placed = place(
        text[:head],
        [n.text for n in case.needles],
        depths,
        [d.text for d in distractors.items],
        placed_at,
    )
    return Inserted(placed.text + text[head:], placed.needle_offsets, ()), placed_at


def haystack_id(cell: Cell, case: Case) -> str:
    """The context id the cell has with needlescope's own prompt: cells with the same haystack
    and needles share it whatever their prompt (``facts.pair_id``; RAG cells pair on it)."""
    return replace(cell, prompt_version=prompt_version(case.language)).context_id


def expected_of(case: Case) -> dict[str, Any]:
    return {
        "case": case.name,
        "needles": [n.text for n in case.needles],
        "keywords": [list(n.keywords) for n in case.needles],
        "question": case.question,
        "true_answer": case.true_answer,
    }


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """The prompt around ``filler_chars`` characters of filler (deterministic)."""
    case = case_of(cell)
    depth = 50.0 if cell.depth is None else cell.depth
    distractors = Distractors.from_params(cell.params())
    expected = expected_of(case)
    extra: dict[str, Any] = {}
    if distractors is None:
        inserted = haystack(case, depth, filler, filler_chars, end_at_100=seeded(cell))
    else:
        inserted, placed_at = with_distractors(case, depth, distractors, filler, filler_chars)
        expected["distractor_keywords"] = [list(d.keywords) for d in distractors.items]
        extra["distractor_depths"] = [round(d, 6) for d in placed_at]
    if cell.prompt_version == UNIAH:
        messages = uniah.messages(inserted.text, case.question)
        prompt = joined(messages)
    else:
        messages = ()
        prompt = CASES_TEMPLATES[cell.prompt_version].render(
            haystack=inserted.text, question=case.question
        )
    size = max(len(inserted.text), 1)
    fractions = tuple(round(o / size, 6) for o in inserted.offsets)
    return Rendered(
        prompt_text=prompt,
        haystack_text=inserted.text,
        expected=expected,
        fractions=fractions,
        offsets=inserted.offsets,
        facts={
            "depth": depth,
            "needle_depths": [round(d, 6) for d in needle_depths(depth, len(case.needles))],
            "needle_fractions": list(fractions),
            "pair_id": haystack_id(cell, case),
            **extra,
        },
        messages=messages,
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    """Tokens kept free for the answer: the generation's max_tokens, else answer_buffer."""
    if max_tokens is not None:
        return max_tokens
    return int(cell.params()["answer_buffer"])


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    """Keyword recall per needle (never raises; a malformed ``expected`` is a parse error).

    A needle without keywords is not checked: its detail entry says so (``recall`` null) and it
    has no row of its own, so the mean is over the needles that are checked.
    """
    try:
        keyword_lists = [[str(k) for k in ks] for ks in expected["keywords"]]
    except (KeyError, TypeError, ValueError):
        return Grade(parse_ok=False, parse_error="expected has no keyword lists", accuracy=None)
    reply = response if isinstance(response, str) else ""
    shares: list[float] = []
    entries: list[dict[str, Any]] = []
    needles: list[NeedleResult] = []
    found_lists: list[list[str]] = []
    for index, keywords in enumerate(keyword_lists, start=1):
        if not keywords:
            entries.append({"needle": index, "recall": None, "recalled": None, "found": []})
            found_lists.append([])
            continue
        share, found = needle_recall(keywords, reply)
        recalled = share >= RECALLED_SHARE
        outcome = "correct" if recalled else ("partial" if found else "missing")
        shares.append(share)
        found_lists.append(list(found))
        needles.append(NeedleResult(index, None, recalled, outcome))
        entries.append(
            {"needle": index, "recall": round(share, 6), "recalled": recalled, "found": list(found)}
        )
    recalled_count = sum(n.in_lcs for n in needles)
    detail: dict[str, Any] = {"grader": GRADER, "needles": entries}
    near_misses = expected.get("distractor_keywords") if isinstance(expected, Mapping) else None
    if isinstance(near_misses, list):
        lists = [[str(k) for k in ks] if isinstance(ks, list) else [] for ks in near_misses]
        hit = distractor_hit(reply, lists)
        detail |= {"distractor": hit.distractor, "distractors_matched": list(hit.matched)}
    accuracy = 100 * sum(shares) / len(shares) if shares else None
    return Grade(
        parse_ok=True,
        parse_error=None,
        accuracy=accuracy,
        answered=found_lists,
        figures={"correct": recalled_count, "missing": len(needles) - recalled_count},
        detail=detail,
        needles=tuple(needles),
    )


grade_batch = grade_each(grade)
build = default_build(
    render, answer_budget, fits_filler=FITS_FILLER, seed_filler_chars=seed_filler_chars
)
rebuild = render_again(render)
