"""SDK-free client for OpenAI-compatible chat completions (OpenAI, DeepSeek, vLLM, llama.cpp…)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import socket
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from yarl import URL

from needlescope.errors import ProviderError
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.providers.registry import register

# "context_length_exceeded" / "maximum context length" (OpenAI, vLLM), "exceeds the available
# context size" (llama.cpp), "prompt is too long" (Anthropic-style proxies).
CONTEXT_TOO_LONG_RE = re.compile(r"context[ _](length|size)|too long")
_STATUS_KINDS = {429: base.RATE_LIMITED, 401: base.AUTH, 403: base.AUTH, 408: base.TIMEOUT}
_DETAIL_CHARS = 200
_SECRET_WORDS = ("auth", "key", "token", "secret")
_REASONS = (  # the cause of a connection error, as the one-line message names it
    (socket.gaierror, "cannot resolve host"),
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (aiohttp.ServerDisconnectedError, "server disconnected"),
)


@register("openai")
class OpenAIProvider:
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
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.max_retry_after_s = max_retry_after_s
        self.max_connections = max_connections
        self.tokenize_url = tokenize_url
        self.apply_template_url = apply_template_url
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        secret = [v for k, v in self._headers.items() if any(w in k.lower() for w in _SECRET_WORDS)]
        self._secrets = [s for s in {api_key, *secret} if s and len(s) >= 6]  # never shown
        self._where = str(URL(self.base_url).with_user(None))
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        where, cls = self._where, type(self).__name__
        return f"{cls}(name={self.name!r}, base_url={where!r}, model={self.model!r})"

    def _client(self) -> aiohttp.ClientSession:
        # A session belongs to one event loop: a call from another loop gets a session of its own.
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                headers=self._headers,
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def complete(self, request: ChatRequest) -> Reply:
        body: dict[str, Any] = {"model": self.model, "messages": _wire(request.messages)}
        if request.max_tokens is not None and "max_completion_tokens" not in request.extra:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        body.update(request.extra)
        url = f"{self.base_url}/chat/completions"
        start = time.perf_counter()
        try:
            status, data = await self._post(url, body)
        except ProviderError as e:
            wait = e.retry_after_s
            if e.kind != base.RATE_LIMITED or wait is None or wait > self.max_retry_after_s:
                raise
            await asyncio.sleep(wait)
            start = time.perf_counter()  # latency of the request that answered, not of the wait
            status, data = await self._post(url, body)
        return self._reply(status, data, time.perf_counter() - start)

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

    async def _post(self, url: str, body: dict[str, Any]) -> tuple[int, Any]:
        status = None
        try:
            async with self._client().post(url, json=body) as resp:
                status = resp.status
                raw = await resp.read()
                if not 200 <= status < 300:
                    raise self._http_error(status, resp.headers, raw)
        except TimeoutError:
            raise self._bad(
                base.TIMEOUT, f"no reply from {self._where} within {self.timeout_s:g} s", status
            ) from None
        except aiohttp.ClientPayloadError:
            raise self._bad(
                base.BAD_RESPONSE, f"HTTP {status} from {self._where}: reply body cut short", status
            ) from None
        except aiohttp.ClientError as e:
            raise self._bad(base.CONNECTION, f"cannot reach {self._where}: {_reason(e)}") from None
        try:
            return status, json.loads(raw)
        except ValueError:
            snippet = self._snippet(raw.decode(errors="replace"))
            msg = f"HTTP {status} from {self._where}: reply is not JSON: {snippet}"
            raise self._bad(base.BAD_RESPONSE, msg, status) from None

    def _http_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> ProviderError:
        text = raw.decode(errors="replace")
        kind = _kind(status, text.lower())
        msg = f"HTTP {status} from {self._where}: {self._snippet(_detail(text))}"
        # OpenAI's "out of credit" is a 429 too, but waiting does not help.
        retryable = kind in base.RETRYABLE_KINDS and "insufficient_quota" not in text
        wait = _retry_after(headers) if kind == base.RATE_LIMITED and retryable else None
        return ProviderError(kind, msg, retryable=retryable, status=status, retry_after_s=wait)

    def _bad(self, kind: str, message: str, status: int | None = None) -> ProviderError:
        return ProviderError(kind, self._scrub(message), retryable=True, status=status)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _snippet(self, text: str) -> str:
        text = "".join(c if c.isprintable() else " " for c in self._scrub(text)[:4000])
        text = " ".join(text.split())
        return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"

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


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


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


def _reason(e: aiohttp.ClientError) -> str:
    cause = e.os_error if isinstance(e, aiohttp.ClientConnectorError) else e
    for error_type, reason in _REASONS:
        if isinstance(cause, error_type):
            return reason
    return " ".join(str(e).split())[:_DETAIL_CHARS] or type(e).__name__


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP-date)."""
    ms, value = headers.get("retry-after-ms"), headers.get("Retry-After")
    try:
        return max(0.0, float(ms) / 1000 if ms else float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
