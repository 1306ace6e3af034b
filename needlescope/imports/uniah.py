"""U-NIAH result files (LLM and RAG runs), as CaseAnswers.

One JSON object per test (``…/results/<experiment>/<model>_len_<L>_depth_<D×100>_results.json``)
with ``needles`` and ``score`` (the judge's 1-10, or -1 when unreadable: ``judge_unreadable``);
the question comes from the request log beside it (``…/detail_results/…``). Neither holds the
case's true answer. Every ``*_results.json`` under the path given is read; per cell
(experiment, model, length, depth) U-NIAH's figure is the mean score of the readable judgments.

Design: docs/design/imports.md#uniah
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from needlescope.imports.gkamradt import TEST_NAME, depth_of, length_of, needles_of
from needlescope.imports.reading import Fields, fail, files_under, jsonl, load_json
from needlescope.imports.records import CaseAnswer, Key, Source

TOOL: Final = "uniah"
UNREADABLE = -1  # U-NIAH's score when none of its judge's tries could be read
RESULTS_DIR = "results"
DETAILS_DIR = "detail_results"
KEPT_CONFIG = ("context_mode", "top_k", "chunk_size", "chunk_overlap", "embedding_model")
REVERSE = re.compile(r"_reverse_(?P<reverse>True|False)_")


@dataclass(frozen=True)
class _Detail:
    question: str
    answer: str | None
    config: dict[str, Any]
    source: Source


def read_uniah(path: str | Path) -> list[CaseAnswer]:
    """Every test under ``path`` (a result file, or a folder holding them), in path order."""
    root = Path(path)
    records = [
        _read(file, root) for file in files_under(root, ("_results.json",), "U-NIAH result files")
    ]
    seen: dict[Key, Source] = {}
    for record in records:
        first = seen.setdefault(record.key, record.source)
        if first is not record.source:
            fail(record.source, f"the same test as {first}")
    return records


def _read(file: Path, root: Path) -> CaseAnswer:
    fields = Fields.of(load_json(file), Source(str(file)), "a JSON object (one test)")
    named = TEST_NAME.match(file.name)
    experiment, details, run = _where(file, root)
    length = length_of(fields, named)
    depth = depth_of(fields, named)
    model = fields.optional_text("model")
    repeat = fields.optional_integer("version", minimum=1) or 1
    response = fields.text("model_response")
    score = fields.optional_number("score")
    duration = fields.optional_number("test_duration_seconds")
    if duration is not None and duration < 0:
        fields.fail('field "test_duration_seconds" must not be negative')
    detail = _detail(details, named["stem"] if named else None, response)
    settings: dict[str, Any] = {"experiment": experiment}
    if detail is not None:
        settings |= {k: detail.config[k] for k in KEPT_CONFIG if detail.config.get(k) is not None}
        settings["detail_file"] = Path(detail.source.path).name
        if reverse := REVERSE.search(settings["detail_file"]):
            settings["reverse"] = reverse["reverse"] == "True"
    return CaseAnswer(
        tool=TOOL,
        model=model,
        length=length,
        depth_percent=depth,
        repeat=repeat,
        needles=needles_of(fields),
        question=None if detail is None else detail.question,
        true_answer=None,
        response=response,
        original_score=None if score == UNREADABLE else score,
        judge_unreadable=score == UNREADABLE,
        answered_at=fields.utc("test_timestamp_utc"),
        duration_s=duration,
        mode=_mode(run, detail),
        settings=settings,
        source=fields.source,
        key=("uniah", experiment, model or "", length, depth, repeat),
    )


def _where(file: Path, root: Path) -> tuple[str, Path | None, str]:
    """The experiment (the folders between ``results`` and the file), the folder of its
    request logs and the run's folder above ``results`` (``rag_multi_needle``…); without a
    ``results`` folder, the folders below the path given and no logs."""
    parents = file.parent.parts
    if RESULTS_DIR in parents:
        at = len(parents) - 1 - parents[::-1].index(RESULTS_DIR)
        experiment = parents[at + 1 :]
        run = parents[at - 1] if at > 0 else ""
        return "/".join(experiment), Path(*parents[:at], DETAILS_DIR, *experiment), run
    below = file.parent.relative_to(root) if root.is_dir() else Path()
    return ("" if below == Path() else below.as_posix()), None, ""


def _detail(folder: Path | None, stem: str | None, response: str) -> _Detail | None:
    if folder is None or stem is None or not folder.is_dir():
        return None
    found: list[_Detail] = []
    for log in sorted(folder.glob(f"log_{glob.escape(stem)}_*.jsonl")):
        for line, data in jsonl(log):
            fields = Fields.of(data, Source(str(log), line=line))
            found.append(
                _Detail(
                    question=fields.text("question"),
                    answer=fields.optional_text("answer"),
                    config=fields.mapping("config"),
                    source=fields.source,
                )
            )
    matching = [d for d in found if d.answer == response]
    chosen = matching or found
    return chosen[-1] if chosen else None


def _mode(run: str, detail: _Detail | None) -> Literal["llm", "rag"]:
    if detail is not None and detail.config.get("context_mode") is not None:
        return "rag"
    return "rag" if run.startswith("rag") else "llm"
