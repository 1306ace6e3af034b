"""Versioned prompt templates. A released version never changes: edit by adding a new version."""

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
