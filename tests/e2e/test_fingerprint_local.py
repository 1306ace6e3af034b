"""The local model's fingerprint agrees with what its own llama.cpp server says: the chat
template read from the GGUF header is the one the server applies, and a reply names the model
by its file."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from needlescope.provenance import fingerprint as fp
from needlescope.provenance._gguf import chat_template
from needlescope.providers.local import LocalServer, default_gguf_path

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(ctx_per_slot=512) as srv:
        yield srv


def _get(url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=60) as response:
        return json.load(response)


def test_the_chat_template_is_the_one_the_server_applies(server: LocalServer) -> None:
    props = _get(f"{server.url}/props")
    template = chat_template(default_gguf_path())
    assert template == props["chat_template"]
    local = fp.local_serving(server.model_path, "0" * 64)
    assert local.chat_template_sha256 == fp.text_sha256(props["chat_template"])


def test_a_local_reply_names_the_model_by_its_file(server: LocalServer) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}
    reply = _get(f"{server.base_url}/chat/completions", body)
    served = fp.served_by(reply)
    assert served.model_version == default_gguf_path().name
    assert served.system_fingerprint == reply["system_fingerprint"]  # llama.cpp's build
    assert fp.sampling_sent(body) == '{"max_tokens":2,"temperature":0}'
