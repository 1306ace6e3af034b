"""The metadata of a GGUF model file, read from its header without loading the model.

The layout is ggml's GGUF specification (docs/gguf.md, versions 2 and 3): the magic ``GGUF``,
a uint32 version, uint64 tensor and key-value counts, then the key-value pairs, each a string
key, a uint32 value type and the value. Strings are a uint64 length and UTF-8 bytes; an array
is an element type, a uint64 count and the elements. Little-endian unless the version reads
as a byte-swapped small number (the specification's big-endian files). The ``gguf`` package
reads the same but needs numpy, which needlescope does not depend on.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection
from pathlib import Path
from typing import Any, BinaryIO

from needlescope.errors import GGUFError

MAGIC = b"GGUF"
CHAT_TEMPLATE = "tokenizer.chat_template"
_STRING, _ARRAY = 8, 9
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}


class _Reader:
    def __init__(self, handle: BinaryIO, path: Path, size: int) -> None:
        self.handle, self.path, self.size = handle, path, size
        self.order = "<"

    def unpack(self, code: str) -> Any:
        fmt = self.order + code
        data = self.handle.read(struct.calcsize(fmt))
        if len(data) < struct.calcsize(fmt):
            raise GGUFError(f"{self.path}: the GGUF header ends early")
        return struct.unpack(fmt, data)[0]

    def length(self) -> int:
        n = int(self.unpack("Q"))
        if n > self.size - self.handle.tell():
            raise GGUFError(f"{self.path}: a GGUF length ({n}) runs past the end of the file")
        return n

    def string(self) -> str:
        return self.handle.read(self.length()).decode("utf-8", errors="replace")

    def value(self, kind: int, keep: bool) -> Any:
        """The value of type ``kind``; when not ``keep``, it is skipped (None)."""
        if kind in _SCALARS:
            if keep:
                return self.unpack(_SCALARS[kind])
            self.handle.seek(struct.calcsize(_SCALARS[kind]), os.SEEK_CUR)
            return None
        if kind == _STRING:
            if keep:
                return self.string()
            self.handle.seek(self.length(), os.SEEK_CUR)
            return None
        if kind == _ARRAY:
            element, count = int(self.unpack("I")), int(self.unpack("Q"))
            if element in _SCALARS and not keep:
                self.handle.seek(count * struct.calcsize(_SCALARS[element]), os.SEEK_CUR)
                return None
            values = [self.value(element, keep) for _ in range(count)]
            return values if keep else None
        raise GGUFError(f"{self.path}: unknown GGUF value type {kind}")


def read_metadata(
    path: str | os.PathLike[str], keys: Collection[str] | None = None
) -> dict[str, Any]:
    """The key-value metadata of the GGUF file at ``path`` (only ``keys``, when given: the
    others, such as the tokenizer's 50,000-entry arrays, are skipped undecoded, and reading
    stops once every key asked for is found)."""
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as handle:
        reader = _Reader(handle, path, size)
        if handle.read(4) != MAGIC:
            raise GGUFError(f"{path}: not a GGUF model file")
        version = int(reader.unpack("I"))
        if version > 0xFFFF:  # a big-endian file: its version reads byte-swapped
            reader.order = ">"
            version = int.from_bytes(version.to_bytes(4, "little"), "big")
        if version not in (2, 3):
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
        reader.unpack("Q")  # tensor count
        pairs = int(reader.unpack("Q"))
        wanted = None if keys is None else set(keys)
        found: dict[str, Any] = {}
        for _ in range(pairs):
            key = reader.string()
            keep = wanted is None or key in wanted
            value = reader.value(int(reader.unpack("I")), keep)
            if keep:
                found[key] = value
                if wanted is not None and wanted <= found.keys():
                    break
        return found


def chat_template(path: str | os.PathLike[str]) -> str | None:
    """The model's own chat template (``tokenizer.chat_template``), None if it has none."""
    value = read_metadata(path, (CHAT_TEMPLATE,)).get(CHAT_TEMPLATE)
    return value if isinstance(value, str) else None
