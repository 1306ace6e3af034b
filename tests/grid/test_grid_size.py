"""The grid is counted from its axes, exactly as expand makes it, without making it."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlescope.config._file import load_config
from needlescope.config._sweep import parse_config
from needlescope.grid._size import grid_sizes
from needlescope.probes.recall import probe as recall
from needlescope.probes.registry import expand_with_probes, probe_module

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
SHARED = REPO.parent / "shared"


def made(config) -> list[int]:
    """Distinct cells each probe entry makes (a value listed twice makes the same cells)."""
    return [
        len({c.cell_id for c in probe_module(p.probe).expand(config, p)}) for p in config.probes
    ]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_counted_as_expand_makes_it_on_every_shipped_config(path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if "../corpora/" in text:  # a seed's own haystacks, which the user supplies: ../shared's
        if not (SHARED / "corpora").is_dir():
            pytest.skip("../shared/corpora is not here")
        path = tmp_path / path.name
        path.write_text(text.replace("../corpora/", f"{SHARED / 'corpora'}/"), encoding="utf-8")
    config = load_config(path)
    assert grid_sizes(config) == made(config)


def test_duplicates_and_variants_are_counted_as_made() -> None:
    config = parse_config(
        {
            "name": "x",
            "models": [
                {"name": "a", "provider": "local", "variants": {"t0": {}, "t1": {"top_p": 0.5}}},
                {"name": "j", "provider": "local", "under_test": False},
            ],
            "probes": [
                {
                    "probe": "recall",
                    "lengths": [400, 400, 800],
                    "length_unit": "chars",
                    "needle_counts": [2, 3],
                    "fillers": ["pattern", "noise", "pattern"],
                    "regions": ["whole", "head"],
                    "placements": ["even", "random"],
                    "repeats": 3,
                },
                {
                    "probe": "counting_stars",
                    "max_length": 900,
                    "steps": 7,
                    "languages": ["en", "zh"],
                    "fillers": ["prose-en", "prose-zh", "noise"],
                },
                {"probe": "goto", "line_counts": [5, 10], "orders": ["ordered"], "repeats": 2},
            ],
        }
    )
    counted = grid_sizes(config)
    assert counted == made(config)
    assert sum(counted) == len(expand_with_probes(config))


def test_a_billion_repeats_are_counted_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config(
        {
            "name": "x",
            "models": [{"name": "a", "provider": "local"}],
            "probes": [
                {
                    "probe": "recall",
                    "lengths": [100, 200],
                    "needle_counts": [1],
                    "repeats": 1_000_000_000,
                }
            ],
        }
    )

    def no_building(*_: object) -> None:
        raise AssertionError("counting a grid must not make its cells")

    monkeypatch.setattr(recall, "expand", no_building)
    assert grid_sizes(config) == [2_000_000_000]
