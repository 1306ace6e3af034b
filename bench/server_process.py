"""The fake OpenAI-wire server in a process of its own, as a real provider is: its CPU (and
its share of a GIL) is not the measured process's. Counts are read over a pipe; the first
request and last reply are ``time.monotonic()``, one clock for every process on Linux."""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.connection import Connection
from typing import Any

from tests.support.fake_server import Responder
from tests.support.openai_server import FakeOpenAIServer


def _serve(pipe: Connection, responder: Responder, options: dict[str, Any]) -> None:
    with FakeOpenAIServer(responder, **options) as server:
        pipe.send(server.base_url)
        while True:
            command = pipe.recv()
            if command == "stop":
                return
            if command == "reset":
                server.reset_counts()
            pipe.send(
                {
                    "requests": server.requests,
                    "first_request_at": server.first_request_at,
                    "last_reply_at": server.last_reply_at,
                    "max_in_flight": server.max_in_flight,
                }
            )


class ServerProcess:
    """``with ServerProcess(responder, delay_s=1.0) as server:`` — ``server.base_url``,
    ``server.reset_counts()``, and the counts of :class:`FakeOpenAIServer` as attributes."""

    def __init__(self, responder: Responder, **options: Any) -> None:
        self._pipe, child = mp.get_context("spawn").Pipe()
        self._process = mp.get_context("spawn").Process(
            target=_serve, args=(child, responder, options), daemon=True
        )
        self._process.start()
        if not self._pipe.poll(30):
            raise RuntimeError("the fake server process did not start within 30 s")
        self.base_url: str = self._pipe.recv()

    def _ask(self, command: str) -> dict[str, Any]:
        self._pipe.send(command)
        counts: dict[str, Any] = self._pipe.recv()
        return counts

    def reset_counts(self) -> None:
        self._ask("reset")

    def __getattr__(self, name: str) -> Any:
        counts = self._ask("counts")
        if name not in counts:
            raise AttributeError(name)
        return counts[name]

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pipe.send("stop")
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
