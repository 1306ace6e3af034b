"""SDK-free client for OpenAI-compatible chat completions (OpenAI, DeepSeek, vLLM, llama.cpp…)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.providers.http import HttpFailure, HttpProvider, wait_until
from needlescope.providers.http import as_dict as _dict
from needlescope.providers.http import retry_after_value as _retry_after_value
from needlescope.providers.registry import register

# "context_length_exceeded" / "maximum context length" (OpenAI, vLLM), "exceeds the available
# context size" (llama.cpp), "prompt is too long" (Anthropic-style proxies).
CONTEXT_TOO_LONG_RE = re.compile(r"context[ _](length|size)|too long")
_STATUS_KINDS = {429: base.RATE_LIMITED, 401: base.AUTH, 403: base.AUTH, 408: base.TIMEOUT}


@register("openai")
class OpenAIProvider(HttpProvider):
    """POSTs ``{base_url}/chat/completions``; every failure is a one-line ``ProviderError``.

    The only retry here: a 429 whose Retry-After is at most ``max_retry_after_s`` is waited out
    once and re-sent once. Everything else is raised for the orchestrator to retry.
    """

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 600,
        max_retry_after_s: float = 60,
        max_connections: int = 8,
        tokenize_url: str | None = None,
        apply_template_url: str | None = None,
    ) -> None:
        self.tokenize_url = tokenize_url
        self.apply_template_url = apply_template_url
        all_headers = dict(headers or {})
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        super().__init__(
            name=name,
            base_url=base_url.rstrip("/"),
            model=model,
            api_key=api_key,
            headers=all_headers,
            timeout_s=timeout_s,
            max_retry_after_s=max_retry_after_s,
            max_connections=max_connections,
        )

    def _complete_url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body ``complete`` sends for ``request``."""
        body: dict[str, Any] = {"model": self.model, "messages": _wire(request.messages)}
        if request.max_tokens is not None and "max_completion_tokens" not in request.extra:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        body.update(request.extra)
        return body

    async def count_tokens(self, text: str) -> int | None:
        if self.tokenize_url is None:
            return None
        return self._n_tokens(await self._post(self.tokenize_url, {"content": text}))

    async def count_prompt_tokens(self, messages: tuple[Message, ...]) -> int | None:
        if self.apply_template_url is None or self.tokenize_url is None:
            return None
        _, data = await self._post(self.apply_template_url, {"messages": _wire(messages)})
        prompt = _dict(data).get("prompt")
        if not isinstance(prompt, str):
            raise self._bad(base.BAD_RESPONSE, f"{self.apply_template_url} sent no 'prompt'")
        # As the server does for a chat request: BOS added if the model wants one, specials parsed.
        body = {"content": prompt, "add_special": True, "parse_special": True}
        return self._n_tokens(await self._post(self.tokenize_url, body))

    def _classify(self, status: int, headers: Mapping[str, str], text: str) -> HttpFailure:
        kind = _kind(status, text.lower())
        # OpenAI's "out of credit" is a 429 too, but waiting does not help.
        retryable = kind in base.RETRYABLE_KINDS and "insufficient_quota" not in text
        wait = _retry_after(headers) if kind == base.RATE_LIMITED and retryable else None
        return HttpFailure(kind, self._snippet(_detail(text)), retryable, wait)

    def _n_tokens(self, reply: tuple[int, Any]) -> int:
        tokens = _dict(reply[1]).get("tokens")
        if not isinstance(tokens, list):
            raise self._bad(base.BAD_RESPONSE, f"{self.tokenize_url} sent no 'tokens' list")
        return len(tokens)

    def _reply(self, status: int, data: Any, latency_s: float) -> Reply:
        choices = data.get("choices") if isinstance(data, dict) else None
        where = f"HTTP {status} from {self._where}"
        if not isinstance(choices, list):
            msg = f"{where}: reply has no 'choices': {self._snippet(json.dumps(data))}"
            raise self._bad(base.BAD_RESPONSE, msg, status)
        if not choices:
            raise self._bad(base.EMPTY_RESPONSE, f"{where}: reply has empty 'choices'", status)
        choice = _dict(choices[0])
        content = _dict(choice.get("message")).get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(_dict(p).get("text") or "" for p in content)
        usage = _dict(data.get("usage"))
        return Reply(
            text=content if isinstance(content, str) else "",
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            reasoning_tokens=_dict(usage.get("completion_tokens_details")).get("reasoning_tokens"),
            latency_s=latency_s,
            model_version=data.get("system_fingerprint") or data.get("model"),
        )


def _wire(messages: tuple[Message, ...]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _kind(status: int, body: str) -> str:
    if status in _STATUS_KINDS:
        return _STATUS_KINDS[status]
    if status < 500 and CONTEXT_TOO_LONG_RE.search(body):
        return base.CONTEXT_TOO_LONG
    if status >= 500:
        return base.SERVER_ERROR
    return base.BAD_REQUEST if status >= 400 else base.BAD_RESPONSE


def _detail(text: str) -> str:
    """The server's own error message (and code) out of an error body, else the body itself."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        message = str(err.get("message") or err.get("detail") or json.dumps(err))
        code = err.get("code")
        return f"{message} ({code})" if isinstance(code, str) and code not in message else message
    return str(err)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP-date)."""
    ms, value = headers.get("retry-after-ms"), headers.get("Retry-After")
    if not ms:
        return _retry_after_value(value)
    try:
        return max(0.0, float(ms) / 1000)
    except ValueError:  # an unreadable retry-after-ms: only an HTTP-date Retry-After counts
        return wait_until(value)
