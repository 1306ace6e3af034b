"""The Little Retrieval Test's experiment (configs/seed-goto.yaml) on the real local model: the
prompts sent are the seed's files, and the replies are read the seed's way."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from needlescope.warehouse.store import Warehouse

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
INSTRUCTION = (
    "[EXECUTE THIS]: Go to line {k} and report only REGISTER_CONTENT, without any context or "
    "additional text, just the number, then EXIT"
)
BLOCK = 10


def seed_prompt(values: list[int], shown: list[int], k: int) -> str:
    """The seed's prompt from the file's draws: its list of entries (the header, then each
    line as shown), the instruction inserted at index k − 1, joined, last newline dropped."""
    entries = ["Testing Long Context\n\n"]
    entries += [f"line {i}: REGISTER_CONTENT is <{values[i - 1]}>\n" for i in shown]
    entries.insert(k - 1, INSTRUCTION.format(k=k) + "\n")
    return "Here are the file contents:\n" + "".join(entries)[:-1]


def test_seed_goto_config_runs_in_the_seeds_terms(cli, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    done = cli("run", str(REPO / "configs" / "seed-goto.yaml"), "-w", str(wh), "--no-report")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    con = Warehouse(wh).connect()
    cells = con.execute(
        "SELECT length, prompt_version, probe_params, max_tokens, prompt_length, prompt_sha256, "
        "expected, facts FROM cells ORDER BY length, probe_params"
    ).fetchall()
    assert len(cells) == 6
    assert sum(row[4] for row in cells) <= 10_000  # prompt tokens, chat template included
    orders = set()
    for n, prompt, params_json, max_tokens, _, sha, expected, facts_json in cells:
        params, facts = json.loads(params_json), json.loads(facts_json)
        assert (prompt, max_tokens, params["instruction_at"]) == ("goto-seed", 10, "seed")
        values, shown, k = facts["line_values"], facts["shown_order"], facts["k"]
        assert len(values) == n and all(1 <= v <= 50_000 for v in values)
        assert json.loads(expected) == values[k - 1]
        # The prompt sent is the seed's, byte for byte.
        assert hashlib.sha256(seed_prompt(values, shown, k).encode()).hexdigest() == sha
        if params["order"] == "shuffled":
            assert params["shuffle_block"] == BLOCK
            starts = shown[::BLOCK]
            assert sorted(starts) == list(range(1, n + 1, BLOCK))
            for start, at in zip(starts, range(0, n, BLOCK), strict=True):
                assert shown[at : at + BLOCK] == list(range(start, start + BLOCK))
        else:
            assert shown == list(range(1, n + 1)) and "shuffle_block" not in params
        orders.add((params["order"], shown == sorted(shown)))
    # This config's seed shuffles every shuffled file for real.
    assert orders == {("ordered", True), ("shuffled", False)}

    replies = con.execute(
        "SELECT response, parse_ok, answered, accuracy, expected FROM results "
        "WHERE error_kind IS NULL"
    ).fetchall()
    assert len(replies) == 6
    for response, parse_ok, answered, accuracy, expected in replies:
        # Read the seed's way: the first run of digits, whatever surrounds it.
        digits = re.search(r"\d+", response)
        if digits is None:
            assert (parse_ok, answered, accuracy) == (False, None, None)
        else:
            assert parse_ok is True and json.loads(answered) == int(digits.group())
            assert accuracy == (100.0 if int(digits.group()) == json.loads(expected) else 0.0)
    # Every reply is in the success rate, or counted apart as invalid (the 135M model's prose is
    # usually cut by the seed's 10-token budget: truncated).
    success = con.execute(
        'SELECT "order", shuffle_block, sum(answers), sum(invalid) FROM goto_success '
        "GROUP BY ALL ORDER BY 1"
    ).fetchall()
    invalid = dict(
        con.execute(
            "SELECT json_extract_string(probe_params, '$.order'), count(*) FROM results "
            "WHERE error_kind IS NULL AND validity NOT IN ('valid', 'unknown') GROUP BY 1"
        ).fetchall()
    )
    assert success == [
        ("ordered", None, 3 - invalid.get("ordered", 0), invalid.get("ordered", 0)),
        ("shuffled", BLOCK, 3 - invalid.get("shuffled", 0), invalid.get("shuffled", 0)),
    ]
