"""The recall seed's needle ranges: where its needles go, range by range (placement ``seed``).

A spec is parts separated by commas, each ``start-end`` with an optional ``:count``
(``0-1``, ``0-0.1:1,0.9-1:39``, ``200000-240000``), relative (fractions of the haystack) or
absolute (character indices); ``whole``, ``head``, ``middle`` and ``tail`` name relative
ranges. Needles are spread evenly inside each part, moved by ``jitter``; positions index the
haystack before insertion. :func:`seed_positions` refuses a part that covers no character;
:func:`provisional_positions` stands in while a fit tries sizes the ranges do not fit.

Design: docs/design/haystack.md#needle-ranges
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from needlescope.errors import LengthError

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*-\s*(\d+(?:\.\d*)?|\.\d+)(?:\s*:\s*(\d+))?")
_NAMED = {"whole": "0-1.0", "head": f"0-{1 / 3!r}", "middle": f"{1 / 3!r}-{2 / 3!r}"}
_NAMED["tail"] = f"{2 / 3!r}-1.0"


@dataclass(frozen=True)
class NeedleRange:
    start: float
    end: float
    relative: bool
    count: int | None = None

    def bounds(self, length: int) -> tuple[int, int]:
        """Character indices of the part in a haystack of ``length`` characters."""
        if self.relative:
            return int(length * self.start), int(length * self.end)
        return min(int(self.start), length), min(int(self.end), length)


def parse_needle_ranges(spec: str) -> tuple[NeedleRange, ...]:
    """The parts of a spec (see the module's docstring); ValueError names a bad one."""
    parts = [part.strip() for part in spec.split(",")]
    if not spec.strip() or "" in parts:
        raise ValueError(f"needle range {spec!r} has an empty part")
    ranges = []
    for part in parts:
        match = _PART.fullmatch(_NAMED.get(part, part))
        if match is None:
            raise ValueError(
                f"needle range {part!r} is neither a name (whole, head, middle, tail) nor"
                " start-end[:count], like 0-0.1:1 or 200000-240000"
            )
        low, high, count = match.groups()
        relative = "." in low or "." in high or (float(low) <= 1 and float(high) <= 1)
        start, end = float(low), float(high)
        if not start < end:
            raise ValueError(f"needle range {part!r}: its start must be below its end")
        if relative and end > 1:
            raise ValueError(f"needle range {part!r}: a relative range must lie within 0-1")
        ranges.append(NeedleRange(start, end, relative, None if count is None else int(count)))
    counted = [r.count is not None for r in ranges]
    if any(counted) and not all(counted):
        raise ValueError(f"needle range {spec!r}: give a count to every part or to none")
    return tuple(ranges)


def counted_needles(spec: str) -> int | None:
    """The needle count a spec's per-part counts set, or None when it has none."""
    ranges = parse_needle_ranges(spec)
    return sum(r.count or 0 for r in ranges) if ranges[0].count is not None else None


def uncovered_parts(spec: str, haystack_chars: int) -> list[str]:
    """The parts of ``spec`` that cover no character of a haystack of ``haystack_chars``."""
    parts = [part.strip() for part in spec.split(",")]
    ranges = parse_needle_ranges(spec)
    return [p for p, r in zip(parts, ranges, strict=True) if _empty(r.bounds(haystack_chars))]


def _empty(bounds: tuple[int, int]) -> bool:
    return bounds[1] <= bounds[0]


def needles_placed(spec: str, needles: int) -> int:
    """How many needles a provisional placement holds: the parts' counts, else ``needles``."""
    counted = counted_needles(spec)
    return needles if counted is None else counted


def provisional_positions(spec: str, needles: int, haystack_chars: int) -> list[int]:
    """Where the needles go in a haystack the ranges do not fit, while a fit searches for its
    size: all at its end. Only the number of needles counts then (it sets the length)."""
    return [haystack_chars] * needles_placed(spec, needles)


def _allocate(needles: int, lengths: list[int]) -> list[int]:
    total = sum(lengths)
    counts = [max(1, round(needles * length / total)) for length in lengths[:-1]]
    return [*counts, max(0, needles - sum(counts))]


def _spread(start: int, end: int, count: int, jitter: float, rng: random.Random) -> list[int]:
    length = end - start
    if count == 0:
        return []
    if count == 1:
        positions, interval = [start + length // 2], length // 2
    else:
        interval = length // (count - 1)
        positions = [start + i * interval for i in range(count - 1)] + [end]
    reach = int(interval * jitter)
    if reach == 0:
        return positions
    moved = []
    for index, position in enumerate(positions):
        if count > 1 and index == 0:
            position += rng.randint(0, reach)
        elif count > 1 and index == count - 1:
            position -= rng.randint(0, reach)
        else:
            position += rng.randint(-reach, reach)
        moved.append(min(end, max(start, position)))
    return moved


def seed_positions(
    spec: str, needles: int, haystack_chars: int, jitter: float, rng: random.Random
) -> list[int]:
    """Sorted character indices, in a haystack of ``haystack_chars``, of every needle;
    LengthError when a part covers no character of it."""
    ranges = parse_needle_ranges(spec)
    bounds = [r.bounds(haystack_chars) for r in ranges]
    if uncovered := uncovered_parts(spec, haystack_chars):
        raise LengthError(ranges_outside(uncovered, haystack_chars))
    if ranges[0].count is not None:
        counts = [r.count or 0 for r in ranges]
    else:
        counts = _allocate(needles, [end - start for start, end in bounds])
    positions: list[int] = []
    for (start, end), count in zip(bounds, counts, strict=True):
        positions += _spread(start, end, count, jitter, rng)
    return sorted(positions)


def ranges_outside(parts: list[str], haystack_chars: int) -> str:
    """Why a cell whose needle range parts cover nothing of its haystack cannot be built."""
    named = ", ".join(parts)
    return f"needle range {named} covers no character of the {haystack_chars:,}-character haystack"
