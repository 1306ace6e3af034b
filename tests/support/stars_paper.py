"""The Counting-Stars paper's construction written out from issue 13, independently of
needlescope's code: its texts, its haystacks and its splicing loop (for unit and e2e tests)."""

from __future__ import annotations

import re
import string
from pathlib import Path

# The paper's texts as issue 13 gives them (the reasoning questions spelled out).
STAR_EN = "\nThe little penguin counted {n} ★\n"
STAR_ZH = "\n小企鹅数了{n}颗★\n"
STAR_EN_REASONING = (
    "\nThe little penguin counted {wrong} ★, but found that a mistake had been made, so the"
    " counting was done again, and this time {right} ★ was counted correctly.\n"
)
STAR_ZH_REASONING = (
    "\n小企鹅数了{wrong}颗★，但发现数错了，于是又数了一遍，这次数对了，是{right}颗★\n"
)
ASK_EN = (
    "On this moonlit and misty night, the little penguin is looking up at the sky and"
    " concentrating on counting ★. Please help the little penguin collect the number of ★, for"
    ' example: {"little_penguin": [x, x, x,...]}. The summation is not required, and the'
    " numbers in [x, x, x,...] represent the counted number of ★ by the little penguin. Only"
    " output the results in JSON format without any explanation."
)
ASK_ZH = (
    "在这个月光皎洁、云雾缭绕的夜晚，小企鹅正望向天空，全神贯注地数★。请帮助小企鹅收集所数★的"
    '颗数，按照如下格式：{"小企鹅":[x,x,x,...]}，不要求和，[x,x,x,...]中数字为小企鹅每次数★的'
    "颗数，仅以JSON格式输出结果，不需要输出任何解释。"
)
ASK_EN_REASONING = ASK_EN.replace(
    "collect the number of ★", "collect the correct number of ★"
).replace("represent the counted number", "represent the correctly counted number")
ASK_ZH_REASONING = ASK_ZH.replace("收集所数★的颗数", "收集所数★的正确颗数").replace(
    "小企鹅每次数★的颗数", "小企鹅正确数★的颗数"
)


def english_haystack(folder: Path, j: int) -> str:
    """The .txt files in name order, newlines made spaces, split on single spaces, j pieces."""
    text = ""
    for path in sorted(folder.glob("*.txt"), key=lambda p: p.name):
        with path.open(encoding="utf-8") as handle:
            text += handle.read().replace("\n", " ")
    return " ".join(text.split(" ")[:j])


def chinese_haystack(file: Path, j: int) -> str:
    """Lines stripped, dashes a space; spaces, ASCII punctuation and Latin letters removed."""
    text = ""
    with file.open(encoding="utf-8") as handle:
        for line in handle.readlines():
            text += line.strip().replace("------------", " ").replace(" ", "")
    text = re.sub(f"[{re.escape(string.punctuation)}]", "", text)
    return re.sub("[a-zA-Z]", "", text)[:j]


def papers_loop(context: str, star_texts: list[str], language: str) -> str:
    """The repository's loop, written out as issue 13 states it."""
    j = len(context.split(" ")) if language == "en" else len(context)
    m = len(star_texts)
    for i, star in enumerate(star_texts):
        k = i * (j // m)
        if language == "zh":
            at = k + j // m + len(star) * i
            context = context[:at] + star + context[at:]
        else:
            words, w = context.split(" "), len(star.split(" "))
            context = (
                " ".join(words[: w * i + k + j // m]) + star + " ".join(words[j // m + k + w * i :])
            )
    return context
