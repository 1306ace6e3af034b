from __future__ import annotations

from datetime import UTC, datetime

from needlescope.config._sweep import parse_config
from needlescope.grid._cells import default_epoch
from needlescope.probes.registry import expand_grid

BASE = {
    "name": "grid",
    "seed": 3,
    "models": [
        {"name": "a", "provider": "local"},
        {"name": "b", "provider": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "x"},
    ],
    "probes": [
        {
            "probe": "recall",
            "lengths": [100, 200, 300],
            "needle_counts": [1, 5],
            "fillers": ["pattern", "noise"],
            "repeats": 2,
        }
    ],
}


def test_grid_size_and_unique_ids() -> None:
    cells = expand_grid(parse_config(BASE))
    assert len(cells) == 2 * 3 * 2 * 2 * 2
    assert len({c.cell_id for c in cells}) == len(cells)


def test_ids_are_stable_across_expansions() -> None:
    first = [c.cell_id for c in expand_grid(parse_config(BASE))]
    second = [c.cell_id for c in expand_grid(parse_config(BASE))]
    assert first == second


def test_context_is_shared_across_models_but_cells_are_not() -> None:
    cells = expand_grid(parse_config(BASE))
    by_context: dict[str, set[str]] = {}
    for cell in cells:
        by_context.setdefault(cell.context_id, set()).add(cell.model)
    assert all(models == {"a", "b"} for models in by_context.values())


def test_id_ignores_concurrency_and_urls_but_not_generation() -> None:
    base_ids = {c.cell_id for c in expand_grid(parse_config(BASE))}
    tweaked = {
        **BASE,
        "models": [
            {"name": "a", "provider": "local", "concurrency": 9, "timeout_s": 5},
            {"name": "b", "provider": "openai", "base_url": "http://10.0.0.1:2/v1", "model": "x"},
        ],
    }
    assert {c.cell_id for c in expand_grid(parse_config(tweaked))} == base_ids
    hotter = {
        **BASE,
        "models": [
            {"name": "a", "provider": "local", "generation": {"temperature": 0.7}},
            BASE["models"][1],
        ],
    }
    changed = {c.cell_id for c in expand_grid(parse_config(hotter)) if c.model == "a"}
    assert changed.isdisjoint(base_ids)


def test_seed_and_filler_definition_change_ids() -> None:
    base_ids = {c.cell_id for c in expand_grid(parse_config(BASE))}
    assert {c.cell_id for c in expand_grid(parse_config({**BASE, "seed": 4}))}.isdisjoint(base_ids)
    custom = {**BASE, "fillers": {"pattern": {"kind": "pattern", "pattern": "b|"}}}
    changed = {c.cell_id for c in expand_grid(parse_config(custom)) if c.filler == "pattern"}
    assert changed.isdisjoint(base_ids)


def test_default_epoch_is_name_and_utc_date() -> None:
    config = parse_config(BASE)
    assert default_epoch(config, datetime(2026, 1, 2, 23, 59, tzinfo=UTC)) == "grid-2026-01-02"
    assert default_epoch(parse_config({**BASE, "epoch": "fixed"})) == "fixed"
