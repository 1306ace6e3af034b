"""SDK-free client for Anthropic's Messages API (``POST /v1/messages``) and its token counter.

Replies, as the API types define them: every ``stop_reason`` (``end_turn``, ``stop_sequence``,
``max_tokens``, ``tool_use``, ``pause_turn``, ``refusal``, ``model_context_window_exceeded``)
is mapped, an unknown one kept verbatim; ``thinking`` / ``redacted_thinking`` blocks are never
answer text, and their tokens come from ``usage.output_tokens_details.thinking_tokens`` (they
are inside ``output_tokens``, which bills them); ``cache_read_input_tokens`` are the cached
prompt tokens. A 200 whose body is an error envelope raises the kind its type says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from needlescope.errors import ProviderError
from needlescope.providers import base
from needlescope.providers.base import CachePrefix, ChatRequest, Message, Reply
from needlescope.providers.http import HttpFailure, HttpProvider, retry_after_value
from needlescope.providers.http import as_dict as _dict
from needlescope.providers.http import as_int as _int
from needlescope.providers.reasoning import DEFAULT_REASONING_BUDGET, anthropic_thinking
from needlescope.providers.registry import register

DEFAULT_MAX_TOKENS = 1024  # the API requires max_tokens; used when a request sets none
# "prompt is too long: 210000 tokens > 200000 maximum", "input length and `max_tokens` exceed
# context limit: …", "too many tokens" (proxies).
CONTEXT_TOO_LONG_RE = re.compile(
    r"prompt is too long|too many (input )?tokens|context[ _-]?(limit|length|window|size)"
)
_STATUS_KINDS = {
    429: base.RATE_LIMITED,
    401: base.AUTH,  # authentication_error
    402: base.AUTH,  # billing_error: the account, not the request, must change
    403: base.AUTH,  # permission_error
    408: base.TIMEOUT,
    413: base.REQUEST_TOO_LARGE,  # request_too_large: the body is over the size limit
}
_TYPE_KINDS = {  # the error envelope's type, for a status the table above does not name
    "rate_limit_error": base.RATE_LIMITED,
    "overloaded_error": base.SERVER_ERROR,
    "api_error": base.SERVER_ERROR,
    "timeout_error": base.TIMEOUT,
    "authentication_error": base.AUTH,
    "permission_error": base.AUTH,
    "billing_error": base.AUTH,
    "request_too_large": base.REQUEST_TOO_LARGE,
}
_FINISH = {  # every StopReason of the API's types
    "end_turn": base.STOP,
    "stop_sequence": base.STOP,
    "max_tokens": base.LENGTH,
    "tool_use": base.TOOL_CALLS,
    "pause_turn": base.PAUSE_TURN,
    "refusal": base.REFUSAL,
    "model_context_window_exceeded": base.CONTEXT_EXCEEDED,
}
# stop_reasons under which an empty content list is an answer, not a glitch to retry.
_EMPTY_IS_AN_ANSWER = frozenset(
    {"max_tokens", "refusal", "model_context_window_exceeded", "pause_turn"}
)
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_CACHE_FIELDS = ("cache_creation_input_tokens", "cache_read_input_tokens")
_UNSUPPORTED = ("seed",)  # generation settings the Messages API rejects ("Extra inputs…")


@register("anthropic")
class AnthropicProvider(HttpProvider):
    """POSTs ``{base_url}/v1/messages``; every failure is a one-line ``ProviderError``.

    System messages go to the top-level ``system`` field; ``request.extra`` is merged into the
    body last, so ``thinking``, ``top_k``, ``stop_sequences``… pass through. With thinking on,
    ``max_tokens`` is the answer's budget: ``thinking.budget_tokens`` is added to it (the API
    counts thinking against max_tokens and wants it larger than the budget), and temperature is
    not sent (the API allows none but 1 with thinking). An explicit ``extra["max_tokens"]`` or
    ``extra["temperature"]`` still wins.

    The only retry here: a 429 whose retry-after is at most ``max_retry_after_s`` is waited out
    once and re-sent once (token counting too: its rate limit is its own). Everything else is
    raised for the orchestrator to retry; ``x-should-retry: false`` makes a failure final.
    """

    kind = "anthropic"

    def __init__(
        self,
        *,
        name: str,
        base_url: str | None = "https://api.anthropic.com",
        model: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 600,
        max_retry_after_s: float = 60,
        max_connections: int = 8,
        anthropic_version: str = "2023-06-01",
        reasoning: bool | None = None,
        reasoning_budget: int = DEFAULT_REASONING_BUDGET,
    ) -> None:
        all_headers = dict(headers or {})
        if not any(k.lower() == "anthropic-version" for k in all_headers):
            all_headers["anthropic-version"] = anthropic_version
        if api_key:
            all_headers = {k: v for k, v in all_headers.items() if k.lower() != "x-api-key"}
            all_headers["x-api-key"] = api_key
        base_url = (base_url or "https://api.anthropic.com").rstrip("/")
        super().__init__(
            name=name,
            base_url=base_url.removesuffix("/v1"),  # "…/v1" as OpenAI-style configs write it
            model=model,
            api_key=api_key,
            headers=all_headers,
            timeout_s=timeout_s,
            max_retry_after_s=max_retry_after_s,
            max_connections=max_connections,
            reasoning=bool(reasoning),
            reasoning_budget=reasoning_budget,
        )

    def _complete_url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body ``complete`` sends for ``request``."""
        extra = {k: v for k, v in request.extra.items() if k not in _UNSUPPORTED}
        thinking = anthropic_thinking(extra)
        thinking_on = bool(thinking) and thinking.get("type") != "disabled"
        answer = DEFAULT_MAX_TOKENS if request.max_tokens is None else request.max_tokens
        max_tokens = self.output_limit(ChatRequest(request.messages, answer, extra=extra))
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens}
        body.update(_prompt(request.messages, request.cache))
        if request.temperature is not None and not thinking_on:
            body["temperature"] = request.temperature
        body.update(extra)
        return body

    async def count_tokens(self, text: str) -> int | None:
        """Input tokens of one user message holding ``text`` (the message framing included)."""
        if not text:
            return 0  # the API refuses an empty text block
        return await self.count_prompt_tokens((Message("user", text),))

    async def count_prompt_tokens(self, messages: tuple[Message, ...]) -> int | None:
        if messages and not any(m.content for m in messages):
            # The API refuses a message without content ("all messages must have non-empty
            # content"), yet a builder measures an empty prompt for its framing alone (rag,
            # to subtract it from each passage's count): one character's prompt, less it.
            framed = await self.count_prompt_tokens(
                (*messages[:-1], Message(messages[-1].role, "."))
            )
            return None if framed is None else max(0, framed - 1)
        url = f"{self.base_url}/v1/messages/count_tokens"
        body = {"model": self.model, **_prompt(messages)}
        status, data, _ = await self._send(url, body)
        tokens = _dict(data).get("input_tokens")
        if not _is_int(tokens):
            snippet = self._snippet(json.dumps(data))
            msg = (
                f"HTTP {status} from {self._where}: count_tokens sent no 'input_tokens': {snippet}"
            )
            raise self._bad(base.BAD_RESPONSE, msg, status)
        return tokens

    def _classify(self, status: int, headers: Mapping[str, str], text: str) -> HttpFailure:
        detail, error_type, request_id = _detail(text)
        kind = _kind(status, error_type, detail.lower())
        request_id = headers.get("request-id") or request_id
        suffix = f" [{request_id}]" if request_id else ""
        # A 429 for a spent monthly limit has the rate limit's type, but waiting does not help.
        retryable = kind in base.RETRYABLE_KINDS and "spend_limit" not in text.lower()
        if headers.get("x-should-retry", "").lower() == "false":
            retryable = False  # the API says so (the SDKs honour this header too)
        wait = _retry_after(headers) if retryable else None
        return HttpFailure(kind, f"{self._snippet(detail)}{suffix}", retryable, wait)

    def _reply(self, status: int, data: Any, latency_s: float | None) -> Reply:
        content = data.get("content") if isinstance(data, dict) else None
        where = f"HTTP {status} from {self._where}"
        if isinstance(data, dict) and isinstance(data.get("error"), dict) and content is None:
            raise self._body_error(status, data)
        if not isinstance(content, list):
            detail = _detail(json.dumps(data))[0]
            msg = f"{where}: reply has no 'content': {self._snippet(detail)}"
            raise self._bad(base.BAD_RESPONSE, msg, status)
        stop_reason = data.get("stop_reason")
        if not content and stop_reason not in _EMPTY_IS_AN_ANSWER:
            msg = f"{where}: reply has empty 'content' (stop_reason {stop_reason})"
            raise self._bad(base.EMPTY_RESPONSE, msg, status)
        blocks = [_dict(block) for block in content]
        text = "".join(
            block["text"]
            for block in blocks
            if block.get("type") == "text" and isinstance(block.get("text"), str)
        )
        usage = _dict(data.get("usage"))
        finish = _FINISH.get(stop_reason, stop_reason) if isinstance(stop_reason, str) else None
        return Reply(
            text=text,
            finish_reason=finish,
            prompt_tokens=_input_tokens(usage),
            completion_tokens=_int(usage.get("output_tokens")),
            reasoning_tokens=_int(_dict(usage.get("output_tokens_details")).get("thinking_tokens")),
            latency_s=latency_s,
            model_version=data.get("model"),
            cached_tokens=_int(usage.get("cache_read_input_tokens")),
            cache_write_tokens=_int(usage.get("cache_creation_input_tokens")),
            cache_write_1h_tokens=_int(
                _dict(usage.get("cache_creation")).get("ephemeral_1h_input_tokens")
            ),
            reasoned=any(block.get("type") in _THINKING_BLOCKS for block in blocks),
        )

    def _body_error(self, status: int, data: dict[str, Any]) -> ProviderError:
        """A 2xx whose body is the error envelope: the kind its type says."""
        detail, error_type, request_id = _detail(json.dumps(data))
        kind = _TYPE_KINDS.get(error_type or "", base.PROVIDER_ERROR)
        suffix = f" [{request_id}]" if request_id else ""
        message = f"HTTP {status} from {self._where}: error in the reply: {self._snippet(detail)}"
        return ProviderError(
            kind,
            self._scrub(message + suffix),
            retryable=kind in base.RETRYABLE_KINDS,
            status=status,
        )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _prompt(messages: tuple[Message, ...], cache: CachePrefix | None = None) -> dict[str, Any]:
    """``system`` (the system messages, joined) and ``messages`` (the rest) of a request body;
    ``cache``: the shared prefix, ended by a ``cache_control`` breakpoint (its message becomes
    two text blocks)."""
    system = [m.content for m in messages if m.role == "system"]
    wire: list[dict[str, Any]] = [
        {"role": m.role, "content": m.content} for m in messages if m.role != "system"
    ]
    body: dict[str, Any] = {"system": "\n\n".join(system)} if system else {}
    body["messages"] = wire
    if cache is None or cache.message >= len(messages):
        return body
    marked = messages[cache.message]
    blocks = _cached_blocks(marked.content, cache)
    if marked.role != "system":
        wire[cache.message - len(system)]["content"] = blocks
    elif len(system) == 1:  # joined system messages have no single place to break
        body["system"] = blocks
    return body


def _cached_blocks(text: str, cache: CachePrefix) -> list[dict[str, Any]]:
    control: dict[str, str] = {"type": "ephemeral"}
    if cache.ttl != "5m":
        control["ttl"] = cache.ttl
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": text[: cache.chars], "cache_control": control}
    ]
    if text[cache.chars :]:
        blocks.append({"type": "text", "text": text[cache.chars :]})
    return blocks


def _input_tokens(usage: dict[str, Any]) -> int | None:
    """The whole prompt: uncached input plus what was written to and read from the cache."""
    tokens = usage.get("input_tokens")
    if not _is_int(tokens):
        return None
    cached = (usage.get(k) for k in _CACHE_FIELDS)
    return int(tokens) + sum(n for n in cached if _is_int(n))


def _kind(status: int, error_type: str | None, message: str) -> str:
    if status in _STATUS_KINDS:
        return _STATUS_KINDS[status]
    if 400 <= status < 500 and CONTEXT_TOO_LONG_RE.search(message):
        return base.CONTEXT_TOO_LONG
    if status >= 500:
        return base.SERVER_ERROR
    if error_type in _TYPE_KINDS:
        return _TYPE_KINDS[error_type]
    return base.BAD_REQUEST if status >= 400 else base.BAD_RESPONSE


def _detail(text: str) -> tuple[str, str | None, str | None]:
    """(message with its type, error type, request id) out of an error envelope, else the text.

    Anthropic: ``{"type": "error", "error": {"type": …, "message": …}, "request_id": …}``.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return text, None, None
    if not isinstance(data, dict):
        return text, None, None
    err = data.get("error", data)
    request_id = data.get("request_id")
    request_id = request_id if isinstance(request_id, str) else None
    if not isinstance(err, dict):
        return str(err), None, request_id
    message = str(err.get("message") or err.get("detail") or json.dumps(err))
    error_type = err.get("type") if isinstance(err.get("type"), str) else None
    if error_type and error_type != "error" and error_type not in message:
        message = f"{message} ({error_type})"
    return message, error_type, request_id


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after`` (seconds or an HTTP-date), or None without one."""
    return retry_after_value(headers.get("retry-after"))
