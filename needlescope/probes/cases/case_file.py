"""A needle-case file (U-NIAH's ``config/needle_cases.yaml`` layout): cases of needles, a
question and a true answer, read and checked with errors of one line, and each needle's
default keywords (what an answer that recalled it must say).

A case travels in a cell's ``probe_params`` (with its content hash), so a stored cell rebuilds
without its file.
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from needlescope.errors import ConfigError
from needlescope.grading.keywords import CJK, CJK_CHAR, fold, keyword_found
from needlescope.provenance import short_hash

Language = Literal["en", "zh"]
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Needle:
    text: str
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    name: str
    needles: tuple[Needle, ...]
    question: str
    true_answer: str
    language: Language

    def content(self) -> dict[str, Any]:
        """Everything that defines the case (the name aside): hashed, and carried in cells."""
        return {
            "needles": [n.text for n in self.needles],
            "keywords": [list(n.keywords) for n in self.needles],
            "question": self.question,
            "true_answer": self.true_answer,
            "language": self.language,
        }

    @property
    def sha256(self) -> str:
        return short_hash(self.content())

    def params(self, answer_buffer: int) -> dict[str, Any]:
        return {
            "case": self.name,
            "case_sha256": self.sha256,
            "answer_buffer": answer_buffer,
            **self.content(),
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Case:
        needles = tuple(
            Needle(str(text), tuple(str(k) for k in keywords))
            for text, keywords in zip(params["needles"], params["keywords"], strict=True)
        )
        return cls(
            name=str(params["case"]),
            needles=needles,
            question=str(params["question"]),
            true_answer=str(params["true_answer"]),
            language=params["language"],
        )


# distractors and distractor_depths are read by probes/distractors.py (load_distractors).
_CASE_KEYS = {"needles", "question", "true_answer", "language", "distractors", "distractor_depths"}
_NEEDLE_KEYS = {"text", "keywords"}


def load_cases(path: str | Path, names: Sequence[str] | None = None) -> dict[str, Case]:
    """The cases of a YAML file (all, or ``names`` in that order); errors are one line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"cases file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or "could not parse").split())
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    cases = parse_cases(data, str(path))
    if names is None:
        return cases
    unknown = [n for n in names if n not in cases]
    if unknown:
        known = ", ".join(cases) or "none"
        not_case = " (a list, not a case)" if unknown[0] in data else ""
        raise ConfigError(f"{path}: unknown case {unknown[0]!r}{not_case}; known: {known}")
    return {n: cases[n] for n in dict.fromkeys(names)}


def parse_cases(data: Any, source: str = "<cases>") -> dict[str, Case]:
    """Cases from parsed YAML: a mapping of case name to {needles, question, true_answer}.

    A top-level list is not a case: U-NIAH's file keeps YAML anchors (shared needles) in a
    ``definitions:`` list. Such entries are skipped, and named in a warning.
    """
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{source}: expected a mapping of case names to cases")
    skipped = tuple(str(name) for name, body in data.items() if isinstance(body, list))
    if skipped:
        _say_skipped(source, skipped)
    cases = {
        str(name): _parse_case(str(name), body, source)
        for name, body in data.items()
        if not isinstance(body, list)
    }
    if not cases:
        raise ConfigError(f"{source}: no cases, only lists ({', '.join(skipped)})")
    return cases


@functools.cache
def _say_skipped(source: str, names: tuple[str, ...]) -> None:
    """Once per file and process: a config is loaded and expanded more than once."""
    LOG.warning("%s: skipped %s: a list, not a case", source, ", ".join(names))


def _parse_case(name: str, body: Any, source: str) -> Case:
    where = f"{source}: case {name!r}"
    if not isinstance(body, dict):
        raise ConfigError(f"{where}: expected a mapping with needles, question and true_answer")
    unknown = sorted(set(map(str, body)) - _CASE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}")
    question = _text(body.get("question"), f"{where}: question")
    true_answer = _text(body.get("true_answer"), f"{where}: true_answer")
    raw_needles = body.get("needles")
    if not isinstance(raw_needles, list) or not raw_needles:
        raise ConfigError(f"{where}: needles must be a non-empty list")
    texts: list[str] = []
    given: list[tuple[str, ...] | None] = []
    for index, raw in enumerate(raw_needles):
        label = f"{where}: needles.{index}"
        if isinstance(raw, dict):
            extra = sorted(set(map(str, raw)) - _NEEDLE_KEYS)
            if extra:
                raise ConfigError(f"{label}: unknown field {extra[0]!r}")
            texts.append(_needle(raw.get("text"), f"{label}.text"))
            given.append(_keywords(raw["keywords"], label) if "keywords" in raw else None)
        else:
            texts.append(_needle(raw, label))
            given.append(None)
    language = body.get("language") or detect_language(question + "".join(texts))
    if language not in ("en", "zh"):
        raise ConfigError(f"{where}: language must be en or zh, got {language!r}")
    defaults = default_keywords(texts, question, true_answer)
    needles = []
    for index, (text, keywords, default) in enumerate(zip(texts, given, defaults, strict=True)):
        if keywords is None and not default and not _words(text) and not _runs(text):
            raise ConfigError(f"{where}: needles.{index}: no word to check; give keywords")
        needles.append(Needle(text, keywords if keywords is not None else default))
    if not any(n.keywords for n in needles):
        raise ConfigError(f"{where}: true_answer uses no needle's words; give keywords")
    return Case(name, tuple(needles), question, true_answer, language)


def _text(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{label}: expected non-empty text")
    return " ".join(value.split())


def _needle(value: Any, label: str) -> str:
    """A needle as written: U-NIAH's needles carry the spaces around them that join them to
    the haystack ("... sentence. Figs are ... pizza. Next ..."), so they are kept."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{label}: expected non-empty text")
    return value


def _keywords(value: Any, label: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{label}.keywords: expected a non-empty list of words")
    return tuple(_text(v, f"{label}.keywords.{i}") for i, v in enumerate(value))


# --- default keywords -------------------------------------------------------------------------

_TOKEN = re.compile(rf"(?P<cjk>[{CJK}]+)|(?P<word>(?:(?![{CJK}])[^\W_])+)")
_STOP_EN_WORDS = (
    "a about above after again against all also am an and another any are as at be because been "
    "before being below between both but by can could did do does doing don down during each "
    "either every few first for from further had has have having he her here hers herself him "
    "himself his how i if in into is it its itself just last least many may me might more most "
    "much must my myself neither next no nor not now of off on once one only or other our ours "
    "out over own same she should so some such than that the their theirs them then there these "
    "they this those through to too under until up upon very was we were what when where which "
    "while who whom whose why will with within without would yet you your yours"
)
_STOP_EN = frozenset(_STOP_EN_WORDS.split())
# Particles, pronouns and linking verbs: in Chinese they glue words together, they are not words.
_STOP_ZH = frozenset("的地得了着过是在和与及或也都就而被把这那之其个吗呢吧啊呀叫做为我你他她它们")
_MIN_WORD = 3  # shorter Latin words are dropped (numbers are always kept)


def detect_language(text: str) -> Language:
    return "zh" if CJK_CHAR.search(text) else "en"


def _words(text: str) -> list[str]:
    return [m.group("word") for m in _TOKEN.finditer(text) if m.group("word")]


def _runs(text: str) -> list[str]:
    return [m.group("cjk") for m in _TOKEN.finditer(text) if m.group("cjk")]


def default_keywords(
    needles: Sequence[str], question: str = "", true_answer: str | None = None
) -> list[tuple[str, ...]]:
    """The distinctive words of each needle: what an answer that recalled it must say.

    Latin words: drop stopwords, words under three letters (numbers stay), words in every needle
    of the case (with two or more needles) and words of the question. Chinese has no spaces: drop
    the same kinds of *characters* (particles, characters in every needle or in the question),
    cut the runs there, drop single characters and use the overlapping two-character pieces of
    what is left ("琉璃灯" → "琉璃", "璃灯").

    With a ``true_answer`` (as every case has), only the words the true answer uses are kept,
    and never one the question says: the true answer then recalls every needle fully, the
    question alone none. Latin words of no other needle come first; when none is left, words of
    other needles, then words in every needle are allowed back; a needle the true answer does
    not mention at all gets no keywords (it is not checked). Without one, the filters are
    relaxed in turn (question, then shared, then the rest) until a word is left.
    """
    folded = [fold(n) for n in needles]
    shared_words: set[str] = set()
    shared_chars: set[str] = set()
    if len(needles) > 1:
        shared_words = set.intersection(*(set(_words(n)) for n in folded))
        shared_chars = set.intersection(*(set("".join(_runs(n))) for n in folded))
    question_words = set(_words(fold(question)))
    question_chars = set("".join(_runs(fold(question))))
    if true_answer is not None:
        answered = []
        for index, needle in enumerate(needles):
            others = set().union(*(_words(n) for i, n in enumerate(folded) if i != index))
            answer_levels = [
                (others | question_words, shared_chars | question_chars),
                (shared_words | question_words, shared_chars | question_chars),
                (question_words, question_chars),
            ]
            answered.append(_answered_keywords(needle, true_answer, question, answer_levels))
        return answered
    levels = [
        (shared_words | question_words, shared_chars | question_chars, True),
        (shared_words, shared_chars, True),
        (set(), set(), True),
        (set(), set(), False),
    ]
    result = []
    for needle in needles:
        for drop_words, drop_chars, strict in levels:
            found = _needle_keywords(needle, drop_words, drop_chars, strict)
            if found:
                break
        result.append(found)
    return result


def _answered_keywords(
    needle: str, true_answer: str, question: str, levels: list[tuple[set[str], set[str]]]
) -> tuple[str, ...]:
    for drop_words, drop_chars in levels:
        found = tuple(
            k
            for k in _needle_keywords(needle, drop_words, drop_chars, True)
            if keyword_found(k, true_answer) and not keyword_found(k, question)
        )
        if found:
            return found
    return ()


def _needle_keywords(
    needle: str, drop_words: set[str], drop_chars: set[str], strict: bool
) -> tuple[str, ...]:
    keywords: list[str] = []
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", needle)):
        if match.group("word"):
            word = match.group("word")
            key = word.casefold()
            short = len(word) < _MIN_WORD and not word.isdigit()
            if not strict or (key not in _STOP_EN and not short and key not in drop_words):
                keywords.append(word)
            continue
        run = match.group("cjk")
        if not strict:
            keywords += [run] if len(run) <= 2 else _bigrams(run)
            continue
        removed = _STOP_ZH | drop_chars
        for piece in re.split("[" + re.escape("".join(sorted(removed))) + "]", run):
            if len(piece) >= 2:
                keywords += _bigrams(piece)
    unique: dict[str, str] = {}
    for keyword in keywords:
        unique.setdefault(keyword.casefold(), keyword)
    return tuple(unique.values())


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) <= 2 else [run[i : i + 2] for i in range(len(run) - 1)]
