"""MRCR, OpenAI's multi-round coreference test, on conversations of our own making.

A conversation of real user / assistant turns in which users ask for short pieces of writing
(a poem about tapirs, a short story about lighthouses…) and the assistant's turns hold our
seeded generator's pieces; one request is repeated ``needles`` times (2, 4 or 8) with different
replies among other requests that fill the length; the last user turn asks for one occurrence
with a nonce prepended. Scored by OpenAI's rule (score.py).

- pieces.py: forms, topics and the piece generator
- conversation.py: the turns, the nonce, the final question
- fit.py: the most filler turns within a length in the model's tokens
- score.py: OpenAI's ratio, the nonce hit, the occurrence the answer reproduced
"""

from needlescope.probes.mrcr.conversation import (
    Conversation,
    conversation,
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
from needlescope.probes.mrcr.score import MrcrScore, grade, openai_grade, score

__all__ = [
    "OPENAI_BINS",
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
