"""SHA-256 of large files (a local model's GGUF), read once: cached by path, size and
modification time in a small JSON file, so a multi-gigabyte model is hashed on its first
sweep only and again only when the file changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class FileHash:
    sha256: str
    cached: bool  # read from the cache: the file itself was not read


def sha256_file(path: str | os.PathLike[str]) -> str:
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def sha256_cached(path: str | os.PathLike[str], cache_file: str | os.PathLike[str]) -> FileHash:
    """The SHA-256 of ``path``, from ``cache_file`` when the file's size and modification
    time are the ones it was hashed at, else computed and stored there. An unreadable cache
    is started afresh; it is replaced atomically, so no reader sees half of it."""
    path = Path(path).resolve()
    before = path.stat()
    entries = _load(Path(cache_file))
    entry = entries.get(str(path))
    if (
        isinstance(entry, dict)
        and entry.get("size") == before.st_size
        and entry.get("mtime_ns") == before.st_mtime_ns
        and isinstance(entry.get("sha256"), str)
        and _HEX.match(entry["sha256"])
    ):
        return FileHash(entry["sha256"], cached=True)
    digest = sha256_file(path)
    after = path.stat()
    # A file that changed while it was read has no settled hash to remember.
    if (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns):
        entries[str(path)] = {
            "size": before.st_size,
            "mtime_ns": before.st_mtime_ns,
            "sha256": digest,
        }
        _save(Path(cache_file), entries)
    return FileHash(digest, cached=False)


def _load(cache_file: Path) -> dict[str, Any]:
    try:
        data = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(cache_file: Path, entries: dict[str, Any]) -> None:
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    partial = cache_file.with_name(f".{cache_file.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(partial, cache_file)
