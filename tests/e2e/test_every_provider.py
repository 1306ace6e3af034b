"""One sweep over every provider: openai, anthropic and gemini (each against a local server that
speaks its wire format) and the real local model; the report compares them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from needlescope.warehouse.store import Warehouse
from tests.support.anthropic_server import FakeAnthropicServer
from tests.support.gemini_server import FakeGeminiServer
from tests.support.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e

KEYS = {
    "NS_OPENAI_KEY": "sk-o-1234567890",
    "NS_ANTHROPIC_KEY": "sk-ant-1234567890",
    "NS_GEMINI_KEY": "AIza-1234567890",
}


def _prompt_text(body: dict[str, Any]) -> str:
    if "contents" in body:  # gemini
        return " ".join(p.get("text", "") for c in body["contents"] for p in c["parts"])
    content = body["messages"][-1]["content"]
    if isinstance(content, list):  # anthropic content blocks
        return " ".join(block.get("text", "") for block in content)
    return str(content)


def perfect(body: dict[str, Any]) -> str:
    """Every needle of the prompt, in order: what a flawless model would answer."""
    haystack = _prompt_text(body).split("<text>")[1].split("</text>")[0]
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def config_text(openai_url: str, anthropic_url: str, gemini_url: str) -> str:
    return f"""
name: providers
seed: 2
models:
  - {{name: gpt-fake, provider: openai, base_url: "{openai_url}", model: gpt-x,
      api_key_env: NS_OPENAI_KEY}}
  - {{name: claude-fake, provider: anthropic, base_url: "{anthropic_url}", model: claude-fake-1,
      api_key_env: NS_ANTHROPIC_KEY}}
  - {{name: gemini-fake, provider: gemini, base_url: "{gemini_url}", model: gemini-fake,
      api_key_env: NS_GEMINI_KEY}}
  - {{name: smol, provider: local}}
probes:
  - probe: recall
    lengths: [600, 900]
    length_unit: chars
    needle_counts: [2]
  - probe: recall
    lengths: [150]
    length_unit: tokens
    needle_counts: [2]
    fillers: [prose-en]   # the fake servers count words: a| has none to count
"""


def test_one_sweep_compares_every_provider(cli, tmp_path: Path) -> None:
    wh, report = tmp_path / "wh", tmp_path / "report"
    with (
        FakeOpenAIServer(perfect, api_key=KEYS["NS_OPENAI_KEY"]) as openai,
        FakeAnthropicServer(perfect, api_key=KEYS["NS_ANTHROPIC_KEY"]) as anthropic,
        FakeGeminiServer(perfect, api_key=KEYS["NS_GEMINI_KEY"]) as gemini,
    ):
        config = tmp_path / "providers.yaml"
        config.write_text(config_text(openai.base_url, anthropic.url, gemini.url))
        done = cli("run", str(config), "-w", str(wh), "--report-dir", str(report), extra_env=KEYS)
        assert done.returncode == 0, done.stderr[-3000:]
        # One answer request per cell (the anthropic server also counts token-counting calls).
        assert (openai.requests, anthropic.message_requests, gemini.requests) == (3, 3, 3)
    con = Warehouse(wh).connect()
    rows = con.execute(
        "SELECT model, count(*), min(accuracy), min(prompt_tokens) FROM results "
        "WHERE length_unit = 'chars' GROUP BY model"
    ).fetchall()
    by_model = {model: (n, accuracy, tokens) for model, n, accuracy, tokens in rows}
    assert set(by_model) == {"gpt-fake", "claude-fake", "gemini-fake", "smol"}
    for model in ("gpt-fake", "claude-fake", "gemini-fake"):
        n, accuracy, tokens = by_model[model]
        assert (n, accuracy) == (2, 100.0) and tokens is not None and tokens > 0
    # Every model's prompts hold the same needles at the same places: the cells pair up.
    pairs = con.execute("SELECT count(DISTINCT context_id), count(*) FROM cells").fetchall()
    assert pairs == [(3, 12)]
    # Token-sized cells: fitted by each provider's own token counting where it has one.
    tokens = {
        model: (basis, planned, reported)
        for model, basis, planned, reported in con.execute(
            "SELECT model, length_basis, planned_tokens, prompt_tokens FROM results "
            "WHERE length_unit = 'tokens'"
        ).fetchall()
    }
    assert tokens["gpt-fake"][0].startswith("estimated")
    for model in ("claude-fake", "gemini-fake", "smol"):
        basis, planned, reported = tokens[model]
        assert basis == "tokenizer"
        assert 140 <= planned <= 150 and reported == planned, (model, planned, reported)
    page = (report / "report.html").read_text(encoding="utf-8")
    for model in by_model:
        assert model in page
    for key in KEYS.values():
        assert key not in page and key not in done.stdout + done.stderr
