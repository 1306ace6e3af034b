"""The Counting-Stars experiment (configs/seed-counting-stars.yaml) on the real local model,
with the paper's haystacks from ../shared/corpora in place of the user's copies."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from needlescope.probes.counting_stars.counts import COUNTS, MISTAKEN
from needlescope.warehouse.store import Warehouse
from tests.conftest import REPO, SHARED
from tests.support import stars_paper as paper

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (SHARED / "corpora" / "paul_graham_essays").is_dir(), reason="../shared is absent"
    ),
]

CONFIG = REPO / "configs" / "seed-counting-stars.yaml"
ESSAYS = SHARED / "corpora" / "paul_graham_essays"
STONE = SHARED / "corpora" / "zh" / "the_story_of_the_stone.txt"
STARS = 16


def expected_prompt(prompt_version: str, length: int) -> str:
    """The prompt the paper's code would build for this cell, from the rules alone."""
    reasoning = "reasoning" in prompt_version
    if "-en-" in prompt_version:
        sky = paper.english_haystack(ESSAYS, int(length * 0.8))
        star = paper.STAR_EN_REASONING if reasoning else paper.STAR_EN
        ask = paper.ASK_EN_REASONING if reasoning else paper.ASK_EN
        language = "en"
    else:
        sky = paper.chinese_haystack(STONE, int(length * 0.7))
        star = paper.STAR_ZH_REASONING if reasoning else paper.STAR_ZH
        ask = paper.ASK_ZH_REASONING if reasoning else paper.ASK_ZH
        language = "zh"
    pairs = zip(COUNTS[:STARS], MISTAKEN[:STARS], strict=True)
    texts = [star.format(n=right, right=right, wrong=wrong) for right, wrong in pairs]
    return paper.papers_loop(sky, texts, language) + "\n\n\n\n" + ask


def test_seed_counting_stars_config_runs_in_the_papers_terms(cli, tmp_path: Path) -> None:
    text = CONFIG.read_text(encoding="utf-8").replace("../corpora/", f"{SHARED / 'corpora'}/")
    config = tmp_path / "seed-counting-stars.yaml"
    config.write_text(text, encoding="utf-8")
    wh = tmp_path / "wh"
    done = cli("run", str(config), "-w", str(wh), "--no-report")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    con = Warehouse(wh).connect()
    cells = con.execute(
        "SELECT prompt_version, length, filler_chars, prompt_sha256, prompt_length, expected,"
        " facts, probe_params FROM cells ORDER BY prompt_version, length"
    ).fetchall()
    assert [(c[0], c[1]) for c in cells] == [
        ("stars-en-paper", 300),
        ("stars-en-paper", 600),
        ("stars-reasoning-en-paper", 300),
        ("stars-reasoning-zh-paper", 300),
        ("stars-zh-paper", 300),
        ("stars-zh-paper", 600),
    ]
    for version, length, units, sha256, _, expected, facts, params in cells:
        assert units == int(length * (0.8 if "-en-" in version else 0.7))
        assert json.loads(expected) == list(COUNTS[:STARS])
        assert json.loads(params)["counts"] == "paper"
        if "reasoning" in version:
            assert json.loads(facts)["mistaken"] == list(MISTAKEN[:STARS])
        # What was sent is what the paper's code builds, byte for byte.
        assert sha256 == hashlib.sha256(expected_prompt(version, length).encode()).hexdigest()
    # Within the e2e tier's budget: ≤ 10 cells and ≤ 10K prompt tokens.
    assert sum(c[4] for c in cells) <= 10_000
    results = con.execute(
        "SELECT error_kind, parse_ok, accuracy, correct, missing FROM results"
    ).fetchall()
    assert len(results) == len(cells)
    for error_kind, parse_ok, accuracy, correct, missing in results:
        assert error_kind is None and parse_ok is not None
        # A reply with no list scores 0 (every star missed) and stays in the mean.
        assert accuracy is not None and 0 <= accuracy <= 100
        assert parse_ok or (accuracy, correct, missing) == (0, 0, STARS)
    stars_rows = con.execute("SELECT count(*) FROM stars_outcomes").fetchone()
    assert stars_rows == (len(cells) * STARS,)
    con.close()
