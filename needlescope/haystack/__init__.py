"""Haystacks: the fillers (the ``a|`` pattern, noise, seeded prose, corpora), where needles go
(regions, depths, the recall seed's needle ranges), and inserting them into the text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.haystack._fillers import (
        PAPER_KIND,
        PROSE_VERSION,
        Filler,
        PaperCorpusFiller,
        PatternFiller,
        WholeFileFiller,
        as_is_files,
        filler_from_spec,
    )
    from needlescope.haystack._insert import (
        Inserted,
        insert_at,
        insert_needles,
        last_sentence_end,
        parse_regions,
        place_needles,
    )
    from needlescope.haystack._needle_ranges import (
        counted_needles,
        provisional_positions,
        ranges_outside,
        seed_positions,
        uncovered_parts,
    )
    from needlescope.haystack._text import storable, storable_values

__all__ = [
    "PAPER_KIND",
    "PROSE_VERSION",
    "Filler",
    "Inserted",
    "PaperCorpusFiller",
    "PatternFiller",
    "WholeFileFiller",
    "as_is_files",
    "counted_needles",
    "filler_from_spec",
    "insert_at",
    "insert_needles",
    "last_sentence_end",
    "parse_regions",
    "place_needles",
    "provisional_positions",
    "ranges_outside",
    "seed_positions",
    "storable",
    "storable_values",
    "uncovered_parts",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Filler": "._fillers",
        "PAPER_KIND": "._fillers",
        "PROSE_VERSION": "._fillers",
        "PaperCorpusFiller": "._fillers",
        "PatternFiller": "._fillers",
        "WholeFileFiller": "._fillers",
        "as_is_files": "._fillers",
        "filler_from_spec": "._fillers",
        "Inserted": "._insert",
        "insert_at": "._insert",
        "insert_needles": "._insert",
        "last_sentence_end": "._insert",
        "parse_regions": "._insert",
        "place_needles": "._insert",
        "counted_needles": "._needle_ranges",
        "provisional_positions": "._needle_ranges",
        "ranges_outside": "._needle_ranges",
        "seed_positions": "._needle_ranges",
        "uncovered_parts": "._needle_ranges",
        "storable": "._text",
        "storable_values": "._text",
    },
)
