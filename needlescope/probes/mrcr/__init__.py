"""MRCR, OpenAI's multi-round coreference test, on conversations of our own making.

One request for a short piece of writing is repeated ``needles`` times (2, 4 or 8) among
others that fill the length; the last user turn asks for one occurrence, a nonce prepended.

- pieces.py: forms, topics and the piece generator
- conversation.py: the turns, the nonce, the final question
- fit.py: the most filler turns within a length in the model's tokens
- score.py: OpenAI's ratio, the nonce hit, the occurrence the answer reproduced

Design: docs/design/probes.md#mrcr
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports
from needlescope.probes.spec import ProbeSpec

if TYPE_CHECKING:
    from needlescope.probes.base import Probe
    from needlescope.probes.mrcr import probe as _module0
    from needlescope.probes.mrcr.conversation import (
        Conversation,
        final_question,
        ordinal,
    )
    from needlescope.probes.mrcr.fit import (
        OPENAI_BINS,
        Fitted,
        afit_conversation,
        content_tokens,
        fit_conversation,
        length_bin,
    )
    from needlescope.probes.mrcr.score import (
        MrcrScore,
        grade,
        openai_grade,
    )

    _checked0: Probe = _module0  # mypy checks the module against the protocol

PROBES = (
    ProbeSpec(
        "mrcr", "needlescope.probes.mrcr.probe", "needlescope.probes.mrcr.entry:MrcrProbe", 80
    ),
)

__all__ = [
    "OPENAI_BINS",
    "PROBES",
    "Conversation",
    "Fitted",
    "MrcrScore",
    "afit_conversation",
    "content_tokens",
    "conversation",
    "final_question",
    "fit_conversation",
    "grade",
    "length_bin",
    "openai_grade",
    "ordinal",
    "score",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Conversation": ".conversation",
        "Fitted": ".fit",
        "MrcrScore": ".score",
        "OPENAI_BINS": ".fit",
        "afit_conversation": ".fit",
        "content_tokens": ".fit",
        "final_question": ".conversation",
        "fit_conversation": ".fit",
        "grade": ".score",
        "length_bin": ".fit",
        "openai_grade": ".score",
        "ordinal": ".conversation",
    },
)
