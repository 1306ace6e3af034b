"""The local model's part of every answer's serving fingerprint: its GGUF file's hash (read
once per file version: warehouse/store/file_hashes.py caches it), its chat template's hash and
the llama.cpp version, found when the sweep opens its providers."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from needlescope.provenance import fingerprint
from needlescope.providers.base import Provider
from needlescope.providers.local import LocalProvider
from needlescope.warehouse.store.file_hashes import sha256_cached


def hash_cache_file() -> Path:
    """Where file hashes are remembered: the user's cache folder, shared by warehouses."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "needlescope" / "file_hashes.json"


def local_serving(providers: Mapping[str, Provider]) -> dict[str, dict[str, str | None]]:
    """For each local model among ``providers``: the fingerprint fields of what serves it."""
    found: dict[str, dict[str, str | None]] = {}
    for name, provider in providers.items():
        if not isinstance(provider, LocalProvider):
            continue
        path = provider.server.model_path
        local = fingerprint.local_serving(path, sha256_cached(path, hash_cache_file()).sha256)
        found[name] = {
            "gguf_sha256": local.gguf_sha256,
            "chat_template_sha256": local.chat_template_sha256,
            "llama_cpp": local.llama_cpp,
        }
    return found
