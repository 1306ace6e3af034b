"""Distractors: near-miss statements placed beside a case's needles, and which one an answer
repeated (after Chroma's context-rot study).

A case may list ``distractors:`` and ``distractor_depths:``; without depths they are spread
over the depths the needles leave free. A distractor's keywords are its distinctive words; an
answer *contains* one when at least half of them are found in it, and the answer's
``distractor`` is the one with the largest share found (the earliest on a tie). The reading
works for any keyword lists, such as RULER niah's distractor values.

Design: docs/design/probes.md#distractors
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from needlescope.errors import ConfigError
from needlescope.grading.keywords import RECALLED_SHARE, keyword_found, needle_recall
from needlescope.haystack import insert_needles
from needlescope.probes.cases.case_file import default_keywords

DISTRACTOR_KEYS = frozenset({"distractors", "distractor_depths"})
HIT_SHARE = RECALLED_SHARE


@dataclass(frozen=True)
class Distractor:
    text: str
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class Distractors:
    """A case's distractors, and their depths when the case gives them."""

    items: tuple[Distractor, ...]
    depths: tuple[float, ...] | None = None

    def content(self) -> dict[str, Any]:
        """What joins the case's content (and so its hash and its cells' probe_params)."""
        content: dict[str, Any] = {
            "distractors": [d.text for d in self.items],
            "distractor_keywords": [list(d.keywords) for d in self.items],
        }
        if self.depths is not None:
            content["distractor_depths"] = list(self.depths)
        return content

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Distractors | None:
        if not params.get("distractors"):
            return None
        items = tuple(
            Distractor(str(text), tuple(str(k) for k in keywords))
            for text, keywords in zip(
                params["distractors"], params["distractor_keywords"], strict=True
            )
        )
        depths = params.get("distractor_depths")
        return cls(items, None if depths is None else tuple(float(d) for d in depths))

    def depths_for(self, needle_depths: Sequence[float]) -> list[float]:
        """Each distractor's depth percent: as given, or spread over what the needles leave."""
        if self.depths is not None:
            return list(self.depths)
        return spread_depths(needle_depths, len(self.items))


# --- depths and placement ---------------------------------------------------------------------


def spread_depths(needle_depths: Sequence[float], count: int) -> list[float]:
    """``count`` depth percents, evenly spread over the slots the needles do not take."""
    if count < 0:
        raise ValueError(f"distractor count cannot be negative, got {count}")
    total = len(needle_depths) + count
    slots = [100 * (i + 0.5) / total for i in range(total)]
    free = list(range(total))
    for depth in needle_depths:
        nearest = min(free, key=lambda i: (abs(slots[i] - depth), i))
        free.remove(nearest)
    return [round(slots[i], 6) for i in free]


@dataclass(frozen=True)
class Placed:
    text: str
    needle_offsets: tuple[int, ...]
    distractor_offsets: tuple[int, ...]


def place(
    text: str,
    needles: Sequence[str],
    needle_depths: Sequence[float],
    distractors: Sequence[str],
    distractor_depths: Sequence[float],
) -> Placed:
    """Needles and distractors at their depth percents of ``text``, at sentence boundaries;
    at the same depth a needle goes first."""
    if len(needles) != len(needle_depths) or len(distractors) != len(distractor_depths):
        raise ValueError("each needle and each distractor needs one depth")
    items = sorted(
        [(d, 0, i, t) for i, (t, d) in enumerate(zip(needles, needle_depths, strict=True))]
        + [
            (d, 1, i, t)
            for i, (t, d) in enumerate(zip(distractors, distractor_depths, strict=True))
        ]
    )
    inserted = insert_needles(
        text, [t for *_, t in items], [d / 100 for d, *_ in items], "sentence"
    )
    needle_offsets = [0] * len(needles)
    distractor_offsets = [0] * len(distractors)
    for (_, kind, index, _), offset in zip(items, inserted.offsets, strict=True):
        (distractor_offsets if kind else needle_offsets)[index] = offset
    return Placed(inserted.text, tuple(needle_offsets), tuple(distractor_offsets))


# --- which distractor an answer repeated ------------------------------------------------------


@dataclass(frozen=True)
class DistractorHit:
    distractor: int | None  # 1-based: the distractor the answer repeated, None when none
    matched: tuple[int, ...]  # every distractor the answer contains (1-based, in order)
    shares: tuple[float, ...]  # the share of each distractor's keywords found in the answer


def distractor_hit(
    answer: str, keyword_lists: Sequence[Sequence[str]], share: float = HIT_SHARE
) -> DistractorHit:
    """Which distractors' keywords ``answer`` contains (never raises on any answer)."""
    text = answer if isinstance(answer, str) else ""
    shares = tuple(needle_recall(list(keywords), text)[0] for keywords in keyword_lists)
    matched = tuple(i for i, s in enumerate(shares, start=1) if keyword_lists[i - 1] and s >= share)
    best = max(matched, key=lambda i: (shares[i - 1], -i), default=None)
    return DistractorHit(best, matched, shares)


# --- reading a case's distractors -------------------------------------------------------------


def distinctive_keywords(text: str, forbidden: str, siblings: str = "") -> tuple[str, ...]:
    """``text``'s words that ``forbidden`` does not use, nor ``siblings`` when any are left."""
    for avoid in (f"{forbidden}\n{siblings}", forbidden):
        found = tuple(
            k for k in default_keywords([text], question=avoid)[0] if not keyword_found(k, avoid)
        )
        if found:
            return found
    return ()


def parse_distractors(
    body: Mapping[str, Any],
    where: str,
    *,
    needles: Sequence[str],
    question: str,
    true_answer: str,
) -> Distractors | None:
    """A case's ``distractors`` and ``distractor_depths``; None when it has none. ``where``
    names the case in errors (``"configs/cases/x.yaml: case 'name'"``)."""
    raw = body.get("distractors")
    if raw is None:
        if body.get("distractor_depths") is not None:
            raise ConfigError(f"{where}: distractor_depths given without distractors")
        return None
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: distractors must be a non-empty list")
    texts: list[str] = []
    given: list[tuple[str, ...] | None] = []
    for index, entry in enumerate(raw):
        label = f"{where}: distractors.{index}"
        if isinstance(entry, Mapping):
            extra = sorted(set(map(str, entry)) - {"text", "keywords"})
            if extra:
                raise ConfigError(f"{label}: unknown field {extra[0]!r}")
            texts.append(_text(entry.get("text"), f"{label}.text"))
            given.append(_keywords(entry["keywords"], label) if "keywords" in entry else None)
        else:
            texts.append(_text(entry, label))
            given.append(None)
    forbidden = "\n".join([*needles, question, true_answer])
    items = []
    for index, (text, keywords) in enumerate(zip(texts, given, strict=True)):
        label = f"{where}: distractors.{index}"
        if keywords is None:
            siblings = "\n".join(t for i, t in enumerate(texts) if i != index)
            keywords = distinctive_keywords(text, forbidden, siblings)
            if not keywords:
                raise ConfigError(
                    f"{label}: no word of its own (every one is in a needle, the question or"
                    " the true answer); give keywords"
                )
        for k_index, keyword in enumerate(keywords):
            if keyword_found(keyword, true_answer):
                raise ConfigError(
                    f"{label}.keywords.{k_index}: {keyword!r} is in the true answer, so it"
                    " cannot tell the distractor from a right answer"
                )
        items.append(Distractor(text, keywords))
    depths = _depths(body.get("distractor_depths"), len(items), where)
    return Distractors(tuple(items), depths)


def _text(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{label}: expected non-empty text")
    return " ".join(value.split())


def _keywords(value: Any, label: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{label}.keywords: expected a non-empty list of words")
    return tuple(_text(v, f"{label}.keywords.{i}") for i, v in enumerate(value))


def _depths(value: Any, count: int, where: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    label = f"{where}: distractor_depths"
    if not isinstance(value, list) or len(value) != count:
        raise ConfigError(f"{label}: expected a list of {count} depth percents, one a distractor")
    depths = []
    for index, depth in enumerate(value):
        if isinstance(depth, bool) or not isinstance(depth, int | float) or not 0 <= depth <= 100:
            raise ConfigError(f"{label}.{index}: expected a depth percent from 0 to 100")
        depths.append(float(depth))
    return tuple(depths)


def load_distractors(path: str | Path) -> dict[str, Distractors]:
    """The distractors of every case in a cases file that has some, by case name."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"cases file not found: {path}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable YAML file ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of case names to cases")
    found: dict[str, Distractors] = {}
    for name, body in data.items():
        if not isinstance(body, dict):
            continue  # a list of shared definitions (U-NIAH's format), or cases.py's to reject
        listed = body.get("needles")
        needles = [n.get("text", "") if isinstance(n, dict) else n for n in listed or []]
        parsed = parse_distractors(
            body,
            f"{path}: case {str(name)!r}",
            needles=[str(n) for n in needles],
            question=str(body.get("question", "")),
            true_answer=str(body.get("true_answer", "")),
        )
        if parsed is not None:
            found[str(name)] = parsed
    return found
