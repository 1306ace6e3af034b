"""RULER prediction files (``<task>.jsonl``), as RulerAnswers, and RULER's per-task scores.

RULER's ``run.sh`` writes ``<root>/<model>/<benchmark>/<max_seq_length>/pred/<task>.jsonl``,
one line per sample; the path given may be a prediction file, a ``pred`` folder or any folder
above (chunk files ``<task>-<n>.jsonl`` count as their task's). Scoring is RULER's
(``needlescope.probes.ruler.scoring``); a task's figure is the mean over its samples × 100,
rounded to 2 decimals (``task_scores``), as ``summary.csv`` has it (``read_summary``).

Design: docs/design/imports.md#ruler
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from needlescope.imports.errors import ImportFormatError
from needlescope.imports.reading import (
    Fields,
    fail,
    files_under,
    jsonl,
    read_text,
    sha256,
    shown,
)
from needlescope.imports.records import Key, RulerAnswer, Source
from needlescope.probes.ruler.scoring import (
    match_all,
    match_part,
    postprocess,
    string_match_all,
    string_match_part,
)

Metric = Literal["string_match_all", "string_match_part"]
MATCH_ALL: Metric = "string_match_all"
MATCH_PART: Metric = "string_match_part"
# RULER's scripts/synthetic.yaml, in its order (the order of summary.csv's columns).
TASKS: dict[str, Metric] = {
    "niah_single_1": MATCH_ALL,
    "niah_single_2": MATCH_ALL,
    "niah_single_3": MATCH_ALL,
    "niah_multikey_1": MATCH_ALL,
    "niah_multikey_2": MATCH_ALL,
    "niah_multikey_3": MATCH_ALL,
    "niah_multivalue": MATCH_ALL,
    "niah_multiquery": MATCH_ALL,
    "vt": MATCH_ALL,
    "cwe": MATCH_ALL,
    "fwe": MATCH_ALL,
    "qa_1": MATCH_PART,
    "qa_2": MATCH_PART,
}
# Variants of RULER's tasks under names of their own (niah_single_4, qa_3…) score the same way.
NAMED_LIKE = (
    (re.compile(r"niah_[a-z]+(_[0-9]+)?"), MATCH_ALL),
    (re.compile(r"qa_[0-9]+"), MATCH_PART),
)
CHUNK = re.compile(r"(?P<task>.*[^_]+)-[0-9]+")  # RULER's pattern for a chunk of a task's file
PRED_DIR = "pred"


def metric_of(task: str, metrics: Mapping[str, Metric] | None = None) -> Metric | None:
    if metrics and task in metrics:
        return metrics[task]
    if task in TASKS:
        return TASKS[task]
    return next((metric for name, metric in NAMED_LIKE if name.fullmatch(task)), None)


def read_ruler(
    path: str | Path, *, metrics: Mapping[str, Metric] | None = None
) -> list[RulerAnswer]:
    """Every prediction under ``path``. ``metrics`` names the metric of tasks RULER does not
    define (a task this reader cannot place is an error, not a guess)."""
    root = Path(path)
    records: list[RulerAnswer] = []
    for file in _prediction_files(root):
        records += _read_file(file, root, metrics)
    seen: dict[Key, Source] = {}
    for record in records:
        first = seen.setdefault(record.key, record.source)
        if first is not record.source:
            fail(record.source, f"the same sample ({record.sample_id!r}) as {first}")
    return records


def _prediction_files(root: Path) -> list[Path]:
    if root.is_dir():
        folders = [root] if root.name == PRED_DIR else sorted(root.rglob(PRED_DIR))
        folders = [f for f in folders if f.is_dir()] or [root]
        found = sorted(f for folder in folders for f in folder.glob("*.jsonl") if f.is_file())
        if not found:
            raise ImportFormatError(root, "no RULER prediction files (pred/<task>.jsonl)")
        return found
    return files_under(root, (".jsonl",), "RULER prediction files")


def _read_file(file: Path, root: Path, metrics: Mapping[str, Metric] | None) -> list[RulerAnswer]:
    chunk = CHUNK.fullmatch(file.stem)
    task = chunk["task"] if chunk else file.stem
    metric = metric_of(task, metrics)
    if metric is None:
        raise ImportFormatError(
            file, f"no metric known for task {task!r}: RULER's tasks are {', '.join(TASKS)}"
        )
    max_seq_length = _max_seq_length(file.parent)
    folder = str(max_seq_length) if max_seq_length is not None else _below(file.parent, root)
    records = []
    for line, data in jsonl(file):
        fields = Fields.of(data, Source(str(file), line=line))
        index = fields.integer("index")
        others = fields.mapping("others")
        sample_id = others.get("id", index)
        if isinstance(sample_id, bool) or not isinstance(sample_id, str | int):
            fields.fail(f'field "others.id" must be text or a whole number, not {shown(sample_id)}')
        prompt = fields.text("input")
        records.append(
            RulerAnswer(
                task=task,
                metric=metric,
                max_seq_length=max_seq_length,
                folder=folder,
                index=index,
                sample_id=sample_id,
                prediction=fields.text("pred"),
                references=_references(fields),
                input_chars=len(prompt),
                input_sha256=sha256(prompt),
                length=_counted(fields, "length"),
                truncation=_counted(fields, "truncation"),
                others=others,
                source=fields.source,
                key=("ruler", folder, task, sample_id),
            )
        )
    return records


def _max_seq_length(folder: Path) -> int | None:
    """RULER's length folder: the one above ``pred``, or the folder itself."""
    named = folder.parent.name if folder.name == PRED_DIR else folder.name
    return int(named) if named.isascii() and named.isdigit() else None


def _below(folder: Path, root: Path) -> str:
    if root.is_dir() and folder != root:
        return folder.relative_to(root).as_posix()
    return folder.name


def _references(fields: Fields) -> tuple[str, ...]:
    # RULER reads "outputs", or a lone "output" as a list of one.
    if fields.has("output") and not fields.has("outputs"):
        references: tuple[str, ...] = (fields.text("output"),)
    else:
        references = fields.texts("outputs")
    if not references:
        fields.fail('field "outputs" is empty: nothing to look for in the prediction')
    return references


def _counted(fields: Fields, name: str) -> int | None:
    value = fields.optional_integer(name)
    return None if value is None or value < 0 else value  # RULER writes -1 for "not counted"


# --- RULER's figures ------------------------------------------------------------------------


def score(record: RulerAnswer) -> float:
    """One sample's score, 0-100 (not rounded), under its task's metric."""
    if record.metric == MATCH_PART:
        return match_part(record.prediction, record.references)
    return match_all(record.prediction, record.references).accuracy


def is_null(record: RulerAnswer) -> bool:
    """An empty prediction once post-processed: RULER's "Nulls"."""
    return not postprocess(record.prediction)


def task_scores(records: Iterable[RulerAnswer]) -> dict[tuple[str, str], float]:
    """Per (folder, task), RULER's task score: its metric over the samples, × 100, rounded
    to 2 decimals, computed as RULER computes it."""
    groups = _groups(records)
    return {
        key: (string_match_part if group[0].metric == MATCH_PART else string_match_all)(
            [r.prediction for r in group], [r.references for r in group]
        )
        for key, group in groups.items()
    }


def task_nulls(records: Iterable[RulerAnswer]) -> dict[tuple[str, str], str]:
    """Per (folder, task), RULER's "Nulls": empty predictions over samples, as ``k/n``."""
    return {
        key: f"{sum(map(is_null, group))}/{len(group)}" for key, group in _groups(records).items()
    }


def _groups(records: Iterable[RulerAnswer]) -> dict[tuple[str, str], list[RulerAnswer]]:
    groups: dict[tuple[str, str], list[RulerAnswer]] = defaultdict(list)
    for record in records:
        groups[(record.folder, record.task)].append(record)
    order = list(TASKS)
    return dict(
        sorted(
            groups.items(),
            key=lambda item: (
                _length_order(item[0][0]),
                order.index(item[0][1]) if item[0][1] in order else len(order),
                item[0][1],
            ),
        )
    )


def _length_order(folder: str) -> tuple[int, str]:
    return (int(folder), "") if folder.isascii() and folder.isdigit() else (1 << 62, folder)


def read_summary(path: str | Path) -> dict[str, tuple[float, str]]:
    """A ``summary.csv`` of RULER's ``evaluate.py``: task → (score, nulls). Its rows are
    ``Tasks``, ``Score`` and ``Nulls`` under pandas' column numbers."""
    file = Path(path)
    rows = {row[0]: row[1:] for row in csv.reader(io.StringIO(read_text(file))) if row}
    missing = [name for name in ("Tasks", "Score", "Nulls") if name not in rows]
    if missing:
        raise ImportFormatError(file, f"no {missing[0]} row: not a RULER summary.csv")
    tasks, scores, nulls = rows["Tasks"], rows["Score"], rows["Nulls"]
    if not len(tasks) == len(scores) == len(nulls):
        raise ImportFormatError(file, "the Tasks, Score and Nulls rows differ in length")
    try:
        values = [float(s) for s in scores]
    except ValueError:
        raise ImportFormatError(file, f"a score that is not a number in {scores!r}"[:200]) from None
    return {task: (value, null) for task, value, null in zip(tasks, values, nulls, strict=True)}
