"""Counting-Stars result files (the repository's ``results/*.txt``), as StarsAnswers, and the
paper's per-length scores computed from them with needlescope's grader.

Each line of a result file is one JSON object, one request (``answer``,
``reference_counting_results``, ``sky_size``, ``model_name``, …); every ``.txt`` and ``.jsonl``
file under the path given is read, a record's key its file's name and line. The paper's figure
is recomputed with ``counting_stars.probe.grade`` under ``PAPER_SCORING`` (Python equality:
these files come from the paper's code).

Design: docs/design/imports.md#counting-stars
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from needlescope.imports.errors import ImportFormatError
from needlescope.imports.reading import Fields, fail, files_under, jsonl, sha256
from needlescope.imports.records import Key, Source, StarsAnswer
from needlescope.probes.base import Grade
from needlescope.probes.counting_stars.probe import PAPER_SCORING, grade

ZH_KEY = "小企鹅"
# The notebook's column label for a Chinese sky: sky_size / 0.725, "the specific scalar for
# The Story of the Stone" (its characters per token); the scores do not change.
ZH_SCALE = 0.725


def read_counting_stars(path: str | Path) -> list[StarsAnswer]:
    """Every answer under ``path`` (a result file, or a folder of them), in path order."""
    records: list[StarsAnswer] = []
    for file in files_under(Path(path), (".txt", ".jsonl"), "Counting-Stars result files"):
        records += _read_file(file)
    _unique(records)
    return records


def _read_file(file: Path) -> list[StarsAnswer]:
    records: list[StarsAnswer] = []
    runs: Counter[tuple[str | None, str, int, int]] = Counter()
    for line, data in jsonl(file):
        fields = Fields.of(data, Source(str(file), line=line))
        counts = fields.integers("reference_counting_results")
        if not counts:
            fields.fail('field "reference_counting_results" is empty: no star to count')
        sky_size = fields.integer("sky_size", minimum=1)
        model = fields.optional_text("model_name")
        response = fields.text("answer")
        instruction = fields.optional_text("retrieval_question")
        prompt = fields.optional_text("question")
        language = _language(instruction, prompt, response)
        runs[(model, language, len(counts), sky_size)] += 1
        records.append(
            StarsAnswer(
                model=model,
                language=language,
                sky_size=sky_size,
                counts=counts,
                response=response,
                question=instruction,
                prompt_chars=None if prompt is None else len(prompt),
                prompt_sha256=None if prompt is None else sha256(prompt),
                prompt_tokens=fields.optional_integer("prompt_tokens", minimum=0),
                completion_tokens=fields.optional_integer("completion_tokens", minimum=0),
                parameters=fields.mapping("parameters"),
                code=fields.optional_integer("code"),
                repeat=runs[(model, language, len(counts), sky_size)],
                source=fields.source,
                key=("stars", file.name, line),
            )
        )
    if not records:
        fail(Source(str(file)), "no result lines")
    return records


def _language(instruction: str | None, prompt: str | None, response: str) -> Literal["en", "zh"]:
    told = instruction if instruction is not None else prompt
    return "zh" if ZH_KEY in (told if told is not None else response) else "en"


def _unique(records: list[StarsAnswer]) -> None:
    seen: dict[Key, Source] = {}
    for record in records:
        first = seen.setdefault(record.key, record.source)
        if first is not record.source:
            name = Path(record.source.path).name
            raise ImportFormatError(
                record.source.path, f"a second result file named {name!r} (also {first.path})"
            )


# --- the paper's figures --------------------------------------------------------------------


def grade_answer(record: StarsAnswer) -> Grade:
    """One imported answer graded by needlescope's counting_stars grader as the paper's code
    compares values (``true == 1``): the grade to store for it."""
    return grade(record.counts, PAPER_SCORING, record.response)


def star_scores(record: StarsAnswer) -> list[float]:
    """Each star's score (1 or 0) under needlescope's counting_stars grader, the paper's way."""
    return [float(s) for s in grade_answer(record).detail["scores"]]


def paper_scores(records: Iterable[StarsAnswer]) -> dict[int, float]:
    """Per sky size, the paper's score (0-1) of one experiment's answers (one result file):
    per star index the mean over that size's lines, then the mean over the star indices."""
    cells: dict[tuple[int, int], list[float]] = defaultdict(list)
    for record in records:
        for index, score in enumerate(star_scores(record)):
            cells[(record.sky_size, index)].append(score)
    by_size: dict[int, list[float]] = defaultdict(list)
    for (size, _), scores in sorted(cells.items()):
        by_size[size].append(sum(scores) / len(scores))
    return {size: sum(means) / len(means) for size, means in by_size.items()}


def paper_overall(records: Iterable[StarsAnswer]) -> float:
    """The notebook's one number: the mean over every (star, sky size) cell, to 3 decimals."""
    cells: dict[tuple[int, int], list[float]] = defaultdict(list)
    for record in records:
        for index, score in enumerate(star_scores(record)):
            cells[(record.sky_size, index)].append(score)
    if not cells:
        raise ValueError("no answers to score")
    means = [sum(scores) / len(scores) for scores in cells.values()]
    return round(sum(means) / len(means), 3)


def paper_length(sky_size: int, language: str) -> int:
    """The notebook's label for a sky size: Chinese sizes are shown divided by 0.725."""
    return int(sky_size / ZH_SCALE) if language == "zh" else sky_size
