"""Fitting a prompt to a length: measures (characters, bytes, tokens), the search over the
filler's size, fits by whole and by piece counts, and the context windows they must fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.fitting._pieces import SEPARATOR, PieceCounter, PieceCounts, separable
    from needlescope.fitting._rounds import fit_in_rounds
    from needlescope.fitting._search import fit_to_length, measure_text
    from needlescope.fitting._whole import (
        CHARS_PER_TOKEN,
        ProvenFit,
        RememberedFit,
        Starts,
        WholeFit,
        fit_from,
        references,
    )
    from needlescope.fitting._windows import (
        CONTEXT_MARGIN,
        context_window,
        fits_context,
        local_slot_size,
    )

__all__ = [
    "CHARS_PER_TOKEN",
    "CONTEXT_MARGIN",
    "SEPARATOR",
    "PieceCounter",
    "PieceCounts",
    "ProvenFit",
    "RememberedFit",
    "Starts",
    "WholeFit",
    "context_window",
    "fit_from",
    "fit_in_rounds",
    "fit_to_length",
    "fits_context",
    "local_slot_size",
    "measure_text",
    "references",
    "separable",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "PieceCounter": "._pieces",
        "PieceCounts": "._pieces",
        "SEPARATOR": "._pieces",
        "separable": "._pieces",
        "fit_in_rounds": "._rounds",
        "fit_to_length": "._search",
        "measure_text": "._search",
        "CHARS_PER_TOKEN": "._whole",
        "ProvenFit": "._whole",
        "RememberedFit": "._whole",
        "Starts": "._whole",
        "WholeFit": "._whole",
        "fit_from": "._whole",
        "references": "._whole",
        "CONTEXT_MARGIN": "._windows",
        "context_window": "._windows",
        "fits_context": "._windows",
        "local_slot_size": "._windows",
    },
)
