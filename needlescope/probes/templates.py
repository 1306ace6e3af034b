"""Versioned prompt templates of the probes, by name. A released version never changes: edit by
adding a new version. Data only: config validation reads the names without importing a probe.

Counting-Stars' templates are in counting_stars/templates.py; U-NIAH's prompts (``uniah``,
``uniah-rag``) are built in cases/uniah.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptTemplate:
    version: str
    language: str
    text: str

    def render(self, **fields: object) -> str:
        return self.text.format(**fields)


_RECALL_EN_V1 = """\
Below is a long text. Several {digits}-digit numbers are hidden in it.

<text>
{haystack}
</text>

Find every {digits}-digit number in the text above and list them in the order in which they \
appear. Answer with one JSON object only, numbering them from "1": \
{{"1": first number, "2": second number, ...}}. Write nothing else."""

_RECALL_ZH_V1 = """\
下面是一段很长的文本，其中藏有若干个{digits}位数。

<text>
{haystack}
</text>

请找出上文中出现的每一个{digits}位数，并按它们出现的先后顺序列出。只用一个 JSON 对象作答，\
从 "1" 开始编号：{{"1": 第一个数, "2": 第二个数, ...}}。不要写任何其他内容。"""

# The recall seed's prompt, byte for byte (326 bytes of UTF-8; the dash is an en dash), then
# the haystack with its needles and nothing after it.
_RECALL_SEED = """\
Please give me an answer worth $200, think very carefully, and give me the best possible \
response.Extract all pure four-digit numbers (i.e., 1000–9999) interspersed within the text \
below, and output the numbers and their order of appearance in a JSON format following the \
example below:
{{
"1": 123,
"2": 234,
"3": 345
}}
---
{haystack}"""

RECALL_TEMPLATES: dict[str, PromptTemplate] = {
    "recall-en-v1": PromptTemplate("recall-en-v1", "en", _RECALL_EN_V1),
    "recall-zh-v1": PromptTemplate("recall-zh-v1", "zh", _RECALL_ZH_V1),
    "recall-seed": PromptTemplate("recall-seed", "en", _RECALL_SEED),
}
# Templates that reproduce a seed's experiment: its placement, values and insertion with them.
SEED_TEMPLATES = frozenset({"recall-seed"})


# --- goto -------------------------------------------------------------------------------------

GOTO_SEED = "goto-seed"  # the seed's own prompt and file

_GOTO_V1 = """\
The file below holds numbered register lines. One line in it, marked [EXECUTE THIS], is an \
instruction for you.

<file>
{file}
</file>

Carry out that instruction. Answer with the number alone."""

GOTO_TEMPLATES: dict[str, PromptTemplate] = {
    "goto-v1": PromptTemplate("goto-v1", "en", _GOTO_V1),
    # The seed's protocol: the file is the whole prompt.
    "goto-raw-v1": PromptTemplate("goto-raw-v1", "en", "{file}"),
    # The seed's own prompt and file, byte for byte (its file with the last newline dropped).
    GOTO_SEED: PromptTemplate(GOTO_SEED, "en", "Here are the file contents:\n{file}"),
}


# --- cases and rag ---------------------------------------------------------------------------

UNIAH = "uniah"  # U-NIAH's three messages (uniah.py)
UNIAH_RAG = "uniah-rag"  # U-NIAH's RAG prompt (uniah.py)

_CASES_EN_V1 = """\
Read the document below, then answer the question that follows it.

<document>
{haystack}
</document>

Question: {question}

Answer the question based only on the document above. Keep the answer short: a few words or \
one sentence."""

_CASES_ZH_V1 = """\
请阅读下面的文档，然后回答文档后面的问题。

<document>
{haystack}
</document>

问题：{question}

请只根据上面的文档作答。回答要简短：几个词或一句话。"""

CASES_TEMPLATES: dict[str, PromptTemplate] = {
    "cases-en-v1": PromptTemplate("cases-en-v1", "en", _CASES_EN_V1),
    "cases-zh-v1": PromptTemplate("cases-zh-v1", "zh", _CASES_ZH_V1),
}

# Every prompt a cases probe can take: needlescope's own (by the case's language), U-NIAH's.
CASES_PROMPTS = (*CASES_TEMPLATES, UNIAH)

_RAG_EN_V1 = """\
Below are passages from a long document, chosen for their relevance to a question. Read them, \
then answer the question that follows.

<passages>
{passages}
</passages>

Question: {question}

Answer the question based only on the passages above. Keep the answer short: a few words or \
one sentence."""

_RAG_ZH_V1 = """\
下面是从一篇长文档中按与问题的相关程度挑选出的若干段落。请阅读这些段落，然后回答后面的问题。

<passages>
{passages}
</passages>

问题：{question}

请只根据上面的段落作答。回答要简短：几个词或一句话。"""

RAG_TEMPLATES: dict[str, PromptTemplate] = {
    "rag-en-v1": PromptTemplate("rag-en-v1", "en", _RAG_EN_V1),
    "rag-zh-v1": PromptTemplate("rag-zh-v1", "zh", _RAG_ZH_V1),
}

RAG_PROMPTS = (*RAG_TEMPLATES, UNIAH_RAG)
