"""Haystack fillers: deterministic, prefix-stable text of any length.

``text(n)`` is always a prefix of ``text(m)`` for ``n < m``: exact-length fitting searches over
``n``, and a llama.cpp server reuses its prompt cache across prompts that share a prefix.
"""

from __future__ import annotations

import hashlib
import re
import string
from pathlib import Path
from random import Random
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from needlescope.haystack import prose

if TYPE_CHECKING:
    from needlescope.config import FillerSpec

Language = Literal["en", "zh"]
PAPER_KIND = "corpus-paper"  # a corpus built as the Counting-Stars repository builds it

# Bumped whenever a generator's output changes, so cell ids built from describe() change too.
NOISE_VERSION = 1
PROSE_VERSION = 1


@runtime_checkable
class Filler(Protocol):
    name: str

    def text(self, n_chars: int) -> str: ...

    def describe(self) -> dict[str, Any]: ...


def _check_length(n_chars: int) -> None:
    if n_chars < 0:
        raise ValueError(f"a filler length cannot be negative, got {n_chars}")


class PatternFiller:
    """The seed's haystack: one short pattern repeated."""

    def __init__(self, pattern: str = "a|") -> None:
        if not pattern:
            raise ValueError("a pattern filler needs a non-empty pattern")
        self.pattern = pattern
        self.name = "pattern"

    def text(self, n_chars: int) -> str:
        _check_length(n_chars)
        return (self.pattern * (n_chars // len(self.pattern) + 1))[:n_chars]

    def describe(self) -> dict[str, Any]:
        return {"kind": "pattern", "pattern": self.pattern}


class _GrowingFiller:
    """A filler whose text is an endless stream of deterministic blocks, generated on demand."""

    def __init__(self) -> None:
        self._buffer = ""

    def _next_block(self) -> str:
        raise NotImplementedError

    def text(self, n_chars: int) -> str:
        _check_length(n_chars)
        if n_chars > len(self._buffer):
            # Growing by a quarter at least keeps a slowly rising sequence of requests linear.
            goal = max(n_chars, len(self._buffer) * 5 // 4)
            parts = [self._buffer]
            size = len(self._buffer)
            while size < goal:
                block = self._next_block()
                parts.append(block)
                size += len(block)
            self._buffer = "".join(parts)
        return self._buffer[:n_chars]


# --- procedural noise -------------------------------------------------------------------------

_NOISE_LETTERS = {
    "e": 26, "t": 19, "a": 17, "o": 16, "i": 15, "n": 14, "s": 13, "h": 12, "r": 12, "d": 9,
    "l": 8, "c": 6, "u": 6, "m": 5, "w": 5, "f": 4, "g": 4, "y": 4, "p": 4, "b": 3, "v": 2,
    "k": 2, "j": 1, "x": 1, "q": 1, "z": 1,
}  # fmt: skip
_NOISE_SEPARATORS = {" ": 38, ",": 3, ".": 3, ";": 1, "?": 1}


def _noise_table() -> bytes:
    table = "".join(ch * weight for ch, weight in {**_NOISE_LETTERS, **_NOISE_SEPARATORS}.items())
    assert len(table) == 256
    return table.encode("ascii")


class NoiseFiller(_GrowingFiller):
    """Pseudo-random lowercase "words" with spaces and punctuation; never a digit."""

    _TABLE = _noise_table()
    _BLOCK_BYTES = 1 << 16
    _SPACES = re.compile(rb" +")
    _PUNCTUATION = re.compile(rb" ?([,.;?])[ ,.;?]*")

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = seed
        self.name = "noise"
        self._rng = Random(seed)

    def _next_block(self) -> str:
        raw = self._rng.randbytes(self._BLOCK_BYTES).translate(self._TABLE)
        raw = self._PUNCTUATION.sub(rb"\1 ", self._SPACES.sub(b" ", raw))
        return raw.strip(b" ,.;?").decode("ascii") + ". "

    def describe(self) -> dict[str, Any]:
        return {"kind": "noise", "seed": self.seed, "version": NOISE_VERSION}


class SyntheticProseFiller(_GrowingFiller):
    """Seeded, bland narrative prose from a small hand-written grammar; never a digit."""

    _SENTENCES_PER_BLOCK = 4096

    def __init__(self, language: Language = "en", seed: int = 0) -> None:
        if language not in prose.LANGUAGES:
            raise ValueError(
                f"prose language must be one of {', '.join(prose.LANGUAGES)}, got {language!r}"
            )
        super().__init__()
        self.language = language
        self.seed = seed
        self.name = f"prose-{language}"
        self._rng = Random(f"prose-{language}-{seed}")
        self._grammar = prose.grammar(language)

    def _next_block(self) -> str:
        return self._grammar.block(self._rng, self._SENTENCES_PER_BLOCK)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "prose",
            "language": self.language,
            "seed": self.seed,
            "version": PROSE_VERSION,
        }


# --- corpus -----------------------------------------------------------------------------------


class CorpusFiller:
    """A directory's .txt files in file-name order, repeated as often as needed.

    Name order is U-NIAH's rule: adding files later keeps earlier contexts identical.
    """

    def __init__(self, directory: Path | str, scrub_digits: bool = True) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise ValueError(f"corpus directory not found: {self.directory}")
        self.files = sorted(
            p for p in self.directory.iterdir() if p.suffix == ".txt" and p.is_file()
        )
        if not self.files:
            raise ValueError(f"corpus directory has no .txt files: {self.directory}")
        self.scrub_digits = scrub_digits
        self.name = f"corpus-{self.directory.name}"
        self._unit: str | None = None

    def _load(self) -> str:
        if self._unit is None:
            # Line endings are normalised so lengths do not depend on where a file was saved.
            docs = [p.read_text(encoding="utf-8").replace("\r\n", "\n") for p in self.files]
            unit = "\n\n".join(d.strip("\n") for d in docs) + "\n\n"
            if self.scrub_digits:
                unit = unit.translate({ord(c): None for c in set(unit) if c.isdigit()})
            self._unit = unit
        return self._unit

    def text(self, n_chars: int) -> str:
        _check_length(n_chars)
        unit = self._load()
        if n_chars <= len(unit):
            return unit[:n_chars]
        return (unit * (n_chars // len(unit) + 1))[:n_chars]

    def describe(self) -> dict[str, Any]:
        # The content hash, not the path, identifies the text: moving a corpus keeps cell ids.
        digest = hashlib.sha256(self._load().encode()).hexdigest()[:16]
        return {
            "kind": "corpus",
            "directory": self.directory.name,
            "files": [p.name for p in self.files],
            "scrub_digits": self.scrub_digits,
            "sha256": digest,
        }


class WholeFileFiller:
    """One .txt file as it is (a corpus with ``fit: none``): no fitting, digits kept.

    The recall seed's novel tests used a novel file whole as the haystack; ``text(n)`` is the
    file's first n characters, and never more than the file.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"corpus file not found: {self.path}")
        # Read as Python reads a text file (universal newlines), as the seed did.
        self._text = self.path.read_text(encoding="utf-8")
        self.name = f"file-{self.path.stem}"

    @property
    def size(self) -> int:
        return len(self._text)

    def text(self, n_chars: int) -> str:
        _check_length(n_chars)
        return self._text[:n_chars]

    def describe(self) -> dict[str, Any]:
        digest = hashlib.sha256(self._text.encode()).hexdigest()[:16]
        return {"kind": "corpus-file", "file": self.path.name, "sha256": digest}


class PaperCorpusFiller:
    """A corpus built into a haystack as the Counting-Stars repository builds it (``fit: paper``).

    English: the .txt files in name order, each with its newlines made spaces, concatenated and
    split on single spaces; ``text(n)`` is the first n pieces joined by single spaces. Chinese:
    every line stripped, ``------------`` made a space, then spaces, ASCII punctuation and Latin
    letters removed; ``text(n)`` is the first n characters. Digits are kept. ``n`` counts
    pieces or characters, and a cell of nominal length i takes ``units(i)`` of them.
    """

    # The repository's length ratios: a length of i holds int(i × ratio) pieces or characters.
    RATIOS: ClassVar[dict[str, float]] = {"en": 0.8, "zh": 0.7}
    _DROPPED = str.maketrans("", "", " " + string.punctuation + string.ascii_letters)

    def __init__(self, path: Path | str, language: Language = "en") -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise ValueError(f"corpus not found: {self.path}")
        self.files = as_is_files(self.path)
        if not self.files:
            raise ValueError(f"corpus directory has no .txt files: {self.path}")
        self.language = language
        self.name = f"paper-{self.path.stem}"
        # Read as Python reads a text file (universal newlines), as the repository did.
        docs = [p.read_text(encoding="utf-8") for p in self.files]
        if language == "en":
            self._pieces = "".join(d.replace("\n", " ") for d in docs).split(" ")
            self._text = ""
        else:
            lines = (line for d in docs for line in d.split("\n"))
            joined = "".join(line.strip().replace("------------", " ") for line in lines)
            self._text = joined.translate(self._DROPPED)
            self._pieces = []

    @property
    def unit(self) -> str:
        return "pieces" if self.language == "en" else "characters"

    @property
    def size(self) -> int:
        """How many pieces (English) or characters (Chinese) the corpus holds."""
        return len(self._pieces) if self.language == "en" else len(self._text)

    def units(self, length: int) -> int:
        """The pieces or characters of a cell of nominal length ``length`` (the repository's
        context lengths i = max/N, …, max)."""
        return int(length * self.RATIOS[self.language])

    def text(self, n_chars: int) -> str:
        _check_length(n_chars)
        if self.language == "en":
            return " ".join(self._pieces[:n_chars])
        return self._text[:n_chars]

    def describe(self) -> dict[str, Any]:
        built = " ".join(self._pieces) if self.language == "en" else self._text
        return {
            "kind": PAPER_KIND,
            "language": self.language,
            "files": [p.name for p in self.files],
            "sha256": hashlib.sha256(built.encode()).hexdigest()[:16],
        }


def as_is_files(path: Path) -> list[Path]:
    """The haystacks of a corpus used as it is: the file itself, or a folder's .txt files."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.suffix == ".txt" and p.is_file())


def filler_from_spec(spec: FillerSpec) -> Filler:
    """The filler a config's filler definition describes."""
    if spec.kind == "pattern":
        return PatternFiller(spec.pattern)
    if spec.kind == "noise":
        return NoiseFiller(spec.seed)
    if spec.kind == "prose":
        return SyntheticProseFiller(spec.language, spec.seed)
    assert spec.path is not None  # the config validates this
    if spec.fit == "paper":
        return PaperCorpusFiller(spec.path, spec.language)
    if spec.fit == "none":
        if not spec.path.is_file():
            raise ValueError(f"a corpus used as it is is read one file at a time: {spec.path}")
        return WholeFileFiller(spec.path)
    return CorpusFiller(spec.path, scrub_digits=spec.scrub_digits)
