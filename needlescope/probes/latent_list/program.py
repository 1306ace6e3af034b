"""A latent-list program: a Python list ``x`` changed by ``operations`` statements, interleaved
with ``irrelevant`` ones that never touch it (prints, other variables, other lists).

Every operation changes ``x`` (no reverse of a palindrome, no sort of a sorted list, no
``x[i] = v`` with the value already there), so each prefix of the operations leaves a state of
its own to be "consistent with". ``x`` keeps 1 to ``MAX_LENGTH`` elements: an element query
always has an element to ask about. Operations are applied with the list methods they name,
so the recorded states are what Python itself computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any, Literal

# Bumped whenever a seed's program changes, so cell ids that name it change too.
GENERATOR_VERSION = 1
Query = Literal["list", "length", "element"]
QUERIES: tuple[Query, ...] = ("list", "length", "element")
OPERATIONS = ("append", "insert", "pop", "remove", "extend", "reverse", "sort", "setitem")
VALUES = (10, 99)  # two digits: a value is never mistaken for a small index or length
INITIAL_LENGTH = 3
MAX_LENGTH = 12
VARIABLE = "x"
_OTHER_LISTS = ("y", "z")
_WORDS = ("checkpoint", "halfway", "still running", "step done", "almost there", "ok", "tick")
_LABELS = ("north", "amber", "river", "quiet", "spare", "delta", "maple")


@dataclass(frozen=True)
class Statement:
    text: str
    relevant: bool  # changes x (the first statement, which creates it, included)


@dataclass(frozen=True)
class Program:
    statements: tuple[Statement, ...]  # in order; the first one creates x
    states: tuple[tuple[int, ...], ...]  # x after 0, 1, … operations (states[0]: as created)
    query: Query
    index: int | None = None  # the element asked for (element query)

    @property
    def final(self) -> tuple[int, ...]:
        return self.states[-1]

    @property
    def answer(self) -> list[int] | int:
        if self.query == "list":
            return list(self.final)
        if self.query == "length":
            return len(self.final)
        assert self.index is not None
        return self.final[self.index]

    def expected(self) -> dict[str, Any]:
        """JSON-able: what ``score.grade`` reads."""
        return {
            "query": self.query,
            "answer": self.answer,
            "index": self.index,
            "states": [list(s) for s in self.states],
        }


Apply = Callable[[list[int]], object]


def _value(rng: Random) -> int:
    return rng.randint(*VALUES)


def _operation(rng: Random, name: str, xs: list[int], kinds: tuple[str, ...]) -> tuple[str, Apply]:
    """A statement on list ``name`` (with state ``xs``) that changes it, and how it does."""
    size = len(xs)
    valid = [
        kind
        for kind in kinds
        if (kind in ("append", "insert", "extend") and size < MAX_LENGTH)
        or (kind in ("pop", "remove") and size > 1)
        or (kind == "reverse" and xs != xs[::-1])
        or (kind == "sort" and xs != sorted(xs))
        or kind == "setitem"
    ]
    kind = rng.choice(valid)  # never empty: generate() checks the kinds can always change x
    if kind == "append":
        v = _value(rng)
        return f"{name}.append({v})", lambda ys: ys.append(v)
    if kind == "insert":
        i, v = rng.randint(0, size), _value(rng)
        return f"{name}.insert({i}, {v})", lambda ys: ys.insert(i, v)
    if kind == "extend":
        vs = [_value(rng) for _ in range(rng.randint(1, min(3, MAX_LENGTH - size)))]
        return f"{name}.extend({vs!r})", lambda ys: ys.extend(vs)
    if kind == "pop":
        if rng.random() < 0.5:
            return f"{name}.pop()", lambda ys: ys.pop()
        i = rng.randrange(size)
        return f"{name}.pop({i})", lambda ys: ys.pop(i)
    if kind == "remove":
        v = rng.choice(xs)
        return f"{name}.remove({v})", lambda ys: ys.remove(v)
    if kind == "reverse":
        return f"{name}.reverse()", lambda ys: ys.reverse()
    if kind == "sort":
        return f"{name}.sort()", lambda ys: ys.sort()
    i = rng.randrange(size)
    v = rng.choice([w for w in range(VALUES[0], VALUES[1] + 1) if w != xs[i]])
    return f"{name}[{i}] = {v}", lambda ys: ys.__setitem__(i, v)


class _Irrelevant:
    """Statements that leave x alone; variables are created before they are used."""

    def __init__(self, rng: Random) -> None:
        self.rng = rng
        self.lists: dict[str, list[int]] = {}
        self.scalars: set[str] = set()

    def __call__(self) -> str:
        rng = self.rng
        kind = rng.choice(("print", "print_len", "list", "list", "count", "label"))
        if kind == "print":
            return f"print({rng.choice(_WORDS)!r})"
        if kind == "print_len":
            return f"print(len({VARIABLE}))"
        if kind == "label":
            return f"label = {rng.choice(_LABELS)!r}"
        if kind == "count":
            if "count" not in self.scalars:
                self.scalars.add("count")
                return f"count = {rng.randint(0, 9)}"
            return f"count += {rng.randint(1, 9)}"
        name = rng.choice(_OTHER_LISTS)
        if name not in self.lists:
            self.lists[name] = [_value(rng) for _ in range(INITIAL_LENGTH)]
            return f"{name} = {self.lists[name]!r}"
        text, apply = _operation(rng, name, self.lists[name], OPERATIONS)
        apply(self.lists[name])
        return text


def generate(
    seed: int | str,
    operations: int,
    irrelevant: int,
    query: Query = "list",
    *,
    kinds: tuple[str, ...] = OPERATIONS,
) -> Program:
    """A program of ``operations`` operations on x and ``irrelevant`` other statements, at
    random places among them, after the statement that creates x."""
    if operations < 0 or irrelevant < 0:
        raise ValueError("operations and irrelevant cannot be negative")
    if query not in QUERIES:
        raise ValueError(f"query must be one of {', '.join(QUERIES)}, got {query!r}")
    unknown = sorted(set(kinds) - set(OPERATIONS))
    if unknown or not kinds:
        raise ValueError(f"operations must be among {', '.join(OPERATIONS)}, got {unknown}")
    grows, shrinks = {"append", "insert", "extend"} & set(kinds), {"pop", "remove"} & set(kinds)
    if "setitem" not in kinds and not (grows and shrinks):
        raise ValueError("operations need setitem, or one that adds and one that removes")
    rng = Random(f"latent_list:{seed}")
    xs = [_value(rng) for _ in range(INITIAL_LENGTH)]
    statements = [Statement(f"{VARIABLE} = {xs!r}", True)]
    states = [tuple(xs)]
    others = _Irrelevant(Random(f"latent_list:{seed}:irrelevant"))
    slots = set(rng.sample(range(operations + irrelevant), irrelevant))
    for slot in range(operations + irrelevant):
        if slot in slots:
            statements.append(Statement(others(), False))
            continue
        text, apply = _operation(rng, VARIABLE, xs, kinds)
        apply(xs)
        statements.append(Statement(text, True))
        states.append(tuple(xs))
    index = rng.randrange(len(xs)) if query == "element" else None
    return Program(tuple(statements), tuple(states), query, index)
