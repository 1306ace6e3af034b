"""What the readers return: one record per answer of another tool, in needlescope's terms.

A record holds what its tool's file holds, typed, and nothing graded yet: the tool's own score
(``original_score``, unscaled) sits beside the reply so that needlescope's grader can be run
on it later. ``key`` is the record's identity within one import of one tool and model: the
same file read again gives the same keys, and a reader refuses two records with one key.
``source`` names the file (and line or list entry) for messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Key = tuple[str | int | float, ...]


@dataclass(frozen=True)
class Source:
    path: str
    line: int | None = None  # 1-based line of a JSONL file
    entry: int | None = None  # 0-based item of a JSON list

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.path}: line {self.line}"
        if self.entry is not None:
            return f"{self.path}: entry {self.entry}"
        return self.path


@dataclass(frozen=True)
class CaseAnswer:
    """One needle-test answer (gkamradt's LLMTest_NeedleInAHaystack, U-NIAH): a reply to a
    question about needles placed at ``depth_percent`` of a ``length``-token context, with the
    tool's LLM-judge score. ``response`` is None for a score-only record (gkamradt's list-style
    files); ``original_score`` is None when the file has no score or the judgment could not be
    read (``judge_unreadable``: U-NIAH's -1)."""

    tool: Literal["gkamradt", "uniah"]
    model: str | None  # as the file names it; None when it does not
    length: int  # the tool's context length, in its tokenizer's tokens
    depth_percent: float  # 0-100, where the (first) needle went
    repeat: int  # 1-based: the tool's results version, or a second file of the same cell
    needles: tuple[str, ...]
    question: str | None
    true_answer: str | None
    response: str | None
    original_score: float | None
    judge_unreadable: bool
    answered_at: datetime | None  # UTC
    duration_s: float | None
    mode: Literal["llm", "rag"]
    settings: Mapping[str, Any]  # the tool's run settings worth keeping (U-NIAH's RAG mode…)
    source: Source
    key: Key

    @property
    def score_only(self) -> bool:
        return self.response is None


@dataclass(frozen=True)
class StarsAnswer:
    """One Counting-Stars answer: the model listed what the little penguin counted in a
    ``sky_size`` haystack holding ``len(counts)`` star sentences. Graded later by
    ``needlescope.probes.counting_stars.probe.grade(counts, PAPER_SCORING, response)``: the
    paper's comparison, its files being the paper's code's."""

    model: str | None
    language: Literal["en", "zh"]
    sky_size: int  # the repository's length unit (tokens; characters for its Chinese haystack)
    counts: tuple[int, ...]  # reference_counting_results: the truth, in context order
    response: str
    question: str | None  # retrieval_question: the instruction after the haystack
    prompt_chars: int | None  # the whole prompt ("question" in the file), not kept itself
    prompt_sha256: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    parameters: Mapping[str, Any]  # temperature and the like
    code: int | None  # the repository's request status (0: the API answered)
    repeat: int  # 1-based among the file's lines of the same sky size
    source: Source
    key: Key

    @property
    def star_count(self) -> int:
        return len(self.counts)


@dataclass(frozen=True)
class RulerAnswer:
    """One RULER prediction: a sample of ``task`` at ``max_seq_length`` (the folder RULER
    wrote it in), its references and the raw prediction (before RULER's post-processing)."""

    task: str
    metric: Literal["string_match_all", "string_match_part"]
    max_seq_length: int | None  # None when the folders do not say it
    folder: str  # max_seq_length's folder name, else the prediction folder under the path given
    index: int
    sample_id: str | int  # others.id when the sample has one, else index (RULER's rule)
    prediction: str
    references: tuple[str, ...]
    input_chars: int  # the prompt itself is not kept
    input_sha256: str
    length: int | None  # the sample's tokens as RULER counted them (-1 in the file: None)
    truncation: int | None
    others: Mapping[str, Any]
    source: Source
    key: Key
