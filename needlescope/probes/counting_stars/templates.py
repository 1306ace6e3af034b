"""Counting-Stars prompt templates: needlescope's own (``-v1``) and the paper's (``-paper``).

A template is the star sentence, the question and how the two meet the haystack. Released
templates never change: a new wording is a new name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Splice = Literal["sentence", "paper"]


@dataclass(frozen=True)
class StarsTemplate:
    language: Literal["en", "zh"]
    reasoning: bool  # each star also names a mistaken count that was corrected
    star: str  # formatted with {count}, and {wrong} in the reasoning variant
    question: str  # follows the haystack after ``joiner``
    joiner: str = "\n\n"
    # sentence: each star closes one of M equal parts, at a sentence end (needlescope's);
    # paper: the repository's splicing loop, as it is (paper.py).
    splice: Splice = "sentence"


_STAR_EN = "Gazing upward, the little penguin counted {count} ★."
_STAR_EN_REASONING = (
    "Gazing upward, the little penguin counted {wrong} ★, then realised it had slipped, counted "
    "once more, and this time got it right: {count} ★."
)
_ASK_EN = (
    "All night long the little penguin has been gazing at the sky and counting ★; every count is "
    "written somewhere in the text above. Help the little penguin gather how many ★ it counted "
    "each time. {which}Do not add the numbers up: give one number per count, as JSON only, in "
    'exactly this form: {{"little_penguin": [x, x, x, ...]}}. Write no explanation.'
)
_STAR_ZH = "小企鹅抬头望向夜空，这一次数到了{count}颗★。"
_STAR_ZH_REASONING = (
    "小企鹅抬头望向夜空，先数到了{wrong}颗★，后来发现数错了，"
    "又仔细重数了一遍，这次数对了，是{count}颗★。"
)
_ASK_ZH = (
    "整个夜晚，小企鹅都在仰望星空、一遍又一遍地数★，每一次数的结果都写在上面的文字里。"
    "请帮小企鹅把每次数到的★的颗数收集起来。{which}不要把它们加起来，每次数的结果对应一个数字，"
    '只输出 JSON，格式如下：{{"小企鹅": [x, x, x, ...]}}。不要写任何解释。'
)
_WHICH_EN = (
    "Some counts were wrong and were done again; for those, keep only the corrected number. "
)
_WHICH_ZH = "有几次小企鹅数错了又重数，这时只保留重数后正确的颗数。"

# The paper's texts, exactly as issue 13 gives them; the question follows four newlines.
_PAPER_JOINER = "\n\n\n\n"
_PAPER_STAR_EN = "\nThe little penguin counted {count} ★\n"
_PAPER_STAR_EN_REASONING = (
    "\nThe little penguin counted {wrong} ★, but found that a mistake had been made, so the "
    "counting was done again, and this time {count} ★ was counted correctly.\n"
)
_PAPER_ASK_EN = (
    "On this moonlit and misty night, the little penguin is looking up at the sky and "
    "concentrating on counting ★. Please help the little penguin collect the number of ★, for "
    'example: {"little_penguin": [x, x, x,...]}. The summation is not required, and the numbers '
    "in [x, x, x,...] represent the counted number of ★ by the little penguin. Only output the "
    "results in JSON format without any explanation."
)
_PAPER_ASK_EN_REASONING = (
    "On this moonlit and misty night, the little penguin is looking up at the sky and "
    "concentrating on counting ★. Please help the little penguin collect the correct number of "
    '★, for example: {"little_penguin": [x, x, x,...]}. The summation is not required, and the '
    "numbers in [x, x, x,...] represent the correctly counted number of ★ by the little penguin. "
    "Only output the results in JSON format without any explanation."
)
_PAPER_STAR_ZH = "\n小企鹅数了{count}颗★\n"
_PAPER_STAR_ZH_REASONING = (
    "\n小企鹅数了{wrong}颗★，但发现数错了，于是又数了一遍，这次数对了，是{count}颗★\n"
)
_PAPER_ASK_ZH = (
    "在这个月光皎洁、云雾缭绕的夜晚，小企鹅正望向天空，全神贯注地数★。"
    '请帮助小企鹅收集所数★的颗数，按照如下格式：{"小企鹅":[x,x,x,...]}，不要求和，'
    "[x,x,x,...]中数字为小企鹅每次数★的颗数，仅以JSON格式输出结果，不需要输出任何解释。"
)
_PAPER_ASK_ZH_REASONING = (
    "在这个月光皎洁、云雾缭绕的夜晚，小企鹅正望向天空，全神贯注地数★。"
    '请帮助小企鹅收集所数★的正确颗数，按照如下格式：{"小企鹅":[x,x,x,...]}，不要求和，'
    "[x,x,x,...]中数字为小企鹅正确数★的颗数，仅以JSON格式输出结果，不需要输出任何解释。"
)


def _paper(language: Literal["en", "zh"], star: str, question: str) -> StarsTemplate:
    reasoning = "{wrong}" in star
    return StarsTemplate(language, reasoning, star, question, _PAPER_JOINER, "paper")


TEMPLATES: dict[str, StarsTemplate] = {
    "stars-en-v1": StarsTemplate("en", False, _STAR_EN, _ASK_EN.format(which="")),
    "stars-zh-v1": StarsTemplate("zh", False, _STAR_ZH, _ASK_ZH.format(which="")),
    "stars-reasoning-en-v1": StarsTemplate(
        "en", True, _STAR_EN_REASONING, _ASK_EN.format(which=_WHICH_EN)
    ),
    "stars-reasoning-zh-v1": StarsTemplate(
        "zh", True, _STAR_ZH_REASONING, _ASK_ZH.format(which=_WHICH_ZH)
    ),
    "stars-en-paper": _paper("en", _PAPER_STAR_EN, _PAPER_ASK_EN),
    "stars-zh-paper": _paper("zh", _PAPER_STAR_ZH, _PAPER_ASK_ZH),
    "stars-reasoning-en-paper": _paper("en", _PAPER_STAR_EN_REASONING, _PAPER_ASK_EN_REASONING),
    "stars-reasoning-zh-paper": _paper("zh", _PAPER_STAR_ZH_REASONING, _PAPER_ASK_ZH_REASONING),
}


def template_version(language: str, reasoning: bool) -> str:
    """needlescope's own template of a language and variant (the default when no `prompts`)."""
    return f"stars-{'reasoning-' if reasoning else ''}{language}-v1"
