"""rag's embedding servers: a local llama.cpp server per embedder, started on first use."""

from __future__ import annotations

import asyncio
import contextlib

from needlescope.config import SweepConfig
from needlescope.probes.base import Embed
from needlescope.probes.rag.entry import RagProbe


class Embedders:
    """Local llama.cpp embedding servers (a probe's embedder GGUF, else SmolLM2), each started
    once, on first use, and stopped with ``stack``."""

    def __init__(self, config: SweepConfig, stack: contextlib.AsyncExitStack) -> None:
        self.config, self.stack = config, stack
        self._embedders: dict[str | None, Embed] = {}
        self._lock = asyncio.Lock()

    async def get(self, probe: RagProbe) -> Embed:
        """The probe's embedder, its server started on first use."""
        name = probe.embedder
        async with self._lock:
            if name not in self._embedders:
                from needlescope.probes.rag.retrieval import memoize
                from needlescope.providers.local import LocalProvider, LocalServer

                path = self.config.model(name).model if name else None
                # A pooled embedding takes its whole input in one batch: room for two chunks.
                slot = max(2048, 2 * probe.chunk_size * 2 + 256)
                server = LocalServer(path, ctx_per_slot=slot, embedding=True)
                await asyncio.to_thread(self.stack.enter_context, server)
                provider = LocalProvider(name=f"embedder-{name or 'default'}", server=server)
                self.stack.push_async_callback(provider.aclose)
                self._embedders[name] = memoize(provider.embed)
        return self._embedders[name]
