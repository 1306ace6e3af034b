"""RULER's random strings: pinned word lists and seeded draws only."""

from __future__ import annotations

import hashlib
import random
import re
import uuid

import pytest

from needlescope.probes.ruler import words


@pytest.mark.parametrize(
    ("name", "count", "sha256"),
    [
        ("noun", 6786, "2ec8c8cdc8837fe0140930466fd29fe2f798bf9e040c4b284503c992cd8ce5ba"),
        ("adjective", 912, "a1d78b64addb8621f7d82f2fde67b11e6a7bdfbfa3b455b0fc5779fc781d4bea"),
        ("verb", 1042, "0ee563820008ca422e0e222963b4efe2ec4acb8e7143029ff089e3ba6970e613"),
    ],
)
def test_word_lists_are_pinned(name: str, count: int, sha256: str) -> None:
    # A changed list would change every rebuilt prompt: wonderwords 2.2.0's lists, exactly.
    listed = words.wordlist(name)  # type: ignore[arg-type]
    assert len(listed) == count
    assert hashlib.sha256("\n".join(listed).encode()).hexdigest() == sha256


def test_vocabularies() -> None:
    vocabulary = words.common_vocabulary()
    assert len(vocabulary) == 8169 and list(vocabulary) == sorted(set(vocabulary))
    rng = random.Random(0)
    adjectives, nouns = set(words.wordlist("adjective")), set(words.wordlist("noun"))
    for _ in range(50):
        key = words.random_key_word(rng)
        assert any(
            key[:i] in adjectives and key[i + 1 :] in nouns
            for i, char in enumerate(key)
            if char == "-"
        )


def test_draws_are_seeded() -> None:
    a, b = random.Random(5), random.Random(5)
    for kind in words.KINDS:
        assert words.random_value(kind, a) == words.random_value(kind, b)
    number = words.random_number(random.Random(1))
    assert re.fullmatch(r"[1-9]\d{6}", number)
    made = uuid.UUID(words.random_uuid(random.Random(1)))
    assert made.version == 4 and str(made) == words.random_uuid(random.Random(1))
    assert re.fullmatch(r"[a-z]{6}", words.coded_word(random.Random(1)))
    assert re.fullmatch(r"[A-Z]{5}", words.variable_name(random.Random(1)))
    with pytest.raises(ValueError, match="one of words, numbers, uuids"):
        words.random_value("emoji", random.Random(1))  # type: ignore[arg-type]


def test_distinct_redraws_repeats_and_avoids() -> None:
    rng = random.Random(3)
    drawn = words.distinct(lambda r: str(r.randint(0, 9)), 9, rng, avoid={"0"})
    assert sorted(drawn) == [str(i) for i in range(1, 10)]
