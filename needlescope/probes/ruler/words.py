"""The random strings RULER's tasks are made of, each drawn from a seeded ``random.Random``.

English words come from the ``wonderwords`` package's lists (RULER's source), read from its
files without importing it: RULER's niah keys are ``adjective-noun`` pairs, its cwe vocabulary
the nouns, adjectives and verbs together. The lists are pinned (wonderwords 2.2.0, the release
RULER was published with; 3.x dropped some nouns), because a cell's prompt is rebuilt from its
seed and these lists.
"""

from __future__ import annotations

import functools
import importlib.util
import random
import string
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Literal

from needlescope.errors import NeedlescopeError

Kind = Literal["words", "numbers", "uuids"]
KINDS: tuple[Kind, ...] = ("words", "numbers", "uuids")


@functools.cache
def wordlist(name: Literal["noun", "adjective", "verb"]) -> tuple[str, ...]:
    """One of wonderwords' lists, in file order (RULER strips each line's trailing space)."""
    spec = importlib.util.find_spec("wonderwords")
    if spec is None or not spec.submodule_search_locations:
        raise NeedlescopeError("RULER's word lists need the wonderwords package: pip install it")
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / f"{name}list.txt"
    return tuple(line.rstrip() for line in path.read_text(encoding="utf-8").splitlines())


@functools.cache
def _unique(name: Literal["noun", "adjective", "verb"]) -> tuple[str, ...]:
    return tuple(sorted(set(wordlist(name))))


@functools.cache
def common_vocabulary() -> tuple[str, ...]:
    """cwe's words: RULER's sorted set of nouns, adjectives and verbs."""
    return tuple(sorted({*wordlist("noun"), *wordlist("adjective"), *wordlist("verb")}))


def random_key_word(rng: random.Random) -> str:
    """A uniform draw from RULER's sorted set of ``adjective-noun`` words. No two pairs of the
    lists spell the same word, so an adjective and a noun drawn apart are that draw, without
    building RULER's six-million-word list."""
    return f"{rng.choice(_unique('adjective'))}-{rng.choice(_unique('noun'))}"


def random_number(rng: random.Random, digits: int = 7) -> str:
    return str(rng.randint(10 ** (digits - 1), 10**digits - 1))


def random_uuid(rng: random.Random) -> str:
    """A uuid4 from the seeded generator (as RULER makes its own from ``getrandbits``)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def random_value(kind: Kind, rng: random.Random) -> str:
    if kind == "words":
        return random_key_word(rng)
    if kind == "numbers":
        return random_number(rng)
    if kind == "uuids":
        return random_uuid(rng)
    raise ValueError(f"a needle kind is one of {', '.join(KINDS)}, not {kind!r}")


def coded_word(rng: random.Random, length: int = 6) -> str:
    """fwe's made-up word: ``length`` random lowercase letters."""
    return "".join(rng.choices(string.ascii_lowercase, k=length))


def variable_name(rng: random.Random, length: int = 5) -> str:
    """vt's variable name: ``length`` random uppercase letters."""
    return "".join(rng.choices(string.ascii_uppercase, k=length))


def distinct(
    draw: Callable[[random.Random], str],
    count: int,
    rng: random.Random,
    avoid: Collection[str] = (),
) -> list[str]:
    """``count`` different draws in the order drawn, none in ``avoid``: a repeat is drawn again.
    (RULER keeps drawing until its list holds enough different names, but keeps the repeats in
    the list; the issue asks for names all distinct.)"""
    seen = set(avoid)
    found: list[str] = []
    while len(found) < count:
        item = draw(rng)
        if item not in seen:
            seen.add(item)
            found.append(item)
    return found
