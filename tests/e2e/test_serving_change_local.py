"""A change of the local model's chat template between two epochs is listed in the next drift
summary: two one-cell sweeps, the second on a copy of the model whose chat template differs by
one letter (same length, so the file stays a valid GGUF)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlescope.provenance._gguf import chat_template
from needlescope.provenance.fingerprint import text_sha256
from needlescope.providers.local import default_gguf_path
from needlescope.warehouse.store import Warehouse

pytestmark = pytest.mark.e2e

CONFIG = """
name: served
seed: 5
models:
  - name: smol
    provider: local
    model: {path}
    concurrency: 1
probes:
  - probe: recall
    lengths: [200]
    length_unit: tokens
    needle_counts: [1]
    fillers: [pattern]
    repeats: 1
"""
OLD, NEW = b"named SmolLM, trained", b"named SmolLN, trained"


def test_a_changed_chat_template_is_listed_as_a_serving_change(
    cli, write_config, tmp_path: Path
) -> None:
    original = default_gguf_path()
    changed = tmp_path / "SmolLM2-edited.gguf"
    data = original.read_bytes()
    assert data.count(OLD) == 1
    changed.write_bytes(data.replace(OLD, NEW))
    assert chat_template(changed) == chat_template(original).replace("SmolLM,", "SmolLN,")

    wh = tmp_path / "wh"
    summaries = []
    for epoch, model in (("e1", original), ("e2", changed)):
        config = write_config(CONFIG.format(path=model), f"{epoch}.yaml")
        done = cli("run", str(config), "-w", str(wh), "--epoch", epoch, "--no-report", "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        summaries.append(json.loads(done.stdout))
    assert summaries[0]["serving_changes"] == {}
    lines = summaries[1]["serving_changes"]["smol"]
    old_hash = text_sha256(chat_template(original) or "")[:12]
    new_hash = text_sha256(chat_template(changed) or "")[:12]
    assert f"chat template hash changed ({old_hash} → {new_hash})" in lines
    assert any(line.startswith("GGUF file hash changed") for line in lines)
    assert any(line.startswith("model version SmolLM2-135M-Instruct.Q4_1.gguf →") for line in lines)

    con = Warehouse(wh).connect()
    try:
        stored = con.sql(
            "SELECT epoch, chat_template_sha256, llama_cpp FROM results ORDER BY epoch"
        ).fetchall()
    finally:
        con.close()
    assert [(e, h[:12]) for e, h, _ in stored] == [("e1", old_hash), ("e2", new_hash)]
    assert all(v and v.startswith("xllamacpp ") for _, _, v in stored)
