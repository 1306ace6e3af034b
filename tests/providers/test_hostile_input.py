"""Hostile input that is not a config: reply text no store can hold as it is, credentials in
a URL (issue 16, items 4 and 6)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from needlescope.config._sweep import ModelConfig, parse_config
from needlescope.errors import ConfigError, ProviderError
from needlescope.haystack._text import storable, storable_values
from needlescope.providers.reachability import check_reachable

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("\ud800", "\ufffd"),
        ("a\udcff b", "a\ufffd b"),  # an undecodable byte, as Python keeps it
        ("\ude00\ud83d", "\ufffd\ufffd"),  # a pair in the wrong order
        ("\ud83d\ude00", "\U0001f600"),  # a pair in the right order: the character it encodes
        ("ok é\x00\uffff", "ok é\x00\uffff"),  # UTF-8 holds these: kept
    ],
)
def test_storable_replaces_only_what_utf8_cannot_hold(text: str, stored: str) -> None:
    assert storable(text) == stored
    stored.encode("utf-8")
    row, repaired = storable_values({"response": text, "n": 1})
    assert row == {"response": stored, "n": 1} and repaired == (stored != text)


def test_grade_prints_a_repaired_answer_not_a_traceback() -> None:
    done = subprocess.run(
        [
            str(BIN / "needlescope"),
            "grade",
            "recall",
            "--expected",
            '{"1": 1234}',
            "--answer",
            '{"1": "\\ud800"}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    out = json.loads(done.stdout)
    assert out["answered"] == ["\ufffd"] and out["response_repaired"] is True
    assert out["accuracy"] == 0.0


def credentials_config(**fields: object) -> dict[str, object]:
    model = {
        "name": "m",
        "provider": "openai",
        "model": "x",
        "base_url": "https://evaluator:top-secret-pw@api.example/v1",
        **fields,
    }
    return {
        "name": "c",
        "models": [model],
        "probes": [{"probe": "recall", "lengths": [400], "needle_counts": [1]}],
    }


def test_url_credentials_never_leave_the_config_object() -> None:
    config = parse_config(credentials_config())
    assert config.models[0].base_url == "https://evaluator:top-secret-pw@api.example/v1"
    stored = config.model_dump_json()
    assert "top-secret-pw" not in stored and "evaluator" not in stored
    assert "https://api.example/v1" in stored


@pytest.mark.parametrize(
    "fields",
    [{"api_key_env": "K"}, {"api_key_secret": "k"}, {"headers": {"authorization": "Bearer x"}}],
)
def test_url_credentials_beside_a_key_are_a_config_error(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(credentials_config(**fields), "x.yaml")
    assert "credentials in the URL" in str(caught.value)
    assert "top-secret-pw" not in str(caught.value)


def test_an_unreachable_url_is_shown_without_its_credentials() -> None:
    model = ModelConfig(
        name="m",
        provider="openai",
        model="x",
        base_url="http://evaluator:top-secret-pw@127.0.0.1:9/v1",
    )
    with pytest.raises(ProviderError) as caught:
        asyncio.run(check_reachable(model, timeout_s=5))
    assert "cannot reach http://127.0.0.1:9/v1" in str(caught.value)
    assert "top-secret-pw" not in str(caught.value)


def test_url_credentials_are_sent_as_basic_auth_and_kept_out_of_messages() -> None:
    from needlescope.providers.base import ChatRequest, Message
    from needlescope.providers.registry import create_provider
    from tests.support.openai_server import FakeOpenAIServer

    async def ask() -> tuple[object, str]:
        async with FakeOpenAIServer(script=["server_error"]) as server:
            url = server.base_url.replace("http://", "http://evaluator:top-secret-pw@")
            provider = create_provider(
                "openai",
                name="m",
                base_url=url,
                model="x",
                api_key=None,
                headers={},
                timeout_s=10,
                max_retry_after_s=0,
                max_connections=1,
            )
            try:
                with pytest.raises(ProviderError) as caught:
                    await provider.complete(ChatRequest((Message("user", "hi"),)))
            finally:
                await provider.aclose()
            return (server.last_headers or {}).get("Authorization"), f"{caught.value} {provider!r}"

    sent, shown = asyncio.run(ask())
    assert sent == "Basic ZXZhbHVhdG9yOnRvcC1zZWNyZXQtcHc="  # evaluator:top-secret-pw
    assert "top-secret-pw" not in shown and "evaluator" not in shown
