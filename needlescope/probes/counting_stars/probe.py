"""The counting_stars probe, Counting-Stars-(M-N): M star sentences cut the haystack into M
equal parts; the model lists every count as ``{"little_penguin": [...]}``.

Templates are needlescope's own (templates.py) or the paper's (paper.py); counts are drawn per
cell, or the repository's fixed list (``counts: paper``). Scoring follows the paper's code: the
answered list truncated to M and deduplicated, each true count scoring 1 when it is in what is
left (the reasoning variant: 1, 0.5 or 0.25); accuracy is the mean score × 100. Under the
paper's templates "is in" is Python's equality (``true == 1``); a reply with no list scores 0
and is flagged as a parse failure.

Design: docs/design/probes.md#counting-stars
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import json_repair

from needlescope.config import SweepConfig
from needlescope.grid import Cell, filler_identity, model_fields
from needlescope.haystack import Filler, insert_needles
from needlescope.probes.base import Grade, NeedleResult, Rendered, grade_each, render_again
from needlescope.probes.build import default_build
from needlescope.probes.counting_stars.entry import CountingStarsProbe
from needlescope.probes.counting_stars.paper import paper_counts, splice
from needlescope.probes.counting_stars.templates import TEMPLATES
from needlescope.provenance import canonical_json

NAME = "counting_stars"
FITS_FILLER = True

KEYS = ("little_penguin", "小企鹅")
COUNT_STEP = 4  # star i counts a number drawn from [4i + 1, 4i + 4], as in the paper's data
# (corrected count answered, mistaken count answered) -> score, the repository's reasoning rule.
REASONING_SCORES = {(True, False): 1.0, (True, True): 0.5, (False, True): 0.25, (False, False): 0.0}
OUTCOMES = {1.0: "correct", 0.5: "partial", 0.25: "mistaken", 0.0: "missing"}
NO_LIST = 'no {"little_penguin": [...]} object and no bare list in the answer'
# facts["scoring"]: "paper" compares answered values as the paper's code does (Python equality:
# true == 1); absent, needlescope's own rule (a boolean is never a count).
SCORING, PAPER = "scoring", "paper"
PAPER_SCORING: Mapping[str, Any] = {SCORING: PAPER}  # the facts that ask for the paper's rule


def expand(config: SweepConfig, probe: CountingStarsProbe) -> Iterator[Cell]:
    stars = probe.star_count()
    # The paper's counts have their own order: `orders` does not apply to them.
    orders: list[str | None] = [None] if probe.counts == "paper" else list(probe.orders)
    grid = (config.tested_models(), probe.length_grid(), probe.templates(), orders)
    for model, length, prompt, order in itertools.product(*grid):
        template = TEMPLATES[prompt]
        language, reasoning = template.language, template.reasoning
        params = canonical_json(
            {"stars": stars, "order": order, "language": language, "reasoning": reasoning}
            if order is not None
            else {"stars": stars, "counts": "paper", "language": language, "reasoning": reasoning}
        )
        fillers = fillers_for(config, probe.fillers, language)
        for filler, repeat in itertools.product(fillers, range(probe.repeats)):
            yield Cell(
                **model_fields(model),
                probe=NAME,
                probe_params=params,
                filler=filler,
                filler_spec=filler_identity(config.filler_spec(filler)),
                placement="even",
                region="whole",
                prompt_version=prompt,
                length=length,
                length_unit=probe.length_unit,
                needle_count=stars,
                repeat=repeat,
                seed=config.seed,
            )


def fillers_for(config: SweepConfig, fillers: Sequence[str], language: str) -> list[str]:
    """The fillers a language's cells use: prose, or a paper haystack, of the other language is
    left out (listing prose-en and prose-zh pairs each with its language), unless nothing would
    be left."""
    kept = [
        name
        for name in fillers
        if not (
            ((spec := config.filler_spec(name)).kind == "prose" or spec.paper)
            and spec.language != language
        )
    ]
    return kept or list(fillers)


def draw_stars(cell: Cell) -> tuple[list[int], list[int]]:
    """Counts in context order: increasing with irregular gaps (ordered) or shuffled, or the
    paper's; and for the reasoning variant the mistaken first count of each star (else [])."""
    params = cell.params()
    if params.get("counts") == "paper":
        counts, mistaken = paper_counts(cell.needle_count)
        return counts, mistaken if params.get("reasoning") else []
    rng = random.Random(cell.rng_seed)
    counts = [
        rng.randint(COUNT_STEP * i + 1, COUNT_STEP * (i + 1)) for i in range(cell.needle_count)
    ]
    if cell.params().get("order") == "shuffled":
        rng.shuffle(counts)
    return counts, _mistakes(counts, rng) if cell.params().get("reasoning") else []


def _mistakes(counts: Sequence[int], rng: random.Random) -> list[int]:
    """Off-by-one slips like the paper's data, never equal to any other count on the page."""
    taken = set(counts)
    wrong: list[int] = []
    for count in counts:
        for delta in itertools.count(1):
            options = [c for c in (count - delta, count + delta) if c >= 1 and c not in taken]
            if options:
                wrong.append(rng.choice(options))
                taken.add(wrong[-1])
                break
    return wrong


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """The haystack with its M star sentences, then the question."""
    counts, mistaken = draw_stars(cell)
    template = TEMPLATES[cell.prompt_version]
    sentences = [
        template.star.format(count=count, wrong=wrong)
        for count, wrong in zip(counts, mistaken or counts, strict=True)
    ]
    text = filler.text(filler_chars)
    if template.splice == "paper":
        haystack, offsets = splice(text, sentences, template.language)
        # The loop's drift moves stars off the part boundaries: say where they really are.
        fractions = [o / len(haystack) for o in offsets]
    else:
        haystack, offsets, fractions = _at_sentence_ends(text, sentences)
    facts: dict[str, Any] = {k: cell.params().get(k) for k in ("order", "language", "reasoning")}
    if cell.params().get("counts"):
        facts["counts"] = cell.params()["counts"]
    if mistaken:
        facts["mistaken"] = mistaken
    if template.splice == "paper":  # the stars-*-paper templates: the paper's comparison too
        facts[SCORING] = PAPER
    return Rendered(
        prompt_text=f"{haystack}{template.joiner}{template.question}",
        haystack_text=haystack,
        expected=counts,
        fractions=tuple(fractions),
        offsets=tuple(offsets),
        facts=facts,
    )


def _at_sentence_ends(
    text: str, sentences: Sequence[str]
) -> tuple[str, tuple[int, ...], list[float]]:
    """needlescope's placement: a star sentence closing each of M equal parts."""
    m = len(sentences)
    inserted = insert_needles(text, sentences, [(i + 1) / m for i in range(m)], "sentence")
    # Where each star really sits in the filler once snapped to a sentence end.
    added = 0
    fractions: list[float] = []
    for start, end in inserted.spans:
        fractions.append((start - added) / len(text) if text else 1.0)
        added += end - start
    return inserted.text, tuple(inserted.offsets), fractions


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    """Room for the list: each count costs its digits plus a separator (both counts may come)."""
    if max_tokens is not None:
        return max_tokens
    if cell.params().get("counts") == "paper":
        largest = max(paper_counts(cell.needle_count)[0])
    else:
        largest = COUNT_STEP * cell.needle_count
    per_star = len(str(largest)) + 2
    return cell.needle_count * per_star * (2 if cell.params().get("reasoning") else 1) + 48


# --- grading ----------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
_AFTER_KEY = re.compile(r"(?:little[\s_-]*penguin|小企鹅)[\"'“”\s]*[:：]\s*", re.IGNORECASE)


def grade(expected: Sequence[int], facts: Mapping[str, Any], response: str) -> Grade:
    truth = [int(v) for v in expected]
    raw = read_answer(response)
    if raw is None:
        return _no_list(truth)
    key = _python_key if facts.get(SCORING) == PAPER else _key
    answered = [_normal(v) for v in raw]
    window = {key(v) for v in answered[: len(truth)]}  # truncate to M, drop duplicates
    mistaken = [int(w) for w in facts.get("mistaken") or []] if facts.get("reasoning") else []
    if mistaken and len(mistaken) == len(truth):
        pairs = zip(truth, mistaken, strict=True)
        scores = [REASONING_SCORES[(key(c) in window, key(w) in window)] for c, w in pairs]
    else:
        scores = [1.0 if key(c) in window else 0.0 for c in truth]
    distinct = {key(v) for v in answered}
    strays = distinct - {key(c) for c in truth} - {key(w) for w in mistaken}
    return Grade(
        parse_ok=True,
        parse_error=None,
        accuracy=100.0 * sum(scores) / len(scores) if scores else 100.0,
        answered=answered,
        figures={"correct": scores.count(1.0), "missing": scores.count(0.0), "extra": len(strays)},
        detail={
            "scores": scores,
            "answered_count": len(answered),
            "beyond_m": max(0, len(answered) - len(truth)),
            "duplicates": len(answered) - len(distinct),
            "out_of_truth": len(strays),
            "mistaken_answered": len(distinct & {_key(w) for w in mistaken}),
        },
        needles=tuple(
            NeedleResult(i + 1, c, s == 1.0, OUTCOMES[s])
            for i, (c, s) in enumerate(zip(truth, scores, strict=True))
        ),
    )


def _no_list(truth: Sequence[int]) -> Grade:
    """A reply with no list: every star missed, scored 0 and kept in the mean."""
    return Grade(
        parse_ok=False,
        parse_error=NO_LIST,
        accuracy=0.0,
        figures={"correct": 0, "missing": len(truth), "extra": 0},
        detail={"scores": [0.0] * len(truth)},
        needles=tuple(NeedleResult(i + 1, c, False, "missing") for i, c in enumerate(truth)),
    )


def read_answer(response: str) -> list[Any] | None:
    """The list under the little_penguin (or 小企鹅) key, repairing broken JSON, else a reply
    that is a bare JSON list; None if neither."""
    text = _FENCE.sub(" ", response)
    repaired = _repair(text)
    found = _list_in(repaired)
    if found is None and (match := _AFTER_KEY.search(text)):
        # Prose around the object can derail the repair: read the value right after the key.
        rest = text[match.end() :]
        end = rest.find("]") if rest.startswith("[") else -1
        value = rest[: end + 1] if end >= 0 else (rest.split() or [""])[0]
        found = _as_list(_repair(value.rstrip(",}")))
    # Several objects come back as a list of them too: a bare list holds none.
    bare = isinstance(repaired, list) and not any(isinstance(item, dict) for item in repaired)
    if found is None and bare and text.lstrip().startswith("["):
        found = repaired
    return found


def _repair(text: str) -> Any:
    try:
        return json_repair.loads(text)
    except Exception:  # the repairer's own failures (e.g. recursion depth) mean "unreadable"
        return None


def _list_in(value: Any) -> list[Any] | None:
    """From one object, or the several objects json_repair found: prefer a list with counts."""
    objects = value if isinstance(value, list) else [value]
    lists = [
        found
        for obj in objects
        if isinstance(obj, dict)
        for key, item in obj.items()
        if re.sub(r"[\s-]+", "_", str(key).strip().lower()) in KEYS
        and (found := _as_list(item)) is not None
    ]
    with_counts = [found for found in lists if any(_count(v) is not None for v in found)]
    return next(iter(with_counts or lists), None)


def _as_list(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    return [value] if _count(value) is not None else None


def _count(value: Any) -> int | None:
    """A JSON number equal to an integer (15 and 15.0 alike); never a string or a boolean."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _normal(value: Any) -> Any:
    """An answered item as a JSON scalar: counts as ints, anything nested as its JSON text."""
    if (count := _count(value)) is not None:
        return count
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | dict):
        try:
            return canonical_json(value)
        except (ValueError, RecursionError):
            return "<unreadable>"
    return value


def _key(value: Any) -> tuple[str, Any]:
    """Identity for membership and duplicates (of a ``_normal`` item): Python equality, but a
    boolean is never a count. needlescope's own rule."""
    return (type(value).__name__, value)


def _python_key(value: Any) -> tuple[str, Any]:
    """Identity as the paper's code has it, Python equality throughout: ``true`` is 1 and
    ``false`` 0 (in a Python set ``{1, True}`` is one item). A ``_normal`` item's other numbers
    equal to an integer are ints already (``6.0 == 6``), and a float that is not equals no int."""
    return ("int", int(value)) if isinstance(value, bool) else _key(value)


grade_batch = grade_each(grade)
build = default_build(render, answer_budget, fits_filler=FITS_FILLER)
rebuild = render_again(render)
