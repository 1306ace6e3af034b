"""Reading other tools' files: which files, their text, their JSON, and typed fields.

Everything that goes wrong here is an ``ImportFormatError`` naming the file (and the line or
list entry) and the field: the readers never let a ``KeyError`` or a ``JSONDecodeError`` out.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from needlescope.imports.errors import ImportFormatError
from needlescope.imports.records import Source

SHOWN = 40  # characters of a bad value quoted in a message


def files_under(path: Path, suffixes: tuple[str, ...], what: str) -> list[Path]:
    """``path`` itself when it is a file, else every file below it whose name ends with one of
    ``suffixes``, in path order (so records come out in the same order on every machine)."""
    try:
        if path.is_file():
            return [path]
        if not path.is_dir():
            raise ImportFormatError(path, "no such file or folder")
        found = sorted(p for p in path.rglob("*") if p.name.endswith(suffixes) and p.is_file())
    except OSError as exc:
        raise ImportFormatError(path, f"cannot list: {exc.strerror or exc}") from None
    if not found:
        raise ImportFormatError(path, f"no {what} in this folder")
    return found


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    return decode(data, path)


def decode(data: bytes, path: Path, line: int | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(path, f"not UTF-8 text (byte {exc.start})", line=line) from None


def parse_json(text: str, path: Path, line: int | None = None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if line is not None else f"line {exc.lineno} column {exc.colno}"
        problem = f"not JSON ({exc.msg}, {at})"
    except RecursionError:
        problem = "JSON nested too deeply to read"
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        problem = f"JSON this reader cannot hold ({exc})"
    raise ImportFormatError(path, problem, line=line)


def load_json(path: Path) -> Any:
    return parse_json(read_text(path), path)


def jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed value) for each non-blank line. Lines end at ``\\n`` only:
    a JSON string may hold U+2028 unescaped, which ``str.splitlines`` would cut at."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                text = decode(raw, path, number)
                if text.strip():
                    yield number, parse_json(text, path, number)
    except OSError as exc:
        raise ImportFormatError(path, f"cannot read: {exc.strerror or exc}") from None


def sha256(text: str) -> str:
    # surrogatepass: a JSON "\ud800" is a lone surrogate, which strict UTF-8 cannot encode.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if _plain(value) else type(value).__name__
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


@dataclass(frozen=True)
class Fields:
    """One JSON object of a file, read field by field; every failure names the field."""

    data: dict[str, Any]
    source: Source

    @classmethod
    def of(cls, value: Any, source: Source, what: str = "a JSON object") -> Fields:
        if not isinstance(value, dict):
            fail(source, f"expected {what}, found {_kind(value)}")
        return cls(value, source)

    def fail(self, problem: str) -> NoReturn:
        fail(self.source, problem)

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def raw(self, name: str) -> Any:
        return self.data.get(name)

    def _missing(self, name: str) -> NoReturn:
        self.fail(f'field "{name}" is null' if name in self.data else f'no field "{name}"')

    def _wrong(self, name: str, expected: str) -> NoReturn:
        self.fail(f'field "{name}" must be {expected}, not {shown(self.data.get(name))}')

    def text(self, name: str) -> str:
        value = self.data.get(name)
        if value is None:
            self._missing(name)
        if not isinstance(value, str):
            self._wrong(name, "text")
        return value

    def optional_text(self, name: str) -> str | None:
        return self.text(name) if self.has(name) else None

    def integer(self, name: str, minimum: int | None = None) -> int:
        value = self.data.get(name)
        if value is None:
            self._missing(name)
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # pandas and json.dumps of numpy ints write 4000.0 at times
        if not isinstance(value, int) or isinstance(value, bool):
            self._wrong(name, "a whole number")
        if minimum is not None and value < minimum:
            self._wrong(name, f"at least {minimum}")
        return value

    def optional_integer(self, name: str, minimum: int | None = None) -> int | None:
        return self.integer(name, minimum) if self.has(name) else None

    def number(self, name: str) -> float:
        value = self.data.get(name)
        if value is None:
            self._missing(name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            self._wrong(name, "a number")
        if not math.isfinite(value):
            self._wrong(name, "a finite number")
        return value

    def optional_number(self, name: str) -> float | None:
        return self.number(name) if self.has(name) else None

    def texts(self, name: str) -> tuple[str, ...]:
        value = self.data.get(name)
        if value is None:
            self._missing(name)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self._wrong(name, "a list of texts")
        return tuple(value)

    def integers(self, name: str) -> tuple[int, ...]:
        value = self.data.get(name)
        if value is None:
            self._missing(name)
        if not isinstance(value, list) or not all(_whole(v) for v in value):
            self._wrong(name, "a list of whole numbers")
        return tuple(int(v) for v in value)

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.data.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self._wrong(name, "an object")
        return value

    def utc(self, name: str) -> datetime | None:
        """A timestamp with its zone (``2024-03-07 12:00:00+0000``), in UTC; None if absent."""
        text = self.optional_text(name)
        if text is None:
            return None
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            self._wrong(name, "a date and time")
        if moment.tzinfo is None:
            self._wrong(name, "a date and time with its UTC offset")
        return moment.astimezone(UTC)


def _whole(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return shown(value)


def fail(source: Source, problem: str) -> NoReturn:
    label = f"entry {source.entry}: {problem}" if source.entry is not None else problem
    raise ImportFormatError(source.path, label, line=source.line)
