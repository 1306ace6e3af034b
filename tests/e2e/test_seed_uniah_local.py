"""U-NIAH's experiment (configs/seed-uniah.yaml) on the real local model: its three messages,
its cl100k length budget, its RAG mode and its judge, rebuilt from the warehouse and checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlescope.fitting import tokens
from needlescope.haystack._fillers import SyntheticProseFiller
from needlescope.probes.base import prompt_sha256
from needlescope.probes.build import rebuild
from needlescope.probes.cases import probe as cases
from needlescope.probes.cases import uniah
from needlescope.probes.rag import probe as rag
from needlescope.warehouse.report.drilldown import cell_of
from needlescope.warehouse.store import Warehouse

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PROSE = SyntheticProseFiller("en", 0)  # the config's prose-en filler
PROMPT_TOKENS_MAX = 10_000


def test_seed_uniah_config_runs_in_uniahs_terms(cli, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    done = cli("run", str(REPO / "configs" / "seed-uniah.yaml"), "-w", str(wh), "--no-report")
    assert done.returncode == 0, done.stderr[-3000:]
    con = Warehouse(wh).connect()
    cursor = con.execute("SELECT * FROM cells ORDER BY probe, length, facts")
    names = [d[0] for d in cursor.description]
    cells = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    assert [(c["probe"], c["prompt_version"]) for c in cells] == [
        *[("cases", "uniah")] * 4,
        *[("rag", "uniah-rag")] * 2,
    ]
    for row in cells:
        assert (row["length_budget"], row["length_basis"]) == ("seed", "cl100k_base")
        cell, module = cell_of(row)
        facts = json.loads(row["facts"])
        if module is cases:
            rendered = rebuild(
                cases, cell, PROSE, "prose", row["filler_chars"], row["prompt_length"]
            ).rendered
            case = cases.case_of(cell)
            assert rendered.messages == uniah.messages(rendered.haystack_text, case.question)
            # Haystack and needles fill the length less the 200-token buffer, in cl100k.
            assert row["length"] - 200 - 3 <= tokens.count(rendered.haystack_text)
            assert tokens.count(rendered.haystack_text) <= row["length"] - 200 + 3
            if facts["depth"] == 100.0:
                assert rendered.haystack_text.endswith(case.needles[-1].text)
        else:
            rendered = rag.rebuild(cell, PROSE, "prose", row["filler_chars"], facts)
            assert rendered.prompt_text.startswith(
                "Use the following pieces of context to answer the question at the end."
            )
            if facts["mode"] == "half":
                assert facts["cut"]["tokens"] > 0
        assert prompt_sha256(rendered) == row["prompt_sha256"]  # what was sent, rebuilt

    results = con.execute(
        "SELECT probe, error_kind, response, judge_score, detail, prompt_tokens FROM results"
    ).fetchall()
    assert len(results) == 6
    spent = 0
    for probe, error_kind, response, score, detail_text, prompt_tokens in results:
        assert error_kind is None and response is not None, probe
        detail = json.loads(detail_text)
        assert detail["judge_version"] == "uniah-judge" and detail["judge_model"]
        assert 1 <= detail["judge_tries"] <= 3
        if score is None:  # U-NIAH's -1: kept as an unreadable judgment, never a number
            assert detail["judge_unreadable"] is True and detail["judge_tries"] == 3
        else:
            assert 1 <= score <= 10
        spent += (prompt_tokens or 0) + (detail["judge_prompt_tokens"] or 0)
    assert 0 < spent <= PROMPT_TOKENS_MAX  # the answers' prompts and every judge's try
