"""The latent_list probe wired in: config entry, cells, the prompt fitted and rebuilt from its
cell row, the consistent prefix in the grade's detail, and `needlescope grade latent_list`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from needlescope.config._sweep import parse_config
from needlescope.errors import ConfigError
from needlescope.fitting import tokens
from needlescope.grading.by_hand import grade_one
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.base import BuildTools
from needlescope.probes.build import rebuild
from needlescope.probes.latent_list import probe as latent
from needlescope.probes.latent_list import statements_in
from needlescope.probes.registry import expand_grid

REPO = Path(__file__).resolve().parents[2]
MODEL = {"name": "m", "provider": "local"}


def config(**entry: object) -> object:
    return parse_config(
        {
            "name": "t",
            "models": [MODEL],
            "probes": [{"probe": "latent_list", "lengths": [600], "operations": [3, 6], **entry}],
        }
    )


async def _text(text: str) -> int:
    return tokens.count(text)


def test_cells_by_operations_irrelevant_and_query() -> None:
    cells = expand_grid(config(irrelevant=[0, 4], queries=["list", "element"]))  # type: ignore[arg-type]
    assert len(cells) == 2 * 2 * 2
    params = {(p["operations"], p["irrelevant"], p["query"]) for p in (c.params() for c in cells)}
    assert params == {(o, i, q) for o in (3, 6) for i in (0, 4) for q in ("list", "element")}
    assert {c.prompt_version for c in cells} == {"latent-list-v1"}


def test_bad_query_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="queries"):
        config(queries=["sum"])


def test_prompt_fits_the_length_and_rebuilds() -> None:
    cfg = config(irrelevant=[2])
    cell = expand_grid(cfg)[1]  # type: ignore[arg-type]
    filler = filler_from_spec(cfg.filler_spec("prose-en"))  # type: ignore[attr-defined]
    context = asyncio.run(latent.build(cell, filler, "prose", BuildTools(measure=_text)))
    assert abs(tokens.count(context.prompt_text) - 600) <= 12
    program = latent.program_of(cell)
    assert statements_in(context.prompt_text) == [s.text for s in program.statements]
    assert context.expected["answer"] == list(program.final)
    assert context.rendered.facts["operations"] == 6
    again = rebuild(latent, cell, filler, "prose", context.filler_chars, context.prompt_length)
    assert again.prompt_sha256 == context.prompt_sha256


def test_grade_keeps_the_consistent_prefix_in_detail() -> None:
    states = [[10, 20], [10, 20, 30], [20, 30], [30, 20]]
    expected = {"query": "list", "answer": [30, 20], "index": None, "states": states}
    lost = latent.grade(expected, {}, "x is now [20, 30]")
    assert lost.accuracy == 0.0 and lost.detail["consistent_with"] == 2
    right = latent.grade(expected, {}, "[30, 20]")
    assert right.accuracy == 100.0 and right.detail["consistent_with"] == 3
    unread = latent.grade(expected, {}, "I do not know")
    assert unread.parse_ok is False and unread.accuracy is None


def test_grade_by_hand() -> None:
    assert grade_one("latent_list", "[12, 40, 7]", "x = [12, 40, 7]")["accuracy"] == 100.0
    assert grade_one("latent_list", "[12, 40, 7]", "[12, 7, 40]")["accuracy"] == 0.0
    failed = grade_one("latent_list", "[12, 40, 7]", "no idea")
    assert failed["parse_ok"] is False and failed["accuracy"] is None


def test_shipped_config_is_small() -> None:
    from needlescope.config._file import load_config

    cells = expand_grid(load_config(REPO / "configs" / "latent.yaml"))
    assert 0 < len(cells) <= 8 and sum(c.length for c in cells) <= 8000
    assert {c.probe for c in cells} == {"latent_list"}
