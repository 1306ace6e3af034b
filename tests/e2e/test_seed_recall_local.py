"""The recall seed's experiment (configs/seed-recall.yaml) on the real local model, and prompts
built with --only-context for a model whose endpoint cannot be reached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlescope.warehouse.store import Warehouse

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SEED_PREFIX_BYTES = 326


def test_seed_recall_config_runs_in_the_seeds_terms(cli, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    done = cli("run", str(REPO / "configs" / "seed-recall.yaml"), "-w", str(wh), "--no-report")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    con = Warehouse(wh).connect()
    cells = con.execute(
        "SELECT length, length_budget, prompt_bytes, max_tokens, expected, placement, region "
        "FROM cells ORDER BY length"
    ).fetchall()
    assert len(cells) == 4
    for length, budget, prompt_bytes, max_tokens, expected, placement, region in cells:
        assert (budget, placement, region, max_tokens) == ("haystack", "seed", "0-1", None)
        values = json.loads(expected)
        assert len(values) == 40 and all(1000 <= v <= 9999 for v in values)
        # The seed's table name: the prompt's bytes, 326 + the a| haystack + 40 × 4 digits.
        assert prompt_bytes == SEED_PREFIX_BYTES + length + 40 * 4
    answered = con.execute(
        "SELECT count(*) FROM results WHERE error_kind IS NULL AND response IS NOT NULL"
    ).fetchone()
    assert answered == (4,)
    # Every reply is graded, a parse failure, or kept and said why it is not counted.
    kinds = con.execute(
        "SELECT count(*) FROM results WHERE parse_ok IS NULL AND uncounted IS NULL "
        "AND error_kind IS NULL"
    ).fetchone()
    assert kinds == (0,)


OFFLINE = """
name: offline
models:
  - name: far
    provider: openai
    base_url: http://127.0.0.1:9/v1
    model: some-model
    api_key_env: NEEDLESCOPE_TEST_UNSET_KEY
fillers:
  novels: {kind: corpus, path: novels, fit: none}
probes:
  - probe: recall
    prompts: [recall-seed]
    lengths: [300]
    length_unit: tokens
    length_budget: haystack
    needle_counts: [4]
  - probe: recall
    prompts: [recall-seed]
    fillers: [novels]
    length_unit: chars
    length_budget: haystack
    needle_counts: [3]
"""
NOVELS = {
    "a.txt": "It was 1805. Snow fell on Moscow.\n",
    "b.txt": "第一回 甄士隐梦幻识通灵。\n" * 3,
}


def test_only_context_needs_no_endpoint_and_no_key(cli, write_config, tmp_path: Path) -> None:
    config = write_config(OFFLINE)
    (tmp_path / "novels").mkdir()
    for name, text in NOVELS.items():
        (tmp_path / "novels" / name).write_text(text, encoding="utf-8")
    wh = tmp_path / "wh"
    done = cli("run", str(config), "-w", str(wh), "--only-context")
    assert done.returncode == 0, done.stderr[-3000:]
    con = Warehouse(wh).connect()
    rows = con.execute(
        "SELECT prompt_text, length_basis, length FROM cells WHERE length_unit = 'tokens'"
    ).fetchall()
    assert len(rows) == 1
    prompt, basis, length = rows[0]
    assert prompt.startswith("Please give me an answer worth $200")
    assert basis.startswith("estimated") and length == 300
    assert con.execute("SELECT count(*) FROM answers").fetchone() == (0,)
    # A corpus used as it is: a cell per file, the whole file, digits kept, its length stored.
    whole = con.execute(
        "SELECT length, prompt_bytes, prompt_text, json_extract_string(probe_params, '$.file')"
        " FROM cells WHERE length_unit = 'chars' ORDER BY 4"
    ).fetchall()
    assert [(r[0], r[3]) for r in whole] == [(len(t), n) for n, t in sorted(NOVELS.items())]
    for _, prompt_bytes, text, name in whole:
        assert prompt_bytes == SEED_PREFIX_BYTES + len(NOVELS[name].encode()) + 3 * 4
        assert "1805" in text if name == "a.txt" else "甄士隐" in text
