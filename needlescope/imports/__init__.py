"""Results of other needle tools, read into typed records (``records``), one reader a tool.

- ``read_gkamradt``: gkamradt/LLMTest_NeedleInAHaystack's per-test and list-style files.
- ``read_counting_stars``: the Counting-Stars repository's ``results/*.txt``.
- ``read_uniah``: U-NIAH's ``results/…_results.json`` with their ``detail_results`` logs.
- ``read_ruler``: RULER's ``pred/<task>.jsonl``.

A reader returns every record of the path given, or raises ``ImportFormatError`` (one line:
``PATH: what is wrong``) and returns nothing. Readers only read: grading and writing rows is
the importer's job.
"""

from needlescope.imports.counting_stars import read_counting_stars
from needlescope.imports.errors import ImportFormatError
from needlescope.imports.gkamradt import read_gkamradt
from needlescope.imports.records import CaseAnswer, RulerAnswer, Source, StarsAnswer
from needlescope.imports.ruler import read_ruler
from needlescope.imports.uniah import read_uniah

__all__ = [
    "CaseAnswer",
    "ImportFormatError",
    "RulerAnswer",
    "Source",
    "StarsAnswer",
    "read_counting_stars",
    "read_gkamradt",
    "read_ruler",
    "read_uniah",
]
