"""Results of gkamradt/LLMTest_NeedleInAHaystack (the original needle test), as CaseAnswers.

Two layouts, both read from every ``.json`` file under the path given: one JSON object per test
(``<model>_len_<L>_depth_<D×100>_results.json``; ``_results_2.json`` a second run, ``repeat``
2) and a list of ``{token_limit, depth_percent, score}`` (score-only records, no reply). The
files hold neither the question (by default the tool's own) nor a true answer: the needle,
which the tool's judge compared the reply with, is the true answer here. Per cell (model,
length, depth) the tool's figure is the mean ``score`` over its runs.

Design: docs/design/imports.md#gkamradt
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from needlescope.imports.errors import ImportFormatError
from needlescope.imports.reading import Fields, fail, files_under, load_json
from needlescope.imports.records import CaseAnswer, Key, Source

TOOL: Final = "gkamradt"
DEFAULT_QUESTION = "What is the best thing to do in San Francisco?"
TEST_NAME = re.compile(
    r"^(?P<stem>.*_len_(?P<length>[0-9]+)_depth_(?P<depth>[0-9]+))_results(?:_(?P<run>[0-9]+))?\.json$"
)
RUN_SUFFIX = re.compile(r"_(?P<run>[2-9]|[1-9][0-9])\.json$")


def read_gkamradt(path: str | Path, *, question: str = DEFAULT_QUESTION) -> list[CaseAnswer]:
    """Every answer under ``path`` (a result file, or a folder of them), in path order."""
    records: list[CaseAnswer] = []
    for file in files_under(Path(path), (".json",), "gkamradt result files (.json)"):
        data = load_json(file)
        if isinstance(data, list):
            records += _list_style(file, data)
        else:
            records.append(_one_test(file, data, question))
    _unique(records)
    return records


def _one_test(file: Path, data: Any, question: str) -> CaseAnswer:
    fields = Fields.of(data, Source(str(file)), "a JSON object (one test) or a list")
    named = TEST_NAME.match(file.name)
    length = length_of(fields, named)
    depth = depth_of(fields, named)
    if named and named["run"]:
        repeat = int(named["run"])
    else:
        repeat = fields.optional_integer("version", minimum=1) or 1
    needles = needles_of(fields)
    model = fields.optional_text("model")
    duration = fields.optional_number("test_duration_seconds")
    if duration is not None and duration < 0:
        fields.fail('field "test_duration_seconds" must not be negative')
    settings = {k: fields.raw(k) for k in ("file_name", "version") if fields.has(k)}
    return CaseAnswer(
        tool=TOOL,
        model=model,
        length=length,
        depth_percent=depth,
        repeat=repeat,
        needles=needles,
        question=question,
        true_answer=" ".join(n.strip() for n in needles) or None,
        response=fields.text("model_response"),
        original_score=fields.optional_number("score"),
        judge_unreadable=False,
        answered_at=fields.utc("test_timestamp_utc"),
        duration_s=duration,
        mode="llm",
        settings=settings,
        source=fields.source,
        key=("test", model or "", length, depth, repeat),
    )


def length_of(fields: Fields, named: re.Match[str] | None) -> int:
    if not fields.has("context_length") and named:
        return int(named["length"])
    length = fields.integer("context_length", minimum=1)
    if named and int(named["length"]) != length:
        fields.fail(f"context_length is {length} but the file name says {named['length']}")
    return length


def depth_of(fields: Fields, named: re.Match[str] | None) -> float:
    if not fields.has("depth_percent") and named:
        return int(named["depth"]) / 100
    depth = fields.number("depth_percent")
    if not 0 <= depth <= 100:
        fields.fail(f"depth_percent must be between 0 and 100, not {depth}")
    # The tool names the file with int(depth × 100): 64.296 → 6429.
    if named and abs(depth * 100 - int(named["depth"])) >= 1:
        fields.fail(f"depth_percent is {depth} but the file name says {named['depth']} (× 100)")
    return float(depth)


def needles_of(fields: Fields) -> tuple[str, ...]:
    if isinstance(fields.raw("needle"), list):
        return fields.texts("needle")
    if fields.has("needle"):
        return (fields.text("needle"),)
    return fields.texts("needles") if fields.has("needles") else ()


def _list_style(file: Path, data: list[Any]) -> list[CaseAnswer]:
    if not data:
        raise ImportFormatError(file, "an empty list: no results")
    suffix = RUN_SUFFIX.search(file.name)
    repeat = int(suffix["run"]) if suffix else 1
    records = []
    for entry, item in enumerate(data):
        fields = Fields.of(item, Source(str(file), entry=entry))
        length = fields.integer("token_limit", minimum=1)
        depth = fields.number("depth_percent")
        if not 0 <= depth <= 100:
            fields.fail(f"depth_percent must be between 0 and 100, not {depth}")
        records.append(
            CaseAnswer(
                tool=TOOL,
                model=None,
                length=length,
                depth_percent=float(depth),
                repeat=repeat,
                needles=(),
                question=None,
                true_answer=None,
                response=None,
                original_score=fields.number("score"),
                judge_unreadable=False,
                answered_at=None,
                duration_s=None,
                mode="llm",
                settings={},
                source=fields.source,
                key=("list", length, float(depth), repeat),
            )
        )
    return records


def _unique(records: list[CaseAnswer]) -> None:
    seen: dict[Key, Source] = {}
    for record in records:
        first = seen.setdefault(record.key, record.source)
        if first is not record.source:
            fail(
                record.source,
                f"the same test as {first} (length {record.length}, depth"
                f" {record.depth_percent:g}%, run {record.repeat})",
            )
