"""A latent-list prompt: the program's statements, one per line marked ``>>> ``, spread evenly
through a filler at sentence boundaries, and a question about x at the end."""

from __future__ import annotations

import re

from needlescope.haystack import Inserted, insert_needles
from needlescope.probes.latent_list.program import VARIABLE, Program
from needlescope.probes.templates import PromptTemplate

PROMPT_VERSION = "latent-list-v1"
MARK = ">>> "

_LATENT_LIST_V1 = """\
The text below hides a short Python program: each line that starts with >>> is one statement. \
The statements run one after another, in the order they appear; the rest of the text is not \
part of the program.

<text>
{haystack}
</text>

{question}"""

TEMPLATES = {PROMPT_VERSION: PromptTemplate(PROMPT_VERSION, "en", _LATENT_LIST_V1)}

_QUESTIONS = {
    "list": (
        f"What is the value of {VARIABLE} after the last statement has run? Answer with the "
        "list as a Python literal, such as [12, 40, 7], and nothing else."
    ),
    "length": (
        f"What is len({VARIABLE}) after the last statement has run? Answer with the number alone."
    ),
    "element": (
        f"What is {VARIABLE}[{{index}}] after the last statement has run? "
        "Answer with the number alone."
    ),
}
_MARKED = re.compile(rf"^{re.escape(MARK)}(.*)$", re.MULTILINE)


def question(program: Program) -> str:
    return _QUESTIONS[program.query].format(index=program.index)


def haystack(program: Program, filler_text: str) -> Inserted:
    """The statements at evenly spaced sentence boundaries of ``filler_text``, each on a line
    of its own (all of them one after another when the filler is empty)."""
    lines = [f"\n{MARK}{s.text}\n" for s in program.statements]
    fractions = [(i + 1) / (len(lines) + 1) for i in range(len(lines))]
    return insert_needles(filler_text, lines, fractions, "sentence")


def prompt(program: Program, filler_text: str, version: str = PROMPT_VERSION) -> str:
    inserted = haystack(program, filler_text)
    return TEMPLATES[version].render(haystack=inserted.text, question=question(program))


def statements_in(text: str) -> list[str]:
    """The program as a reader finds it: every line that starts with the mark, in order."""
    return _MARKED.findall(text)
