"""A nightly epoch compared with the one before it, on the same cells, in the flow's result."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support.openai_server import FakeOpenAIServer

ENV = {"NS_FAKE_KEY": "sk-drift-1"}
CONFIG = """
name: drift
seed: 4
models:
  - {{name: fake, provider: openai, base_url: "{url}", model: m, api_key_env: NS_FAKE_KEY,
      concurrency: 8}}
probes:
  - probe: recall
    lengths: [500, 900]
    length_unit: chars
    needle_counts: [4, 6]
    fillers: [pattern, noise]
    repeats: 3
"""


def needles(body: dict[str, Any]) -> list[int]:
    haystack = body["messages"][-1]["content"].split("<text>")[1].split("</text>")[0]
    return [int(n) for n in re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)]


def perfect(body: dict[str, Any]) -> str:
    return json.dumps({str(i + 1): n for i, n in enumerate(needles(body))})


def forgetful(body: dict[str, Any]) -> str:
    """Drops the last two needles: a model that got worse overnight."""
    return json.dumps({str(i + 1): n for i, n in enumerate(needles(body)[:-2])})


def run(cli: Any, config: Path, wh: Path, epoch: str) -> dict[str, Any]:
    done = cli(
        "run", str(config), "-w", str(wh), "--epoch", epoch, "--no-report", "--json", extra_env=ENV
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def test_a_drop_between_epochs_is_flagged_and_a_repeat_is_not(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect) as server:
        config = write_config(CONFIG.format(url=server.base_url))
        first = run(cli, config, wh, "drift-2026-11-20")
        assert first["drift"] == [
            {**first["drift"][0], "model": "fake", "previous": None, "drift": False}
        ]
        same = run(cli, config, wh, "drift-2026-11-21")
        (entry,) = same["drift"]
        assert entry["previous"] == "drift-2026-11-20" and entry["n_pairs"] == 24
        assert entry["diff"] == 0 and entry["drift"] is False
        server.responder = forgetful
        worse = run(cli, config, wh, "drift-2026-11-22")
    (entry,) = worse["drift"]
    assert entry["previous"] == "drift-2026-11-21" and entry["n_pairs"] == 24
    assert entry["mean_previous"] == 100.0 and entry["mean_now"] < 70
    assert entry["hi"] < 0 and entry["drift"] is True
