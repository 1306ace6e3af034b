"""SDK-free client for OpenAI-compatible chat completions (OpenAI, DeepSeek, vLLM, llama.cpp…).

A model with ``reasoning_params`` (OpenAI's o1/o3/o4/gpt-5) is sent ``max_completion_tokens``
and no ``temperature`` / ``top_p``, others ``max_tokens``; a model that thinks gets room for its
reasoning (``HttpProvider.output_limit``). Every finish reason of the API's types is mapped,
reasoning is never answer text, and a 200 whose body is an error raises the kind its code says.

Design: docs/design/providers.md#openai
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from needlescope.errors import ProviderError
from needlescope.provenance import served_by
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.providers.http import HttpFailure, HttpProvider, wait_until
from needlescope.providers.http import as_dict as _dict
from needlescope.providers.http import as_int as _int
from needlescope.providers.http import retry_after_value as _retry_after_value
from needlescope.providers.reasoning import (
    DEFAULT_REASONING_BUDGET,
    thinks_by_default,
    uses_openai_reasoning_params,
)
from needlescope.providers.registry import register

# "context_length_exceeded" / "maximum context length" (OpenAI, vLLM), "exceeds the available
# context size" (llama.cpp), "prompt is too long" (Anthropic-style proxies).
CONTEXT_TOO_LONG_RE = re.compile(r"context[ _](length|size)|too long")
# OpenAI's 429 for a request larger than the whole per-minute limit: "Request too large for
# gpt-4o … The input or output tokens must be reduced in order to run successfully."
REQUEST_TOO_LARGE_RE = re.compile(r"request too large|must be reduced in order to run")
_STATUS_KINDS = {
    429: base.RATE_LIMITED,
    401: base.AUTH,
    403: base.AUTH,
    408: base.TIMEOUT,
    413: base.REQUEST_TOO_LARGE,
}
_FINISH = {
    "stop": base.STOP,
    "length": base.LENGTH,
    "content_filter": base.CONTENT_FILTER,
    "tool_calls": base.TOOL_CALLS,
    "function_call": base.TOOL_CALLS,  # deprecated, still in the API's type
}
# Error codes (``error.code``) of a body without a status of its own.
_CODE_KINDS = {
    "rate_limit_exceeded": base.RATE_LIMITED,
    "server_error": base.SERVER_ERROR,
    "context_length_exceeded": base.CONTEXT_TOO_LONG,
}
_REASONING_FIELDS = ("reasoning_content", "reasoning")  # DeepSeek/vLLM, OpenRouter/newer vLLM
_TEXT_PARTS = (None, "text", "output_text")


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
        reasoning: bool | None = None,
        reasoning_budget: int = DEFAULT_REASONING_BUDGET,
        reasoning_params: bool | None = None,
        service_tier: str | None = None,
    ) -> None:
        self.service_tier = service_tier  # "flex": batch prices, slower answers
        self.tokenize_url = tokenize_url
        self.apply_template_url = apply_template_url
        self.reasoning_params = (
            uses_openai_reasoning_params(model) if reasoning_params is None else reasoning_params
        )
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
            reasoning=thinks_by_default("openai", model) if reasoning is None else reasoning,
            reasoning_budget=reasoning_budget,
        )

    def _complete_url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body ``complete`` sends for ``request``."""
        body: dict[str, Any] = {"model": self.model, "messages": _wire(request.messages)}
        extra = dict(request.extra)
        limit = self.output_limit(request)
        if limit is not None and not {"max_tokens", "max_completion_tokens"} & set(extra):
            body["max_completion_tokens" if self.reasoning_params else "max_tokens"] = limit
        if self.reasoning_params:  # rejected by reasoning models ("Unsupported parameter")
            extra.pop("temperature", None)
            extra.pop("top_p", None)
        elif request.temperature is not None:
            body["temperature"] = request.temperature
        if self.service_tier is not None:
            body["service_tier"] = self.service_tier
        if request.cache is not None:
            body["prompt_cache_key"] = request.cache.key
        body.update(extra)
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
        if status == 429 and REQUEST_TOO_LARGE_RE.search(text.lower()):
            kind = base.REQUEST_TOO_LARGE  # larger than the whole limit: waiting cannot help
        # OpenAI's "out of credit" is a 429 too, but waiting does not help.
        retryable = kind in base.RETRYABLE_KINDS and "insufficient_quota" not in text
        wait = _retry_after(headers) if kind == base.RATE_LIMITED and retryable else None
        return HttpFailure(kind, self._snippet(_detail(text)), retryable, wait)

    def _n_tokens(self, reply: tuple[int, Any]) -> int:
        tokens = _dict(reply[1]).get("tokens")
        if not isinstance(tokens, list):
            raise self._bad(base.BAD_RESPONSE, f"{self.tokenize_url} sent no 'tokens' list")
        return len(tokens)

    def _reply(self, status: int, data: Any, latency_s: float | None) -> Reply:
        choices = data.get("choices") if isinstance(data, dict) else None
        where = f"HTTP {status} from {self._where}"
        if isinstance(data, dict) and data.get("error") is not None and not choices:
            raise self._body_error(status, data.get("error"))
        if not isinstance(choices, list):
            msg = f"{where}: reply has no 'choices': {self._snippet(json.dumps(data))}"
            raise self._bad(base.BAD_RESPONSE, msg, status)
        if not choices:
            raise self._bad(base.EMPTY_RESPONSE, f"{where}: reply has empty 'choices'", status)
        choice = _dict(choices[0])
        finish = choice.get("finish_reason")
        if finish == "error":  # OpenRouter: the upstream failed mid-generation
            raise self._body_error(status, choice.get("error") or data.get("error"), finish)
        message = _dict(choice.get("message"))
        text, thinking = _visible(message.get("content"))
        thinking += "".join(t for f in _REASONING_FIELDS if isinstance(t := message.get(f), str))
        finish_reason = _FINISH.get(finish, finish) if isinstance(finish, str) else None
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip():
            text, finish_reason = text or refusal, base.REFUSAL
        usage = _dict(data.get("usage"))
        cached = _int(_dict(usage.get("prompt_tokens_details")).get("cached_tokens"))
        if cached is None:
            cached = _int(usage.get("prompt_cache_hit_tokens"))  # DeepSeek's own field
        return Reply(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            reasoning_tokens=_int(
                _dict(usage.get("completion_tokens_details")).get("reasoning_tokens")
            ),
            latency_s=latency_s,
            # The model that answered; its backend (system_fingerprint) is the fingerprint's.
            model_version=served_by(data).model_version,
            cached_tokens=cached,
            reasoned=bool(thinking.strip()),
        )

    def _body_error(self, status: int, error: Any, finish: str | None = None) -> ProviderError:
        """A 2xx whose body carries an error: the kind its code says, else ``provider_error``."""
        err = _dict(error)
        detail = self._snippet(_detail(json.dumps({"error": err}))) if err else ""
        what = (
            "the reply ended in an error (finish_reason 'error')"
            if finish
            else "error in the reply"
        )
        message = f"HTTP {status} from {self._where}: {what}" + (f": {detail}" if detail else "")
        number = _status_code(err.get("code"))
        named = _CODE_KINDS.get(str(err.get("code"))) or _CODE_KINDS.get(str(err.get("type")))
        if number is not None and number >= 400:
            failure = self._classify(number, {}, json.dumps({"error": err}))
            kind, retryable = failure.kind, failure.retryable
        elif named is not None:
            kind, retryable = named, named in base.RETRYABLE_KINDS
        else:
            kind, retryable = base.PROVIDER_ERROR, True
        return ProviderError(kind, self._scrub(message), retryable=retryable, status=status)


def _status_code(code: Any) -> int | None:
    """An error body's numeric ``code`` (OpenRouter's 429, 502…), or None."""
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    # isdigit() passes "²", which int() refuses; isdecimal() is what int() reads
    return int(code) if isinstance(code, str) and code.isdecimal() else None


def _visible(content: Any) -> tuple[str, str]:
    """(answer text, reasoning text) of a message's content: a string or a list of parts.

    Reasoning parts and a leading ``<think>…</think>`` (an unclosed one: all of it) are
    reasoning, never answer text.
    """
    thinking = ""
    if isinstance(content, list):
        parts = [_dict(p) for p in content]
        text = "".join(
            t for p in parts if p.get("type") in _TEXT_PARTS and isinstance(t := p.get("text"), str)
        )
        thinking = "".join(
            str(p.get("thinking") or p.get("reasoning") or p.get("text") or "")
            for p in parts
            if p.get("type") not in _TEXT_PARTS
        )
    else:
        text = content if isinstance(content, str) else ""
    stripped = text.lstrip()
    if stripped.startswith("<think>"):
        inner, closed, rest = stripped[len("<think>") :].partition("</think>")
        thinking += inner
        text = rest if closed else ""
    return text, thinking


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
