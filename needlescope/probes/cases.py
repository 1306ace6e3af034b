"""The cases probe: U-NIAH needle cases (needles, a question, a true answer) at depth percents.

The first needle goes at the cell's depth percent of the filler, the others evenly between it and
the end (the original multi-needle test: needle i at depth + i × (100 − depth) / n), each at the
nearest sentence boundary and never after the sentence the length cut in two. A case travels in
the cell's ``probe_params`` (with its content hash), so a stored cell rebuilds without its file.

Keyword recall, the deterministic grade: a keyword is found when it occurs in the reply,
case-insensitively; a Latin keyword as a whole word give or take a plural or possessive ending
("hazelnuts" matches "hazelnut", "Hazelnuts" and "hazelnut's"; "fig" does not match "figure"),
a Chinese one anywhere (Chinese has no spaces to mark words). A needle's recall is the share of
its keywords found; it counts as *recalled* when that share is at least one half. Accuracy is the
mean recall over the needles × 100. A needle whose words the case's true answer does not use
has no default keywords: it is not checked (its detail says so) and the mean is over the others.
The LLM judge (needlescope/judge.py) grades the same answer separately.

U-NIAH's own terms (``prompts: [uniah]``, ``length_budget: seed``) are in probes/uniah.py.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from needlescope.cells import Cell, canonical_json, filler_identity, model_fields, short_hash
from needlescope.config import CasesProbe, SweepConfig
from needlescope.errors import ConfigError
from needlescope.fillers import Filler
from needlescope.haystack import Inserted, insert_needles, last_sentence_end
from needlescope.probes import uniah
from needlescope.probes.base import Grade, NeedleResult, Rendered, joined
from needlescope.probes.templates import PromptTemplate

NAME = "cases"
FITS_FILLER = True
PLACEMENT = "depth"
REGION = "whole"
GRADER = "keywords-v1"  # the keyword-recall rule above; bump it when the rule changes
RECALLED_SHARE = 0.5  # a needle is recalled when at least this share of its keywords is found
SIGMOID_STEEPNESS = 0.1  # the original needle test's logistic: 100 / (1 + e^(-0.1 (x - 50)))

Language = Literal["en", "zh"]
Spacing = Literal["linear", "sigmoid"]

_CASES_EN_V1 = """\
Read the document below, then answer the question that follows it.

<document>
{haystack}
</document>

Question: {question}

Answer the question based only on the document above. Keep the answer short: a few words or \
one sentence."""

_CASES_ZH_V1 = """\
请阅读下面的文档，然后回答文档后面的问题。

<document>
{haystack}
</document>

问题：{question}

请只根据上面的文档作答。回答要简短：几个词或一句话。"""

TEMPLATES: dict[str, PromptTemplate] = {
    "cases-en-v1": PromptTemplate("cases-en-v1", "en", _CASES_EN_V1),
    "cases-zh-v1": PromptTemplate("cases-zh-v1", "zh", _CASES_ZH_V1),
}


# Every prompt a cases probe can take: needlescope's own (by the case's language), U-NIAH's.
PROMPTS = (*TEMPLATES, uniah.TEMPLATE)
LOG = logging.getLogger(__name__)


def prompt_version(language: str) -> str:
    return f"cases-{language}-v1"


# --- cases ------------------------------------------------------------------------------------


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


_CASE_KEYS = {"needles", "question", "true_answer", "language"}
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

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_TOKEN = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>(?:(?![{_CJK}])[^\W_])+)")
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
# A sentence ends after . ? ! (and closing quotes) before a space, after 。？！, or at a blank line:
# needlescope.haystack's rule for sentence boundaries.
_SENTENCE_END = re.compile(r"[.?!][\"'”’)\]]*(?=\s|\Z)|[。？！][”’」』）】\"']*|\n[ \t]*\n")


def detect_language(text: str) -> Language:
    return "zh" if _CJK_CHAR.search(text) else "en"


def _words(text: str) -> list[str]:
    return [m.group("word") for m in _TOKEN.finditer(text) if m.group("word")]


def _runs(text: str) -> list[str]:
    return [m.group("cjk") for m in _TOKEN.finditer(text) if m.group("cjk")]


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


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
    folded = [_fold(n) for n in needles]
    shared_words: set[str] = set()
    shared_chars: set[str] = set()
    if len(needles) > 1:
        shared_words = set.intersection(*(set(_words(n)) for n in folded))
        shared_chars = set.intersection(*(set("".join(_runs(n))) for n in folded))
    question_words = set(_words(_fold(question)))
    question_chars = set("".join(_runs(_fold(question))))
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


# --- keyword recall ---------------------------------------------------------------------------


def keyword_pattern(keyword: str) -> re.Pattern[str] | None:
    """What ``keyword_found`` looks for in a folded reply (see the module docstring)."""
    key = " ".join(_fold(keyword).split())
    if not key:
        return None
    latin = not _CJK_CHAR.match(key[0]) and key[0].isalnum()
    plural = key.endswith("s") and not key.endswith("ss") and key[-2:-1].isalpha()
    if latin and plural and " " not in key and len(key) >= 4:
        key = key[:-1]  # "hazelnuts" also matches "hazelnut"
    body = r"\s+".join(re.escape(part) for part in key.split(" "))
    if latin:
        # A whole word, allowing a plural or possessive ending: "fig" matches "figs", not "figure".
        body = rf"(?<![^\W_]){body}(?:s|es|['’]s)?(?![^\W_])"
    return re.compile(body)


def keyword_found(keyword: str, reply: str) -> bool:
    """Whether ``keyword`` occurs in ``reply`` (see the module docstring for the rule)."""
    pattern = keyword_pattern(keyword)
    return pattern is not None and pattern.search(_fold(reply)) is not None


def needle_recall(keywords: Sequence[str], reply: str) -> tuple[float, tuple[str, ...]]:
    """The share of ``keywords`` found in ``reply``, and the ones found."""
    found = tuple(k for k in keywords if keyword_found(k, reply))
    return (len(found) / len(keywords) if keywords else 0.0), found


# --- depths -----------------------------------------------------------------------------------


def depth_percents(count: int, spacing: Spacing = "linear") -> list[float]:
    """``count`` depth percents from 0 to 100 (one: 50), evenly or denser at both ends."""
    if count < 1:
        raise ValueError(f"depth count must be positive, got {count}")
    if count == 1:
        return [50.0]
    linear = [100 * i / (count - 1) for i in range(count)]
    if spacing == "linear":
        return [round(x, 3) for x in linear]
    if spacing == "sigmoid":
        return [x if x in (0, 100) else round(_logistic(x), 3) for x in linear]
    raise ValueError(f"depth spacing must be linear or sigmoid, got {spacing!r}")


def _logistic(x: float) -> float:
    return 100 / (1 + math.exp(-SIGMOID_STEEPNESS * (x - 50)))


def needle_depths(first: float, count: int) -> list[float]:
    """The first needle at ``first`` percent, the others evenly spaced after it, before 100."""
    step = (100 - first) / count
    return [first + i * step for i in range(count)]


def probe_depths(probe: CasesProbe) -> list[float]:
    if probe.depths is not None:
        return list(dict.fromkeys(float(d) for d in probe.depths))
    return list(dict.fromkeys(depth_percents(probe.depth_count, probe.depth_spacing)))


# --- grid, prompt, grade ----------------------------------------------------------------------


def budget_params(probe: CasesProbe) -> dict[str, Any]:
    """The length budget's settings, when not the default: older cells keep their ids."""
    if probe.length_budget == "prompt":
        return {}
    return {
        "length_budget": probe.length_budget,
        "final_context_length_buffer": probe.final_context_length_buffer,
    }


def prompts_for(probe: CasesProbe, case: Case) -> list[str]:
    """The probe's prompts; by default needlescope's own in the case's language."""
    return list(probe.prompts) if probe.prompts else [prompt_version(case.language)]


def expand(config: SweepConfig, probe: CasesProbe) -> Iterator[Cell]:
    cases = load_cases(probe.cases_file, probe.cases)
    axes = itertools.product(
        config.tested_models(),
        cases.values(),
        probe.lengths,
        probe_depths(probe),
        probe.fillers,
        range(probe.repeats),
    )
    budget = budget_params(probe)
    for model, case, length, depth, filler, repeat in axes:
        for prompt in prompts_for(probe, case):
            yield Cell(
                **model_fields(model),
                probe=NAME,
                probe_params=canonical_json({**case.params(probe.answer_buffer), **budget}),
                filler=filler,
                filler_spec=filler_identity(config.filler_spec(filler)),
                placement=PLACEMENT,
                region=REGION,
                prompt_version=prompt,
                length=length,
                length_unit=probe.length_unit,
                needle_count=len(case.needles),
                repeat=repeat,
                seed=config.seed,
                depth=depth,
            )


def case_of(cell: Cell) -> Case:
    return Case.from_params(cell.params())


def seeded(cell: Cell) -> bool:
    """Whether the cell is sized in U-NIAH's terms (``length_budget: seed``)."""
    return cell.params().get("length_budget") == "seed"


def seed_filler_chars(cell: Cell, filler: Filler) -> int:
    """``length_budget: seed``: the filler characters that, with the needles, fill the cell's
    length minus the buffer in cl100k tokens (see probes/uniah.py)."""
    params = cell.params()
    case = case_of(cell)
    share = uniah.haystack_tokens(
        cell.length, int(params["final_context_length_buffer"]), [n.text for n in case.needles]
    )
    return uniah.seed_filler_chars(filler, share)


def haystack(
    case: Case, depth: float, filler: Filler, filler_chars: int, *, end_at_100: bool = False
) -> Inserted:
    """``filler_chars`` of filler with the case's needles at sentence boundaries.

    Depths are fractions of the filler up to its last complete sentence: the filler is cut at
    ``filler_chars``, usually inside a sentence, and a needle never follows a cut sentence.
    With ``end_at_100`` (U-NIAH's rule), depth 100 puts the needles after everything, the cut
    sentence included.
    """
    text = filler.text(filler_chars)
    if end_at_100 and depth >= 100:
        return _appended(text, [n.text for n in case.needles])
    end = last_sentence_end(text)  # the last _SENTENCE_END match, found from the tail
    head = len(text) if end is None else end
    fractions = [d / 100 for d in needle_depths(depth, len(case.needles))]
    inserted = insert_needles(text[:head], [n.text for n in case.needles], fractions, "sentence")
    return Inserted(inserted.text + text[head:], inserted.offsets, inserted.spans)


def _appended(text: str, needles: Sequence[str]) -> Inserted:
    """The needles after ``text``, in order; a space between two words that would touch."""
    pieces = [text]
    offsets: list[int] = []
    spans: list[tuple[int, int]] = []
    size = len(text)
    previous = text[-1:] if text else ""
    for needle in needles:
        touching = previous and needle and not previous.isspace() and not needle[0].isspace()
        lead = " " if touching else ""
        spans.append((size, size + len(lead) + len(needle)))
        offsets.append(size + len(lead))
        pieces.append(lead + needle)
        size += len(lead) + len(needle)
        previous = needle[-1:] or previous
    return Inserted("".join(pieces), tuple(offsets), tuple(spans))


def haystack_id(cell: Cell, case: Case) -> str:
    """The context id the cell has with needlescope's own prompt: cells with the same haystack
    and needles share it whatever their prompt (``facts.pair_id``; RAG cells pair on it)."""
    return replace(cell, prompt_version=prompt_version(case.language)).context_id


def expected_of(case: Case) -> dict[str, Any]:
    return {
        "case": case.name,
        "needles": [n.text for n in case.needles],
        "keywords": [list(n.keywords) for n in case.needles],
        "question": case.question,
        "true_answer": case.true_answer,
    }


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """The prompt around ``filler_chars`` characters of filler (deterministic)."""
    case = case_of(cell)
    depth = 50.0 if cell.depth is None else cell.depth
    inserted = haystack(case, depth, filler, filler_chars, end_at_100=seeded(cell))
    if cell.prompt_version == uniah.TEMPLATE:
        messages = uniah.messages(inserted.text, case.question)
        prompt = joined(messages)
    else:
        messages = ()
        prompt = TEMPLATES[cell.prompt_version].render(
            haystack=inserted.text, question=case.question
        )
    size = max(len(inserted.text), 1)
    fractions = tuple(round(o / size, 6) for o in inserted.offsets)
    return Rendered(
        prompt_text=prompt,
        haystack_text=inserted.text,
        expected=expected_of(case),
        fractions=fractions,
        offsets=inserted.offsets,
        facts={
            "depth": depth,
            "needle_depths": [round(d, 6) for d in needle_depths(depth, len(case.needles))],
            "needle_fractions": list(fractions),
            "pair_id": haystack_id(cell, case),
        },
        messages=messages,
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    """Tokens kept free for the answer: the generation's max_tokens, else answer_buffer."""
    if max_tokens is not None:
        return max_tokens
    return int(cell.params()["answer_buffer"])


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    """Keyword recall per needle (never raises; a malformed ``expected`` is a parse error).

    A needle without keywords is not checked: its detail entry says so (``recall`` null) and it
    has no row of its own, so the mean is over the needles that are checked.
    """
    try:
        keyword_lists = [[str(k) for k in ks] for ks in expected["keywords"]]
    except (KeyError, TypeError, ValueError):
        return Grade(parse_ok=False, parse_error="expected has no keyword lists", accuracy=None)
    reply = response if isinstance(response, str) else ""
    shares: list[float] = []
    entries: list[dict[str, Any]] = []
    needles: list[NeedleResult] = []
    found_lists: list[list[str]] = []
    for index, keywords in enumerate(keyword_lists, start=1):
        if not keywords:
            entries.append({"needle": index, "recall": None, "recalled": None, "found": []})
            found_lists.append([])
            continue
        share, found = needle_recall(keywords, reply)
        recalled = share >= RECALLED_SHARE
        outcome = "correct" if recalled else ("partial" if found else "missing")
        shares.append(share)
        found_lists.append(list(found))
        needles.append(NeedleResult(index, None, recalled, outcome))
        entries.append(
            {"needle": index, "recall": round(share, 6), "recalled": recalled, "found": list(found)}
        )
    recalled_count = sum(n.in_lcs for n in needles)
    accuracy = 100 * sum(shares) / len(shares) if shares else None
    return Grade(
        parse_ok=True,
        parse_error=None,
        accuracy=accuracy,
        answered=found_lists,
        figures={"correct": recalled_count, "missing": len(needles) - recalled_count},
        detail={"grader": GRADER, "needles": entries},
        needles=tuple(needles),
    )
