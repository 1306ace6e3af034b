"""`needlescope plan`: what a sweep will send — cells, tokens and cost — before sending anything."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from needlescope.config import SweepConfig
from needlescope.grid._cells import Cell
from needlescope.probes.cases.entry import CasesProbe
from needlescope.probes.registry import expand_with_probes, probe_module

# Rough tokens per unit where a cell is not sized in tokens: English text is about 4 characters
# a token; a goto register line about 20 tokens. Such rows are marked as estimates.
TOKENS_PER_UNIT = {"tokens": 1.0, "chars": 0.25, "bytes": 0.25, "lines": 20.0}
JUDGE_PROMPT_TOKENS = 600  # rubric, question, true answer and the answer being judged


@dataclass
class PlanRow:
    model: str
    probe: str
    cells: int = 0
    already_graded: int = 0
    dropped: int = 0  # longer than the model's context window: not sent
    to_send: int = 0
    unchecked: int = 0  # of to_send: lengths only the model's API can count (checked by run)
    prompt_tokens: int = 0
    answer_tokens: int = 0  # the output limits (answer budgets + reasoning room): an upper bound
    exact: bool = True  # prompt tokens fitted by the model's tokenizer, not estimated
    cost_usd: float | None = None  # as the model is configured: batch or flex at batch prices
    sync_cost_usd: float | None = None  # the same cells sent one by one at list price
    batch: bool = False  # the model's cells go to its batch API


def plan(
    config: SweepConfig,
    graded: set[str] | None = None,
    dropped: Collection[str] = (),
    unchecked: Collection[str] = (),
) -> list[PlanRow]:
    """One row per model (judges included) and probe, for the cells not yet graded: ``dropped``
    cells (too long for their model's window) are counted but not sent; ``unchecked`` ones
    are sent, their lengths to be checked by the run (a hosted tokenizer)."""
    rows: dict[tuple[str, str], PlanRow] = {}
    judged: dict[str, int] = defaultdict(int)
    for cell, probe in expand_with_probes(config).items():
        row = rows.setdefault((cell.model, cell.probe), PlanRow(cell.model, cell.probe))
        row.cells += 1
        if graded and cell.cell_id in graded:
            row.already_graded += 1
            continue
        if cell.cell_id in dropped:
            row.dropped += 1
            continue
        row.to_send += 1
        row.unchecked += cell.cell_id in unchecked
        model = config.model(cell.model)
        if cell.as_is:  # a corpus file used as it is: its size, at 4 characters a token
            row.prompt_tokens += round(_file_chars(config, cell) * TOKENS_PER_UNIT["chars"])
            row.exact = False
        else:
            row.prompt_tokens += round(cell.length * TOKENS_PER_UNIT.get(cell.length_unit, 1.0))
            # The paper's haystack is built to a nominal length, not fitted to it.
            row.exact &= cell.length_unit == "tokens" and not cell.nominal
        # the output limit sent: a model that thinks gets room for its reasoning as well
        row.answer_tokens += model.output_limit(
            probe_module(cell.probe).answer_budget(cell, model.generation.answer_tokens)
        )
        if isinstance(probe, CasesProbe) and probe.judge:
            judged[probe.judge] += 1
    for judge, count in judged.items():
        row = rows.setdefault((judge, "judge"), PlanRow(judge, "judge", exact=False))
        row.cells = row.to_send = count
        row.prompt_tokens = count * JUDGE_PROMPT_TOKENS
        row.answer_tokens = count * 256
    for (model_name, _), row in rows.items():
        model = config.model(model_name)
        row.batch = model.batch is not None
        if model.price is not None:
            # The worst case: no prompt token read from a cache, every output limit spent.
            row.sync_cost_usd = model.price.cost(row.prompt_tokens, row.answer_tokens)
            row.cost_usd = model.price.cost(
                row.prompt_tokens, row.answer_tokens, discounted=row.batch or model.discounted
            )
    return list(rows.values())


def _file_chars(config: SweepConfig, cell: Cell) -> int:
    path = config.filler_spec(cell.filler).path
    assert path is not None  # a corpus used as it is
    file = path if path.is_file() else path / str(cell.params()["file"])
    return len(file.read_text(encoding="utf-8"))


def totals(rows: list[PlanRow]) -> dict[str, Any]:
    costs = [r.cost_usd for r in rows if r.cost_usd is not None]
    sync_costs = [r.sync_cost_usd for r in rows if r.sync_cost_usd is not None]
    return {
        "cells": sum(r.cells for r in rows if r.probe != "judge"),
        "dropped": sum(r.dropped for r in rows),
        "to_send": sum(r.to_send for r in rows),
        "unchecked": sum(r.unchecked for r in rows),
        "prompt_tokens": sum(r.prompt_tokens for r in rows),
        "answer_tokens": sum(r.answer_tokens for r in rows),
        "cost_usd": sum(costs) if costs else None,
        "sync_cost_usd": sum(sync_costs) if sync_costs else None,
    }


def as_dicts(rows: list[PlanRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]
