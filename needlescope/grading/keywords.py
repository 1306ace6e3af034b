"""Keyword recall, the needle cases' deterministic grade: whether a keyword occurs in a reply.

A keyword is found when it occurs in the reply, case-insensitively (NFKC-folded): a Latin
keyword as a whole word give or take a plural or possessive ending ("hazelnuts" matches
"hazelnut", "Hazelnuts" and "hazelnut's"; "fig" does not match "figure"), a Chinese one
anywhere (Chinese has no spaces to mark words).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
CJK_CHAR = re.compile(f"[{CJK}]")
# A needle (or a distractor) counts as said when at least this share of its keywords is found.
RECALLED_SHARE = 0.5


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def keyword_pattern(keyword: str) -> re.Pattern[str] | None:
    """What ``keyword_found`` looks for in a folded reply (see the module docstring)."""
    key = " ".join(fold(keyword).split())
    if not key:
        return None
    latin = not CJK_CHAR.match(key[0]) and key[0].isalnum()
    plural = key.endswith("s") and not key.endswith("ss") and key[-2:-1].isalpha()
    if latin and plural and " " not in key and len(key) >= 4:
        key = key[:-1]  # "hazelnuts" also matches "hazelnut"
    body = r"\s+".join(re.escape(part) for part in key.split(" "))
    if latin:
        # A whole word, allowing a plural or possessive ending: "fig" matches "figs", not "figure".
        body = rf"(?<![^\W_]){body}(?:s|es|['’]s)?(?![^\W_])"
    return re.compile(body)


def keyword_found(keyword: str, reply: str) -> bool:
    """Whether ``keyword`` occurs in ``reply`` (see the module docstring for the rule)."""
    pattern = keyword_pattern(keyword)
    return pattern is not None and pattern.search(fold(reply)) is not None


def needle_recall(keywords: Sequence[str], reply: str) -> tuple[float, tuple[str, ...]]:
    """The share of ``keywords`` found in ``reply``, and the ones found."""
    found = tuple(k for k in keywords if keyword_found(k, reply))
    return (len(found) / len(keywords) if keywords else 0.0), found
