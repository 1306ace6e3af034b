"""Context windows: which cells fit their model's window, and a local server's slot size."""

from __future__ import annotations

from needlescope.config import ModelConfig
from needlescope.grid import Cell
from needlescope.probes.build import budget_overhead
from needlescope.probes.registry import probe_module

DEFAULT_LOCAL_CONTEXT = 8192  # SmolLM2 was trained to 8192 tokens
CONTEXT_MARGIN = 16


def context_window(model: ModelConfig) -> int | None:
    if model.context_window is not None:
        return model.context_window
    return DEFAULT_LOCAL_CONTEXT if model.provider == "local" else None


def fits_context(cell: Cell, model: ModelConfig) -> bool:
    """Token-sized cells longer than the model's window (with room for the answer) are dropped.
    A cell taken as it is, or with a nominal length (the paper's haystack), cannot be told
    before it is built: its built prompt is checked then (``tasks/contexts.py``)."""
    window = context_window(model)
    if window is None or cell.length_unit != "tokens" or cell.as_is or cell.nominal:
        return True
    budget = probe_module(cell.probe).answer_budget(cell, model.generation.answer_tokens)
    return cell.length + budget_overhead(cell) + budget + CONTEXT_MARGIN <= window


def local_slot_size(cells: list[Cell], model: ModelConfig) -> int:
    """A local server's slot: the largest prompt and answer of ``cells``, rounded up to 256
    tokens, within the window (the whole window when a length is not in tokens)."""
    window = context_window(model) or DEFAULT_LOCAL_CONTEXT
    token_cells = [c for c in cells if c.length_unit == "tokens" and not (c.as_is or c.nominal)]
    if len(token_cells) != len(cells) or not cells:
        return window
    need = max(
        c.length
        + budget_overhead(c)
        + probe_module(c.probe).answer_budget(c, model.generation.answer_tokens)
        for c in cells
    )
    return min(window, -(-(need + CONTEXT_MARGIN) // 256) * 256)
