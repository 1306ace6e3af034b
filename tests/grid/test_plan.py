from __future__ import annotations

import pytest

from needlescope.config._sweep import parse_config
from needlescope.grid._plan import plan, totals
from needlescope.probes.registry import expand_grid

CONFIG = {
    "name": "p",
    "models": [
        {
            "name": "cheap",
            "provider": "openai",
            "base_url": "http://127.0.0.1:1/v1",
            "model": "x",
            "price": {"input_per_mtok": 2.0, "output_per_mtok": 8.0},
        },
        {"name": "local", "provider": "local"},
    ],
    "probes": [
        {
            "probe": "recall",
            "lengths": [1000, 3000],
            "needle_counts": [10],
            "length_unit": "tokens",
        },
        {"probe": "goto", "line_counts": [50], "orders": ["ordered"]},
    ],
}


def test_plan_counts_cells_tokens_and_cost() -> None:
    rows = {(r.model, r.probe): r for r in plan(parse_config(CONFIG))}
    recall = rows[("cheap", "recall")]
    assert (recall.cells, recall.to_send, recall.prompt_tokens, recall.exact) == (2, 2, 4000, True)
    assert recall.answer_tokens == 2 * (10 * (4 + 8) + 32)
    assert recall.cost_usd == pytest.approx((4000 * 2.0 + recall.answer_tokens * 8.0) / 1e6)
    goto = rows[("cheap", "goto")]
    assert goto.exact is False and goto.prompt_tokens == 50 * 20
    assert rows[("local", "recall")].cost_usd is None
    assert totals(list(rows.values()))["cells"] == 6


def test_graded_cells_are_not_planned_again() -> None:
    config = parse_config(CONFIG)
    graded = {c.cell_id for c in expand_grid(config) if c.probe == "recall"}
    rows = {(r.model, r.probe): r for r in plan(config, graded)}
    assert rows[("cheap", "recall")].to_send == 0
    assert rows[("cheap", "recall")].already_graded == 2
    assert rows[("cheap", "goto")].to_send == 1


def test_variants_are_models_of_their_own_with_their_own_cells() -> None:
    config = parse_config(
        {
            **CONFIG,
            "models": [
                {
                    **CONFIG["models"][0],
                    "variants": {
                        "budget0": {"extra": {"thinkingConfig": {"thinkingBudget": 0}}},
                        "hot": {"temperature": 1.0},
                    },
                }
            ],
        }
    )
    names = [m.name for m in config.models]
    assert names == ["cheap@budget0", "cheap@hot"]
    assert config.model("cheap@hot").generation.temperature == 1.0
    assert config.model("cheap@budget0").generation.extra == {
        "thinkingConfig": {"thinkingBudget": 0}
    }
    cells = expand_grid(config)
    assert len({c.cell_id for c in cells}) == len(cells) == 2 * 3
    # the variants see the same contexts: their answers pair up cell by cell
    assert len({c.context_id for c in cells}) == 3


def test_plan_prices_batch_and_flex_models_both_ways() -> None:
    cheap = {**CONFIG["models"][0], "batch": True}
    flex = {**CONFIG["models"][0], "name": "flex", "tier": "flex"}
    config = parse_config({**CONFIG, "models": [cheap, flex]})
    rows = {(r.model, r.probe): r for r in plan(config)}
    for name in ("cheap", "flex"):
        row = rows[(name, "recall")]
        assert row.sync_cost_usd == pytest.approx((4000 * 2.0 + row.answer_tokens * 8.0) / 1e6)
        assert row.cost_usd == pytest.approx(row.sync_cost_usd / 2)
    assert rows[("cheap", "recall")].batch and not rows[("flex", "recall")].batch
    total = totals(list(rows.values()))
    assert total["cost_usd"] == pytest.approx(total["sync_cost_usd"] / 2)


def test_plan_table_shows_the_synchronous_cost_beside_a_batch_one(tmp_path) -> None:
    import yaml
    from typer.testing import CliRunner

    from needlescope.flows.cli._app import app

    config = {**CONFIG, "models": [{**CONFIG["models"][0], "batch": True}]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "synchronous (USD)" in result.output and " batch" in result.output
