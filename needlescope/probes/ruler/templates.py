"""RULER's prompts byte for byte (scripts/data/synthetic/constants.py), as version ``ruler``.

Each family's prompt is its template followed by its answer prefix; RULER formats the two
together, then cuts the prompt before the prefix when the model is to continue it. A released
version never changes: a variant of ours is a new version beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal["niah", "variable_tracking", "cwe", "fwe"]
FAMILIES: tuple[Family, ...] = ("niah", "variable_tracking", "cwe", "fwe")
RULER_VERSION = "ruler"

NIAH_NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
# np.round(np.linspace(0, 100, num=40)).astype(int): no value falls on a half, so round() agrees.
DEPTHS: tuple[int, ...] = tuple(round(100 * i / 39) for i in range(40))


@dataclass(frozen=True)
class RulerTemplate:
    family: Family
    version: str
    template: str
    answer_prefix: str
    tokens_to_generate: int  # what RULER's max_seq_length keeps for the answer


TEMPLATES: dict[Family, dict[str, RulerTemplate]] = {
    "niah": {
        RULER_VERSION: RulerTemplate(
            "niah",
            RULER_VERSION,
            "Some special magic {type_needle_v} are hidden within the following text. Make sure"
            " to memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
            "What are all the special magic {type_needle_v} for {query} mentioned in the"
            " provided text?",
            " The special magic {type_needle_v} for {query} mentioned in the provided text are",
            128,
        )
    },
    "variable_tracking": {
        RULER_VERSION: RulerTemplate(
            "variable_tracking",
            RULER_VERSION,
            "Memorize and track the chain(s) of variable assignment hidden in the following"
            " text.\n\n{context}\nQuestion: Find all variables that are assigned the value"
            " {query} in the text above.",
            # "assgined" is RULER's own spelling, kept: the prompt is RULER's byte for byte.
            " Answer: According to the chain(s) of variable assignment in the text above,"
            " {num_v} variables are assgined the value {query}, they are: ",
            30,
        )
    },
    "cwe": {
        RULER_VERSION: RulerTemplate(
            "cwe",
            RULER_VERSION,
            "Below is a numbered list of words. In these words, some appear more often than"
            " others. Memorize the ones that appear most often.\n{context}\nQuestion: What are"
            " the 10 most common words in the above list?",
            " Answer: The top 10 words that appear most often in the list are:",
            120,
        )
    },
    "fwe": {
        RULER_VERSION: RulerTemplate(
            "fwe",
            RULER_VERSION,
            "Read the following coded text and track the frequency of each coded word. Find the"
            " three most frequently appeared coded words. {context}\nQuestion: Do not provide any"
            " explanation. Please ignore the dots '....'. What are the three most frequently"
            " appeared words in the above coded text?",
            " Answer: According to the coded text above, the three most frequently appeared"
            " words are:",
            50,
        )
    },
}

TOKENS_TO_GENERATE: dict[Family, int] = {
    family: versions[RULER_VERSION].tokens_to_generate for family, versions in TEMPLATES.items()
}

# RULER's rewrite of the niah prompt when one value is asked for, applied in this order.
_SINGULAR = (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer"))


def template(family: Family, version: str = RULER_VERSION) -> RulerTemplate:
    try:
        return TEMPLATES[family][version]
    except KeyError:
        known = ", ".join(TEMPLATES.get(family, {})) or "none"
        raise KeyError(f"no {family} prompt version {version!r}; known: {known}") from None


def singular(text: str) -> str:
    """RULER's niah rewrite for a single asked value: Some→A, are all→is, are→is."""
    for old, new in _SINGULAR:
        text = text.replace(old, new)
    return text
