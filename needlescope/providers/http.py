"""What the aiohttp provider clients share: session, POST, error mapping, one 429 wait, scrubbing.

A client subclasses ``HttpProvider`` and fills in its hooks:

* ``_complete_url()`` and ``request_body(request)``: where ``complete`` POSTs, and what;
* ``_reply(status, data, latency_s)``: a 2xx JSON body as a ``Reply`` (or a ``ProviderError``);
* ``_classify(status, headers, text)``: a non-2xx reply as an ``HttpFailure`` (its kind, the
  detail shown after ``HTTP {status} from {where}: ``, whether it is retryable, and the wait the
  provider's own Retry-After rules read out of it);
* optionally ``_where_of(url)`` and ``_url_secrets(url)``: how the base URL is shown in
  messages and which of its parts are secrets (default: the URL without its user info; none).
"""

from __future__ import annotations

import abc
import asyncio
import email.utils
import json
import socket
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NamedTuple

import aiohttp
from yarl import URL

from needlescope.errors import ProviderError
from needlescope.provenance import serving_fingerprint
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Reply
from needlescope.providers.reasoning import DEFAULT_REASONING_BUDGET, reasoning_allowance

DETAIL_CHARS = 200  # longest server message a ProviderError quotes
_SECRET_WORDS = ("auth", "key", "token", "secret")
_REASONS = (  # the cause of a connection error, as the one-line message names it
    (socket.gaierror, "cannot resolve host"),
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (aiohttp.ServerDisconnectedError, "server disconnected"),
)


class HttpFailure(NamedTuple):
    """A non-2xx reply as the provider reads it."""

    kind: str
    detail: str  # shown after "HTTP {status} from {where}: ", already snipped and scrubbed
    retryable: bool
    retry_after_s: float | None = None


class HttpProvider(abc.ABC):
    """POSTs JSON with one ``aiohttp`` session per event loop; every failure is one line.

    The only retry here: a 429 whose retry-after is at most ``max_retry_after_s`` is waited out
    once and re-sent once (``_send``). Everything else is raised for the orchestrator to retry.
    ``headers`` are sent with every request; those whose name looks secret, ``api_key`` and
    ``_url_secrets`` are never shown in a message.

    ``reasoning``: the model thinks before answering, so its output limit is the answer budget
    plus ``reasoning_budget`` (``output_limit``); a reply that carries reasoning turns it on.
    """

    kind = "openai"  # the wire format, as needlescope.providers.reasoning names it

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        model: str,
        api_key: str | None,
        headers: dict[str, str],
        timeout_s: float,
        max_retry_after_s: float,
        max_connections: int,
        reasoning: bool = False,
        reasoning_budget: int = DEFAULT_REASONING_BUDGET,
    ) -> None:
        url = URL(base_url)
        # Credentials in the URL go as HTTP Basic auth, stated once for the session rather than
        # left in every request's URL (config refuses them beside a key).
        headers = dict(headers)
        if url.user is not None or url.password is not None:
            auth = aiohttp.encode_basic_auth(url.user or "", url.password or "")
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = auth
            base_url = str(url.with_user(None))
        self.name = name
        self.reasoning = reasoning
        self.reasoning_budget = reasoning_budget
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.max_retry_after_s = max_retry_after_s
        self.max_connections = max_connections
        self._headers = headers
        secret = [v for k, v in headers.items() if looks_secret(k)]
        secret += [url.password or "", *self._url_secrets(url)]
        self._secrets = sorted(
            {s for s in (api_key, *secret) if s and len(s) >= 6}, key=len, reverse=True
        )  # never shown
        self._where = self._where_of(url)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        where, cls = self._where, type(self).__name__
        return f"{cls}(name={self.name!r}, base_url={where!r}, model={self.model!r})"

    # --- hooks -----------------------------------------------------------------------------

    @abc.abstractmethod
    def _complete_url(self) -> str:
        """Where ``complete`` POSTs."""

    @abc.abstractmethod
    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body ``complete`` sends for ``request``."""

    @abc.abstractmethod
    def _reply(self, status: int, data: Any, latency_s: float | None) -> Reply:
        """The ``Reply`` in a 2xx JSON body; raises a ``ProviderError`` when there is none."""

    @abc.abstractmethod
    def _classify(self, status: int, headers: Mapping[str, str], text: str) -> HttpFailure:
        """What a non-2xx reply with body ``text`` means."""

    def _where_of(self, url: URL) -> str:
        """The base URL as messages show it."""
        return str(url.with_user(None))

    def _url_secrets(self, url: URL) -> list[str]:
        """Parts of the base URL never to show, besides its user info."""
        return []

    # --- the Provider protocol -------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> Reply:
        body = self.request_body(request)
        status, data, latency_s = await self._send(self._complete_url(), body)
        reply = self._reply(status, data, latency_s)
        reply = replace(reply, fingerprint=serving_fingerprint(data, body))
        if reply.thought:
            self.reasoning = True  # it thinks: later requests leave it room to
        return reply

    def output_limit(self, request: ChatRequest) -> int | None:
        """The output limit to send: the answer's budget plus room for reasoning."""
        if request.max_tokens is None:
            return None
        return request.max_tokens + reasoning_allowance(
            self.kind,
            request.extra,
            reasoning=self.reasoning,
            reasoning_budget=self.reasoning_budget,
        )

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    # --- HTTP ------------------------------------------------------------------------------

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

    async def _send(self, url: str, body: dict[str, Any]) -> tuple[int, Any, float]:
        """(status, JSON reply, latency): a 429 with a short enough retry-after is sent twice."""
        start = time.perf_counter()
        try:
            status, data = await self._post(url, body)
        except ProviderError as e:
            wait = e.retry_after_s
            if e.kind != base.RATE_LIMITED or wait is None or wait > self.max_retry_after_s:
                raise
            await self._pause(wait)
            start = time.perf_counter()  # latency of the request that answered, not of the wait
            status, data = await self._post(url, body)
        return status, data, time.perf_counter() - start

    async def _pause(self, seconds: float) -> None:
        """The wait a 429 asked for, before the one re-send."""
        await asyncio.sleep(seconds)

    async def _post(
        self, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """(status, JSON reply) of one POST, without retrying."""
        status, raw = await self._request("POST", url, json_body=body, headers=headers)
        return status, self._json(status, raw)

    async def _get(self, url: str) -> tuple[int, Any]:
        """(status, JSON reply) of one GET, without retrying."""
        status, raw = await self._request("GET", url)
        return status, self._json(status, raw)

    async def _request(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        data: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """(status, body bytes) of one request, without retrying; a non-2xx raises its kind."""
        status = None
        try:
            async with self._client().request(
                method, url, json=json_body, data=data, headers=headers
            ) as resp:
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
        return status, raw

    def _json(self, status: int, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError:
            snippet = self._snippet(raw.decode(errors="replace"))
            msg = f"HTTP {status} from {self._where}: reply is not JSON: {snippet}"
            raise self._bad(base.BAD_RESPONSE, msg, status) from None

    def _http_error(self, status: int, headers: Mapping[str, str], raw: bytes) -> ProviderError:
        failure = self._classify(status, headers, raw.decode(errors="replace"))
        return ProviderError(
            failure.kind,
            f"HTTP {status} from {self._where}: {failure.detail}",
            retryable=failure.retryable,
            status=status,
            retry_after_s=failure.retry_after_s,
        )

    # --- messages --------------------------------------------------------------------------

    def _bad(self, kind: str, message: str, status: int | None = None) -> ProviderError:
        return ProviderError(kind, self._scrub(message), retryable=True, status=status)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _snippet(self, text: str) -> str:
        text = "".join(c if c.isprintable() else " " for c in self._scrub(text)[:4000])
        text = " ".join(text.split())
        return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def looks_secret(name: str) -> bool:
    """Whether a header or query parameter of this name holds a credential."""
    return any(w in name.lower() for w in _SECRET_WORDS)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int | None:
    """A token count, or None for anything else (null, a bool, a string)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def wait_until(value: str | None) -> float | None:
    """Seconds until an HTTP-date, at least 0; None when ``value`` is not one."""
    try:
        when = email.utils.parsedate_to_datetime(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def retry_after_value(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (seconds or an HTTP-date), or None."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return wait_until(value)


def _reason(e: aiohttp.ClientError) -> str:
    cause = e.os_error if isinstance(e, aiohttp.ClientConnectorError) else e
    for error_type, reason in _REASONS:
        if isinstance(cause, error_type):
            return reason
    return " ".join(str(e).split())[:DETAIL_CHARS] or type(e).__name__
