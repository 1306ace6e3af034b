"""A probe defined in this file alone, registered from outside needlescope's folders, goes
the whole way: config validation takes its entry, the grid makes and counts its cells, the
sweep's builder fits its prompts and its grader grades the replies, the warehouse creates its
views, and the report draws its section with its chart. Nothing of needlescope is edited: a
probe is its declaration, its core module and its warehouse side.

This module is the probe's module (the ``Probe`` protocol): ``toy`` hides one code word in the
haystack and asks for it back.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import altair as alt
import pytest
from pydantic import Field

from needlescope.config import Count, LengthUnit, ProbeEntry, SweepConfig, parse_config
from needlescope.errors import ConfigError
from needlescope.fitting import measure_text
from needlescope.grid import Cell, filler_identity, grid_sizes, model_fields
from needlescope.haystack import Filler, filler_from_spec, insert_needles
from needlescope.probes import catalog
from needlescope.probes.base import BuildTools, Grade, NeedleResult, Rendered
from needlescope.probes.base import grade_each as _grade_each
from needlescope.probes.base import render_again as _render_again
from needlescope.probes.build import default_build
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.probes.spec import ProbeSpec
from needlescope.providers.base import Reply
from needlescope.warehouse import probes as warehouse_probes
from needlescope.warehouse.report.figures import ProbeCharts
from needlescope.warehouse.report.page import write_report
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import AnswerKey, cell_row, graded_row, table_rows

WORDS = ("amber", "basil", "cedar", "delta", "ember", "fjord")

# --- the probe: its entry, its module (this one), its warehouse side ------------------------


class ToyProbe(ProbeEntry):
    probe: Literal["toy"]
    lengths: list[Count] = Field(min_length=1)
    length_unit: LengthUnit = "chars"
    fillers: list[str] = Field(default=["pattern"], min_length=1)
    repeats: int = 1


NAME = "toy"
FITS_FILLER = True


def expand(config: SweepConfig, probe: ToyProbe) -> Iterator[Cell]:
    for model, length, filler, repeat in itertools.product(
        config.tested_models(), probe.lengths, probe.fillers, range(probe.repeats)
    ):
        yield Cell(
            **model_fields(model),
            probe=NAME,
            probe_params="{}",
            filler=filler,
            filler_spec=filler_identity(config.filler_spec(filler)),
            placement="even",
            region="whole",
            prompt_version="toy-v1",
            length=length,
            length_unit=probe.length_unit,
            needle_count=1,
            repeat=repeat,
            seed=config.seed,
        )


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    word = random.Random(cell.rng_seed).choice(WORDS)
    inserted = insert_needles(filler.text(filler_chars), [f" {word} "], [0.5], "char")
    prompt = f"One code word is hidden below.\n{inserted.text}\nWhat is the code word?"
    return Rendered(prompt, inserted.text, word, (0.5,), tuple(inserted.offsets))


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    return max_tokens or 8


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    found = str(expected) in response.lower()
    needle = NeedleResult(1, None, found, "correct" if found else "missing")
    return Grade(True, None, 100.0 if found else 0.0, response.strip(), needles=(needle,))


grade_batch = _grade_each(grade)
build = default_build(render, answer_budget, fits_filler=FITS_FILLER)
rebuild = _render_again(render)

SPEC = ProbeSpec(NAME, __name__, f"{__name__}:ToyProbe", rank=95)
VIEWS = """
CREATE OR REPLACE VIEW toy_scores AS
SELECT model, length, count(*) AS answers, avg(accuracy) AS mean_accuracy
FROM results WHERE probe = 'toy' GROUP BY ALL;
"""


def figures(con: Any, probe: str) -> ProbeCharts:
    frame = con.sql("SELECT * FROM toy_scores ORDER BY length").pl()
    chart = alt.Chart(frame).mark_line().encode(x="length:Q", y="mean_accuracy:Q")
    return ProbeCharts([("accuracy_by_length", chart)])


@pytest.fixture
def registered() -> Iterator[None]:
    catalog.register(SPEC)
    warehouse_probes.register(NAME, warehouse_probes.Side(views=VIEWS, figures=figures))
    try:
        yield
    finally:
        catalog.unregister(NAME)
        warehouse_probes.unregister(NAME)


CONFIG = {
    "name": "toy",
    "seed": 3,
    "models": [
        {"name": "m", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x"}
    ],
    "probes": [{"probe": "toy", "lengths": [300, 600], "repeats": 2}],
}

# --- the proof -------------------------------------------------------------------------------


def test_an_unregistered_probe_is_an_unknown_entry() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(CONFIG)
    assert "probes.0" in str(refused.value) and "'toy'" in str(refused.value)


async def _measure(text: str) -> int:
    return measure_text(text, "chars")


def test_a_probe_registered_from_outside_goes_the_whole_way(
    registered: None, tmp_path: Path
) -> None:
    config = parse_config(CONFIG)
    assert isinstance(config.probes[0], ToyProbe)
    assert catalog.ordered(["toy", "recall"]) == ["recall", "toy"]
    cells = expand_grid(config)
    assert len(cells) == 4 == sum(grid_sizes(config))  # counted by making them

    module = probe_module("toy")
    tools = BuildTools(_measure, _measure)
    filler = filler_from_spec(config.filler_spec("pattern"))
    contexts = [asyncio.run(module.build(c, filler, "pattern", tools)) for c in cells]
    assert all(c.prompt_length == c.cell.length for c in contexts)  # fitted to the character

    replies = [
        f"The code word is {c.expected}." if i % 2 else "I do not know."
        for i, c in enumerate(contexts)
    ]
    graded = module.grade_batch([c.expected for c in contexts], [{}] * 4, replies)
    assert [g.accuracy for g in graded.grades] == [0.0, 100.0, 0.0, 100.0]

    store = Warehouse(tmp_path / "wh").ensure()
    t0 = datetime(2026, 11, 28, tzinfo=UTC)
    answers = []
    for i, (context, grade_) in enumerate(zip(contexts, graded.grades, strict=True)):
        row = graded_row(context, Reply(replies[i], "stop", 80, 6, None, 0.1), grade_, "r", "e", 1)
        row["answered_at"] = t0 + timedelta(seconds=i)
        answers.append(row)
    keys = [AnswerKey("r", "e", c.cell.cell_id, c.cell.model, "toy") for c in contexts]
    store.append("cells", [cell_row(c, "r", length_basis="chars") for c in contexts])
    for table, rows in table_rows(graded.tables, keys).items():
        store.append(table, rows)
    store.append("answers", answers)

    con = store.connect()
    scores = con.sql(
        "SELECT length, answers, mean_accuracy FROM toy_scores ORDER BY ALL"
    ).fetchall()
    assert scores == [(300, 2, 50.0), (600, 2, 50.0)]
    con.close()

    page = write_report(store.root, tmp_path / "report").read_text(encoding="utf-8")
    assert "toy_accuracy_by_length" in page
