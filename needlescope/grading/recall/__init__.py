"""Grading of the recall task: the model lists every hidden number, in order, as JSON.

One definition for every recall reply, the recall seed's, reproducing its published figures
exactly (``tests/grading/test_golden_seed.py``): :mod:`.parse` reads a reply in the seed's two
steps (extraction, then ordering), :mod:`.score` gives its accuracy and key counts,
:mod:`.analysis` the per-needle error analysis from the seed's LCS, and :mod:`.batch` grades
a batch of replies into the columns the warehouse stores. Pure functions, no I/O.
"""

from needlescope.grading.recall.analysis import (
    Duplicate,
    ErrorAnalysis,
    Hallucination,
    NeedleOutcome,
    Outcome,
    analyze_errors,
    duplicates,
    hallucinations,
    lcs_anchors,
    needle_outcomes,
)
from needlescope.grading.recall.batch import (
    DuplicateColumns,
    HallucinationColumns,
    NeedleColumns,
    RecallBatch,
    grade_recall_batch,
)
from needlescope.grading.recall.parse import (
    EMPTY_REPLY,
    Extraction,
    Reading,
    ReplySource,
    extract_answer,
    order_answer,
    read_reply,
    read_stored,
)
from needlescope.grading.recall.score import (
    RecallGrade,
    grade_recall,
    grade_stored,
    recall_accuracy,
)
from needlescope.grading.recall.values import Value, canonical_value

__all__ = [
    "EMPTY_REPLY",
    "Duplicate",
    "DuplicateColumns",
    "ErrorAnalysis",
    "Extraction",
    "Hallucination",
    "HallucinationColumns",
    "NeedleColumns",
    "NeedleOutcome",
    "Outcome",
    "Reading",
    "RecallBatch",
    "RecallGrade",
    "ReplySource",
    "Value",
    "analyze_errors",
    "canonical_value",
    "duplicates",
    "extract_answer",
    "grade_recall",
    "grade_recall_batch",
    "grade_stored",
    "hallucinations",
    "lcs_anchors",
    "needle_outcomes",
    "order_answer",
    "read_reply",
    "read_stored",
    "recall_accuracy",
]
