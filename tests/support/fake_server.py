"""What the fake API servers share: fault injection, request counting and the lifecycle.

``async with Server() as srv`` runs a server on the current event loop; ``with Server() as srv``
runs it on its own loop in a background thread (for sync tests). Either way it listens on
127.0.0.1 on a free port.

Faults come from ``script`` (one entry per request in arrival order, ``None`` = answer normally)
and, once the script is used up, from ``rates`` ({fault kind: probability}). A rate draw is
seeded by (seed, request body, how often that body was seen), so a sweep sees the same faults
whatever order its concurrent requests arrive in, and a retried request gets a fresh draw.

A server subclasses ``FakeServer`` and fills in its API: ``_add_routes`` (its endpoints, each
handled by ``_handle``), ``_parse`` (the body or the API's 400), ``_key`` (the API key sent),
``_fault_response`` (its error envelope for an error fault) and ``_payload`` (its success body).
Its ``Fault`` dataclass subclasses ``FaultBase`` and names the kinds it knows in ``kinds``.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Self, TypeVar

from aiohttp import web

UNAUTHORIZED = "unauthorized"  # a 401 (also sent when api_key is set and the request lacks it)
SLOW = "slow"  # waits delay_s, then answers normally
RESET = "reset"  # drops the connection without answering
TRUNCATED = "truncated"  # a 200 whose body stops half way
GARBAGE = "garbage"  # a 200 whose body is not JSON

Responder = Callable[[dict[str, Any]], Any]  # a str, a dict body, a WireReply (or awaitable)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Watcher = Callable[[web.Request, web.StreamResponse | None], Awaitable[bool]]


@dataclass(frozen=True)
class WireReply:
    """A whole HTTP reply a responder may return: sent as it is (status, headers, JSON body),
    as the recorded real replies in tests.support.wire_* are."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)

    def response(self) -> web.Response:
        headers = dict(self.headers)
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/json"
        return web.Response(
            body=json.dumps(self.body).encode(), status=self.status, headers=headers
        )


def default_responder(body: dict[str, Any]) -> str:
    return "ok"


class FaultBase:
    """Base of a server's frozen ``Fault`` dataclass: refuses a kind not in ``kinds``."""

    kinds: ClassVar[frozenset[str]] = frozenset()
    kind: str
    delay_s: float  # how long a slow reply waits

    def __post_init__(self) -> None:
        if self.kind not in self.kinds:
            raise ValueError(f"unknown fault {self.kind!r}; known: {', '.join(sorted(self.kinds))}")


F = TypeVar("F", bound=FaultBase)


class FakeServer(Generic[F]):
    name: ClassVar[str]  # the API's name, in the thread's name and in errors
    fault_type: type[F]  # the server's Fault

    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        script: Iterable[str | F | None] = (),
        rates: Mapping[str, float] | None = None,
        seed: int = 0,
        delay_s: float = 0.0,
        api_key: str | None = None,
    ) -> None:
        self.responder = responder
        self.script: deque[F | None] = deque(self._fault(f) for f in script)
        self.rates = {self.fault_type(k).kind: p for k, p in (rates or {}).items()}
        self.seed = seed
        self.delay_s = delay_s  # added to every request
        self.api_key = api_key
        self.requests = 0
        self.fault_counts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.first_request_at: float | None = None  # time.monotonic()
        self.last_reply_at: float | None = None
        self.last_body: dict[str, Any] | None = None
        self.last_headers: Mapping[str, str] | None = None
        self.port = 0
        self._seen: Counter[bytes] = Counter()
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # Called before each request is handled (response None; True: drop it unhandled, as
        # a client killed before it was sent) and after (with the response, before it is sent).
        self.watcher: Watcher | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url

    def _fault(self, f: str | F | None) -> F | None:
        return self.fault_type(f) if isinstance(f, str) else f

    def add_faults(self, *faults: str | F | None) -> None:
        """Queue faults for the next requests (thread-safe enough: deque appends are atomic)."""
        self.script.extend(self._fault(f) for f in faults)

    def reset_counts(self) -> None:
        self.requests, self.max_in_flight = 0, 0
        self.first_request_at = self.last_reply_at = None
        self.fault_counts.clear()

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> Self:
        app = web.Application(client_max_size=64 * 1024**2, middlewares=[self._watched])
        self._add_routes(app.router)
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    @web.middleware
    async def _watched(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.watcher is not None and await self.watcher(request, None):
            return web.Response(status=503)
        response = await handler(request)
        if self.watcher is not None:
            await self.watcher(request, response)
        return response

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start_in_thread(self) -> Self:
        started = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start())
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self.close())
            self._loop.close()

        thread_name = f"fake-{self.name.lower()}-server"
        self._thread = threading.Thread(target=run, name=thread_name, daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError(f"fake {self.name} server did not start within 10 s")
        return self

    def stop_thread(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.stop_thread()

    # --- request handling ------------------------------------------------------------------

    def _pick(self, raw: bytes) -> F | None:
        if self.script:
            return self.script.popleft()
        if not self.rates:
            return None
        digest = hashlib.blake2b(raw, digest_size=8).digest()
        nth = self._seen[digest]
        self._seen[digest] += 1
        u = random.Random(f"{self.seed}:{digest.hex()}:{nth}").random()
        for kind, p in self.rates.items():
            if u < p:
                return self.fault_type(kind)
            u -= p
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.first_request_at is None:
            self.first_request_at = time.monotonic()
        try:
            resp = await self._answer(request)
        finally:
            self.in_flight -= 1
            self.last_reply_at = time.monotonic()
        if not resp.prepared:
            resp.headers.update(self._headers(request))
        return resp

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        early = self._route(request)
        if early is not None:
            return early
        raw = await request.read()
        self._record(request)
        body = self._parse(request, raw)
        if isinstance(body, web.StreamResponse):
            return body
        self._keep(request, body)
        fault = self._pick(raw)
        if self.api_key is not None and self._key(request) != self.api_key:
            fault = self.fault_type(UNAUTHORIZED)
        if fault is not None:
            self.fault_counts[fault.kind] += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if fault is not None:
            error = self._fault_response(request, body, fault)
            if error is not None:
                return error
        kind = fault.kind if fault else None
        if fault is not None and kind == SLOW:
            await asyncio.sleep(fault.delay_s)
        if kind == RESET:
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        if kind == GARBAGE:
            return web.Response(
                body=b"<html>\x00upstream sent garbage{", content_type="application/json"
            )
        payload = await self._payload(request, body, fault)
        if isinstance(payload, web.StreamResponse):
            return payload
        if kind == TRUNCATED:
            data = json.dumps(payload).encode()
            headers = {"Content-Type": "application/json", **self._headers(request)}
            resp = web.StreamResponse(headers=headers)
            resp.content_length = len(data)
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.close()
            return resp
        return web.json_response(payload)

    async def _reply(self, body: dict[str, Any]) -> Any:
        """What the responder answers to ``body``: a str, a dict body or a WireReply."""
        reply = self.responder(body)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply

    # --- hooks -----------------------------------------------------------------------------

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        """Add the API's endpoints, each handled by ``self._handle``."""
        raise NotImplementedError

    def _route(self, request: web.Request) -> web.StreamResponse | None:
        """Count the request; a response returned here answers it before its body is read."""
        self.requests += 1
        return None

    def _record(self, request: web.Request) -> None:
        """Note what the tests inspect of a request (its body aside)."""
        self.last_headers = dict(request.headers)

    def _parse(self, request: web.Request, raw: bytes) -> dict[str, Any] | web.StreamResponse:
        """The request's body, or the API's answer to a body it refuses."""
        raise NotImplementedError

    def _keep(self, request: web.Request, body: dict[str, Any]) -> None:
        self.last_body = body

    def _key(self, request: web.Request) -> str | None:
        """The API key the request carries."""
        raise NotImplementedError

    def _fault_response(
        self, request: web.Request, body: dict[str, Any], fault: F
    ) -> web.StreamResponse | None:
        """The API's error for an error fault; None for a fault that is not an error."""
        raise NotImplementedError

    async def _payload(
        self, request: web.Request, body: dict[str, Any], fault: F | None
    ) -> dict[str, Any] | web.StreamResponse:
        """The JSON the API answers with (a faulty one for a payload fault), or a response."""
        raise NotImplementedError

    def _headers(self, request: web.Request) -> dict[str, str]:
        """Headers the API adds to every response."""
        return {}
