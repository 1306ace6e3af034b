"""The counting_stars probe, Counting-Stars-(M-N): M star sentences cut the haystack into M
equal parts; the model lists every count as ``{"little_penguin": [...]}``.

Scoring follows the paper's code: the answered list is truncated to M and deduplicated, then each
true count scores 1 when it is anywhere in what is left (membership, not position). In the
reasoning variant each star also carries a mistaken count that was corrected; a star scores 1 for
the corrected count alone, 0.5 for both counts, 0.25 for the mistaken count alone, else 0.
Accuracy is the mean score × 100.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import json_repair

from needlescope.cells import Cell, canonical_json, filler_identity, model_fields
from needlescope.config import CountingStarsProbe, SweepConfig
from needlescope.fillers import Filler
from needlescope.haystack import insert_needles
from needlescope.probes.base import Grade, NeedleResult, Rendered

NAME = "counting_stars"
FITS_FILLER = True

KEYS = ("little_penguin", "小企鹅")
COUNT_STEP = 4  # star i counts a number drawn from [4i + 1, 4i + 4], as in the paper's data
# (corrected count answered, mistaken count answered) -> score, the repository's reasoning rule.
REASONING_SCORES = {(True, False): 1.0, (True, True): 0.5, (False, True): 0.25, (False, False): 0.0}
OUTCOMES = {1.0: "correct", 0.5: "partial", 0.25: "mistaken", 0.0: "missing"}
NO_LIST = 'no {"little_penguin": [...]} list in the answer'


@dataclass(frozen=True)
class StarsTemplate:
    star: str  # formatted with {count}, and {wrong} in the reasoning variant
    question: str  # follows the haystack after a blank line


_STAR_EN = "Gazing upward, the little penguin counted {count} ★."
_STAR_EN_REASONING = (
    "Gazing upward, the little penguin counted {wrong} ★, then realised it had slipped, counted "
    "once more, and this time got it right: {count} ★."
)
_ASK_EN = (
    "All night long the little penguin has been gazing at the sky and counting ★; every count is "
    "written somewhere in the text above. Help the little penguin gather how many ★ it counted "
    "each time. {which}Do not add the numbers up: give one number per count, as JSON only, in "
    'exactly this form: {{"little_penguin": [x, x, x, ...]}}. Write no explanation.'
)
_STAR_ZH = "小企鹅抬头望向夜空，这一次数到了{count}颗★。"
_STAR_ZH_REASONING = (
    "小企鹅抬头望向夜空，先数到了{wrong}颗★，后来发现数错了，"
    "又仔细重数了一遍，这次数对了，是{count}颗★。"
)
_ASK_ZH = (
    "整个夜晚，小企鹅都在仰望星空、一遍又一遍地数★，每一次数的结果都写在上面的文字里。"
    "请帮小企鹅把每次数到的★的颗数收集起来。{which}不要把它们加起来，每次数的结果对应一个数字，"
    '只输出 JSON，格式如下：{{"小企鹅": [x, x, x, ...]}}。不要写任何解释。'
)
_WHICH_EN = (
    "Some counts were wrong and were done again; for those, keep only the corrected number. "
)
_WHICH_ZH = "有几次小企鹅数错了又重数，这时只保留重数后正确的颗数。"

TEMPLATES: dict[str, StarsTemplate] = {
    "stars-en-v1": StarsTemplate(_STAR_EN, _ASK_EN.format(which="")),
    "stars-zh-v1": StarsTemplate(_STAR_ZH, _ASK_ZH.format(which="")),
    "stars-reasoning-en-v1": StarsTemplate(_STAR_EN_REASONING, _ASK_EN.format(which=_WHICH_EN)),
    "stars-reasoning-zh-v1": StarsTemplate(_STAR_ZH_REASONING, _ASK_ZH.format(which=_WHICH_ZH)),
}


def template_version(language: str, reasoning: bool) -> str:
    return f"stars-{'reasoning-' if reasoning else ''}{language}-v1"


def expand(config: SweepConfig, probe: CountingStarsProbe) -> Iterator[Cell]:
    stars, reasoning = probe.star_count(), probe.reasoning
    grid = (config.tested_models(), probe.length_grid(), probe.languages, probe.orders)
    for model, length, language, order in itertools.product(*grid):
        params = canonical_json(
            {"stars": stars, "order": order, "language": language, "reasoning": reasoning}
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
                prompt_version=template_version(language, reasoning),
                length=length,
                length_unit=probe.length_unit,
                needle_count=stars,
                repeat=repeat,
                seed=config.seed,
            )


def fillers_for(config: SweepConfig, fillers: Sequence[str], language: str) -> list[str]:
    """The fillers a language's cells use: prose of the other language is left out (listing
    prose-en and prose-zh pairs each with its language), unless nothing would be left."""
    kept = [
        name
        for name in fillers
        if not ((spec := config.filler_spec(name)).kind == "prose" and spec.language != language)
    ]
    return kept or list(fillers)


def draw_stars(cell: Cell) -> tuple[list[int], list[int]]:
    """Counts in context order: increasing with irregular gaps (ordered) or shuffled; and for the
    reasoning variant the mistaken first count of each star (else an empty list)."""
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
    """The haystack cut into M equal parts with a star sentence closing each part."""
    counts, mistaken = draw_stars(cell)
    template = TEMPLATES[cell.prompt_version]
    sentences = [
        template.star.format(count=count, wrong=wrong)
        for count, wrong in zip(counts, mistaken or counts, strict=True)
    ]
    m = len(sentences)
    text = filler.text(filler_chars)
    inserted = insert_needles(text, sentences, [(i + 1) / m for i in range(m)], "sentence")
    # Where each star really sits in the filler once snapped to a sentence end.
    added = 0
    fractions: list[float] = []
    for start, end in inserted.spans:
        fractions.append((start - added) / len(text) if text else 1.0)
        added += end - start
    facts: dict[str, Any] = {k: cell.params().get(k) for k in ("order", "language", "reasoning")}
    if mistaken:
        facts["mistaken"] = mistaken
    return Rendered(
        prompt_text=f"{inserted.text}\n\n{template.question}",
        haystack_text=inserted.text,
        expected=counts,
        fractions=tuple(fractions),
        offsets=inserted.offsets,
        facts=facts,
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    """Room for the list: each count costs its digits plus a separator (both counts may come)."""
    if max_tokens is not None:
        return max_tokens
    per_star = len(str(COUNT_STEP * cell.needle_count)) + 2
    return cell.needle_count * per_star * (2 if cell.params().get("reasoning") else 1) + 48


# --- grading ----------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
_AFTER_KEY = re.compile(r"(?:little[\s_-]*penguin|小企鹅)[\"'“”\s]*[:：]\s*", re.IGNORECASE)


def grade(expected: Sequence[int], facts: Mapping[str, Any], response: str) -> Grade:
    raw = read_answer(response)
    if raw is None:
        return Grade(parse_ok=False, parse_error=NO_LIST, accuracy=None)
    answered = [_normal(v) for v in raw]
    truth = [int(v) for v in expected]
    window = {_key(v) for v in answered[: len(truth)]}  # truncate to M, drop duplicates
    mistaken = [int(w) for w in facts.get("mistaken") or []] if facts.get("reasoning") else []
    if mistaken and len(mistaken) == len(truth):
        pairs = zip(truth, mistaken, strict=True)
        scores = [REASONING_SCORES[(_key(c) in window, _key(w) in window)] for c, w in pairs]
    else:
        scores = [1.0 if _key(c) in window else 0.0 for c in truth]
    distinct = {_key(v) for v in answered}
    strays = distinct - {_key(c) for c in truth} - {_key(w) for w in mistaken}
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


def read_answer(response: str) -> list[Any] | None:
    """The list under the little_penguin (or 小企鹅) key, repairing broken JSON; None if absent."""
    text = _FENCE.sub(" ", response)
    found = _list_in(_repair(text))
    if found is None and (match := _AFTER_KEY.search(text)):
        # Prose around the object can derail the repair: read the value right after the key.
        rest = text[match.end() :]
        end = rest.find("]") if rest.startswith("[") else -1
        value = rest[: end + 1] if end >= 0 else (rest.split() or [""])[0]
        found = _as_list(_repair(value.rstrip(",}")))
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
    """Identity for membership and duplicates: Python equality, but a boolean is never a count."""
    return (type(value).__name__, value)
