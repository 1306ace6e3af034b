"""The goto probe (the Little Retrieval Test): n register lines, one `go to line k` instruction.

The context is sized by n, the number of lines, not by filler: ``render`` ignores its filler.
``goto-seed`` is the seed's experiment: its file, prompt, values (1–50,000, repeats allowed),
answer budget and reading of the reply; ``instruction_at: seed`` and ``shuffle_block`` give
its instruction position and its README's block shuffle with any template.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from needlescope.config import SweepConfig
from needlescope.errors import LengthError
from needlescope.grid import Cell, model_fields
from needlescope.haystack import Filler
from needlescope.probes.base import Grade, NeedleResult, Rendered, grade_each, render_again
from needlescope.probes.build import default_build
from needlescope.probes.goto.entry import GotoProbe
from needlescope.probes.templates import GOTO_SEED as SEED_TEMPLATE
from needlescope.probes.templates import GOTO_TEMPLATES
from needlescope.provenance import canonical_json

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

SEED_LINE_FORMAT = "lrt-seed"
SEED_HEADER = "Testing Long Context"
# The seed's header is one list entry ending in a blank line: the instruction goes before
# it or after it, never between its two rows.
SEED_HEAD = (SEED_HEADER, "")
SEED_INSTRUCTION = (
    "[EXECUTE THIS]: Go to line {k} and report only REGISTER_CONTENT, without any context or "
    "additional text, just the number, then EXIT"
)
SEED_VALUE_MAX = 50_000
SEED_ANSWER_TOKENS = 10


@dataclass(frozen=True)
class Layout:
    """A template's file: the rows above the register lines and the instruction's wording."""

    head: tuple[str, ...]
    instruction: str
    line_format: str

    @property
    def filler_spec(self) -> str:
        return canonical_json({"kind": FILLER, "format": self.line_format})


OWN_LAYOUT = Layout(HEAD, INSTRUCTION, LINE_FORMAT)
SEED_LAYOUT = Layout(SEED_HEAD, SEED_INSTRUCTION, SEED_LINE_FORMAT)

# \d and int() take the decimal digits of every script (１２３４, ١٢٣٤), as the seed's \d+ did.
# A line label the model quotes back ("line 5: …") is not the value it reports.
_NUMBER = re.compile(r"(\bline\s*)?(\d{1,3}(?:,\d{3})+|\d+)(?!\d)", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_MAX_DIGITS = 18


@dataclass(frozen=True)
class File:
    values: tuple[int, ...]  # values[i - 1] is the value of line i
    shown: tuple[int, ...]  # line numbers in the order the file shows them
    k: int
    instruction_position: int  # how many register lines precede the instruction
    above_header: bool = False  # the seed's position for k = 1: first row of the file


def layout(cell: Cell) -> Layout:
    return SEED_LAYOUT if cell.prompt_version == SEED_TEMPLATE else OWN_LAYOUT


def cell_params(probe: GotoProbe, order: str, prompt: str) -> str:
    """The cell's probe_params: settings join only away from their defaults, so the cells of
    configs written before them keep their ids."""
    seed = prompt == SEED_TEMPLATE
    params: dict[str, Any] = {
        "order": order,
        "value_max": SEED_VALUE_MAX if seed else probe.value_max,
    }
    if probe.instruction_at != "random":
        params["instruction_at"] = probe.instruction_at
    if order == "shuffled" and probe.shuffle_block is not None:
        params["shuffle_block"] = probe.shuffle_block
    return canonical_json(params)


def expand(config: SweepConfig, probe: GotoProbe) -> Iterator[Cell]:
    axes = itertools.product(
        config.tested_models(),
        probe.line_counts,
        probe.orders,
        probe.prompts,
        range(probe.repeats),
    )
    for model, n, order, prompt, repeat in axes:
        yield Cell(
            **model_fields(model),
            probe=NAME,
            probe_params=cell_params(probe, order, prompt),
            filler=FILLER,
            filler_spec=SEED_LAYOUT.filler_spec if prompt == SEED_TEMPLATE else FILLER_SPEC,
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
    rng = random.Random(cell.rng_seed)
    if cell.prompt_version == SEED_TEMPLATE:  # the seed's draws: uniform, repeats allowed
        values = tuple(rng.randint(1, value_max) for _ in range(n))
    else:
        if n > value_max:
            raise LengthError(f"{n} lines cannot hold distinct values from 1 to {value_max}")
        # Distinct so an answered value names exactly one line.
        values = tuple(rng.sample(range(1, value_max + 1), n))
    k = rng.randint(1, n)
    shown = shown_order(n, params, rng)
    if params.get("instruction_at") == "seed":
        # The seed inserts at index k − 1 of [header, shown lines…].
        return File(values, shown, k, max(k - 2, 0), above_header=k == 1)
    # Never first or last, so attending to either end of the file cannot find it.
    position = rng.randint(1, n - 1) if n > 1 else rng.randint(0, 1)
    return File(values, shown, k, position)


def shown_order(n: int, params: Mapping[str, Any], rng: random.Random) -> tuple[int, ...]:
    """Line numbers as the file shows them: in order, whole blocks of ``shuffle_block`` lines
    shuffled (as the seed's README describes: one shuffle, which may leave them in order), or
    every line shuffled until it is out of order."""
    shown = list(range(1, n + 1))
    if params["order"] != "shuffled":
        return tuple(shown)
    block = params.get("shuffle_block")
    if block is not None:
        blocks = [shown[start : start + int(block)] for start in range(0, n, int(block))]
        rng.shuffle(blocks)
        return tuple(line for chunk in blocks for line in chunk)
    if n > 1:
        while shown == sorted(shown):
            rng.shuffle(shown)
    return tuple(shown)


def instruction_row(file: File, form: Layout) -> int:
    return 0 if file.above_header else len(form.head) + file.instruction_position


def file_rows(file: File, form: Layout = OWN_LAYOUT) -> list[str]:
    rows = [*form.head, *(LINE.format(i=i, v=file.values[i - 1]) for i in file.shown)]
    rows.insert(instruction_row(file, form), form.instruction.format(k=file.k))
    return rows


def render(cell: Cell, filler: Filler | None, filler_kind: str, filler_chars: int) -> Rendered:
    file, form = draw_file(cell), layout(cell)
    rows = file_rows(file, form)
    text = "\n".join(rows)
    target_position = file.shown.index(file.k)
    at = instruction_row(file, form)
    before = at <= len(form.head) + target_position
    target_row = len(form.head) + target_position + before
    offset = sum(len(row) + 1 for row in rows[:target_row])
    params = cell.params()
    facts: dict[str, Any] = {
        "k": file.k,
        "n": len(file.values),
        "order": params["order"],
        "instruction_position": file.instruction_position,
        "target_position": target_position,
        "instruction_before_target": before,
        "distance": abs(target_row - at),
        "line_values": list(file.values),
        "shown_order": list(file.shown),
    }
    if cell.prompt_version == SEED_TEMPLATE:
        facts["grading"] = "seed"
    if params.get("instruction_at") == "seed":
        facts |= {"instruction_at": "seed", "instruction_above_header": file.above_header}
    if "shuffle_block" in params:
        facts["shuffle_block"] = params["shuffle_block"]
    return Rendered(
        prompt_text=GOTO_TEMPLATES[cell.prompt_version].render(file=text),
        haystack_text=text,
        expected=file.values[file.k - 1],
        fractions=(offset / len(text),),
        offsets=(offset,),
        facts=facts,
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    if max_tokens is not None:
        return max_tokens
    return SEED_ANSWER_TOKENS if cell.prompt_version == SEED_TEMPLATE else ANSWER_TOKENS


def reported_number(response: str) -> int | None:
    """The first number in the reply that is not a quoted line label; None if there is none."""
    for match in _NUMBER.finditer(response):
        if match.group(1) is None:
            digits = match.group(2).replace(",", "")
            return int(digits) if len(digits) <= _MAX_DIGITS else None
    return None


def first_digits(response: str) -> int | None:
    """The seed's reading: the first run of digits in the reply, whatever surrounds it."""
    match = _DIGITS.search(response)
    if match is None:
        return None
    try:
        return int(match.group())
    except ValueError:  # longer than int() reads (4,300 digits)
        return None


def grade(expected: int, facts: Mapping[str, Any], response: str) -> Grade:
    seed = facts.get("grading") == "seed"
    answered = first_digits(response) if seed else reported_number(response)
    if answered is None:
        return Grade(
            parse_ok=False,
            parse_error="no digits in the reply" if seed else "no reported number in the reply",
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
    line = answered_line(answered, values, shown)
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


def answered_line(answered: int, values: list[Any], shown: list[Any]) -> int | None:
    """The line holding the answered value; of several (the seed's values repeat), the first
    the file shows, as the seed's own trace found it."""
    lines = range(1, len(values) + 1)
    in_file = [i for i in shown if isinstance(i, int) and i in lines]
    return next((i for i in (*in_file, *lines) if values[i - 1] == answered), None)


def _list(facts: Mapping[str, Any], key: str) -> list[Any]:
    value = facts.get(key)
    return value if isinstance(value, list) else []


grade_batch = grade_each(grade)
build = default_build(render, answer_budget, fits_filler=FITS_FILLER)
rebuild = render_again(render)
