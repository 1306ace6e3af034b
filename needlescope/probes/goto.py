"""The goto probe (the Little Retrieval Test): n register lines, one `go to line k` instruction.

The context is sized by n, the number of lines, not by filler: ``render`` ignores its filler.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from needlescope.cells import Cell, canonical_json, model_fields
from needlescope.config import GotoProbe, SweepConfig
from needlescope.errors import LengthError
from needlescope.fillers import Filler
from needlescope.probes.base import Grade, NeedleResult, Rendered
from needlescope.probes.templates import PromptTemplate

NAME = "goto"
FITS_FILLER = False
FILLER = "lines"
# Part of every cell id: bump LINE_FORMAT when the header, line or instruction wording changes.
LINE_FORMAT = "goto-lines-v1"
FILLER_SPEC = canonical_json({"kind": FILLER, "format": LINE_FORMAT})
HEADER = "Register dump"
HEAD = (HEADER, "")  # the rows above the register lines
LINE = "line {i}: REGISTER_CONTENT is <{v}>"
INSTRUCTION = (
    "[EXECUTE THIS]: Go to line {k} and report only REGISTER_CONTENT, "
    "as a bare number with no other words, then stop"
)
ANSWER_TOKENS = 16

_GOTO_V1 = """\
The file below holds numbered register lines. One line in it, marked [EXECUTE THIS], is an \
instruction for you.

<file>
{file}
</file>

Carry out that instruction. Answer with the number alone."""

GOTO_TEMPLATES: dict[str, PromptTemplate] = {
    "goto-v1": PromptTemplate("goto-v1", "en", _GOTO_V1),
    # The seed's protocol: the file is the whole prompt.
    "goto-raw-v1": PromptTemplate("goto-raw-v1", "en", "{file}"),
}

# A line label the model quotes back ("line 5: …") is not the value it reports.
_NUMBER = re.compile(r"(\bline\s*)?([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?![0-9])", re.IGNORECASE)
_MAX_DIGITS = 18


@dataclass(frozen=True)
class File:
    values: tuple[int, ...]  # values[i - 1] is the value of line i
    shown: tuple[int, ...]  # line numbers in the order the file shows them
    k: int
    instruction_position: int  # how many register lines precede the instruction


def expand(config: SweepConfig, probe: GotoProbe) -> Iterator[Cell]:
    axes = itertools.product(
        config.tested_models(),
        probe.line_counts,
        probe.orders,
        probe.prompts,
        range(probe.repeats),
    )
    for model, n, order, prompt, repeat in axes:
        params = canonical_json({"order": order, "value_max": probe.value_max})
        yield Cell(
            **model_fields(model),
            probe=NAME,
            probe_params=params,
            filler=FILLER,
            filler_spec=FILLER_SPEC,
            placement="random",
            region="whole",
            prompt_version=prompt,
            length=n,
            length_unit="lines",
            needle_count=1,
            repeat=repeat,
            seed=config.seed,
        )


def draw_file(cell: Cell) -> File:
    """Values, line order, target and instruction slot, from the cell's model-free seed."""
    n, params = cell.length, cell.params()
    value_max = int(params["value_max"])
    if n > value_max:
        raise LengthError(f"{n} lines cannot hold distinct values from 1 to {value_max}")
    rng = random.Random(cell.rng_seed)
    # Distinct (the seed allows repeats) so an answered value names exactly one line.
    values = tuple(rng.sample(range(1, value_max + 1), n))
    k = rng.randint(1, n)
    shown = list(range(1, n + 1))
    if params["order"] == "shuffled" and n > 1:
        while shown == sorted(shown):
            rng.shuffle(shown)
    # Never first or last, so attending to either end of the file cannot find it.
    position = rng.randint(1, n - 1) if n > 1 else rng.randint(0, 1)
    return File(values, tuple(shown), k, position)


def file_rows(file: File) -> list[str]:
    rows = [LINE.format(i=i, v=file.values[i - 1]) for i in file.shown]
    rows.insert(file.instruction_position, INSTRUCTION.format(k=file.k))
    return [*HEAD, *rows]


def render(cell: Cell, filler: Filler | None, filler_kind: str, filler_chars: int) -> Rendered:
    file = draw_file(cell)
    rows = file_rows(file)
    text = "\n".join(rows)
    target_position = file.shown.index(file.k)
    before = file.instruction_position <= target_position
    target_row = len(HEAD) + target_position + before
    offset = sum(len(row) + 1 for row in rows[:target_row])
    facts = {
        "k": file.k,
        "n": len(file.values),
        "order": cell.params()["order"],
        "instruction_position": file.instruction_position,
        "target_position": target_position,
        "instruction_before_target": before,
        "distance": abs(target_row - len(HEAD) - file.instruction_position),
        "line_values": list(file.values),
        "shown_order": list(file.shown),
    }
    return Rendered(
        prompt_text=GOTO_TEMPLATES[cell.prompt_version].render(file=text),
        haystack_text=text,
        expected=file.values[file.k - 1],
        fractions=(offset / len(text),),
        offsets=(offset,),
        facts=facts,
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    return max_tokens if max_tokens is not None else ANSWER_TOKENS


def reported_number(response: str) -> int | None:
    """The first number in the reply that is not a quoted line label; None if there is none."""
    for match in _NUMBER.finditer(response):
        if match.group(1) is None:
            digits = match.group(2).replace(",", "")
            return int(digits) if len(digits) <= _MAX_DIGITS else None
    return None


def grade(expected: int, facts: Mapping[str, Any], response: str) -> Grade:
    answered = reported_number(response)
    if answered is None:
        return Grade(
            parse_ok=False,
            parse_error="no reported number in the reply",
            accuracy=None,
            needles=(NeedleResult(1, expected, False, "missing"),),
        )
    hit = answered == expected
    return Grade(
        parse_ok=True,
        parse_error=None,
        accuracy=100.0 if hit else 0.0,
        answered=answered,
        figures={"correct": int(hit), "wrong": int(not hit)},
        detail={} if hit else wrong_detail(answered, facts),
        needles=(NeedleResult(1, expected, hit, "correct" if hit else "wrong"),),
    )


def wrong_detail(answered: int, facts: Mapping[str, Any]) -> dict[str, Any]:
    """Where a wrong value came from: its line, and how far that line is from line k."""
    values, shown, k = _list(facts, "line_values"), _list(facts, "shown_order"), facts.get("k")
    line = values.index(answered) + 1 if answered in values else None
    offset = shown_offset = None
    if line is not None and isinstance(k, int):
        offset = line - k
        if line in shown and k in shown:
            shown_offset = shown.index(line) - shown.index(k)
    return {
        "answered_value": answered,
        "answered_line": line,
        "offset": offset,
        "shown_offset": shown_offset,  # rows apart in the file as shown (differs when shuffled)
        "answered_k": answered == k,
        "instruction_before_target": facts.get("instruction_before_target"),
        "distance": facts.get("distance"),
    }


def _list(facts: Mapping[str, Any], key: str) -> list[Any]:
    value = facts.get(key)
    return value if isinstance(value, list) else []
