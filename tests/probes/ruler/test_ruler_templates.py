"""Golden tests: RULER's prompts byte for byte, as the issue and RULER's constants.py give them."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from needlescope.probes.ruler import aggregation, niah, variable_tracking
from needlescope.probes.ruler.prompt import prompt_messages
from needlescope.probes.ruler.templates import (
    DEPTHS,
    NIAH_NEEDLE,
    NOISE,
    TEMPLATES,
    TOKENS_TO_GENERATE,
    singular,
    template,
)

NIAH_TEMPLATE = (
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all "
    "the special magic {type_needle_v} for {query} mentioned in the provided text?"
)
NIAH_PREFIX = " The special magic {type_needle_v} for {query} mentioned in the provided text are"
VT_TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
    "{context}\nQuestion: Find all variables that are assigned the value {query} in the text "
    "above."
)
# RULER's spelling ("assgined"); the transcription corrects it to "assigned".
VT_PREFIX = (
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} "
    "variables are assgined the value {query}, they are: "
)
CWE_TEMPLATE = (
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most common "
    "words in the above list?"
)
CWE_PREFIX = " Answer: The top 10 words that appear most often in the list are:"
FWE_TEMPLATE = (
    "Read the following coded text and track the frequency of each coded word. Find the three "
    "most frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. "
    "Please ignore the dots '....'. What are the three most frequently appeared words in the "
    "above coded text?"
)
FWE_PREFIX = (
    " Answer: According to the coded text above, the three most frequently appeared words are:"
)


def test_templates_and_prefixes_are_rulers() -> None:
    assert template("niah").template == NIAH_TEMPLATE
    assert template("niah").answer_prefix == NIAH_PREFIX
    assert template("variable_tracking").template == VT_TEMPLATE
    assert template("variable_tracking").answer_prefix == VT_PREFIX
    assert template("cwe").template == CWE_TEMPLATE
    assert template("cwe").answer_prefix == CWE_PREFIX
    assert template("fwe").template == FWE_TEMPLATE
    assert template("fwe").answer_prefix == FWE_PREFIX
    assert {family: set(versions) for family, versions in TEMPLATES.items()} == {
        "niah": {"ruler"},
        "variable_tracking": {"ruler"},
        "cwe": {"ruler"},
        "fwe": {"ruler"},
    }


def test_sentences_depths_and_answer_budgets() -> None:
    assert NIAH_NEEDLE == "One of the special magic {type_needle_v} for {key} is: {value}."
    assert NOISE == (
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
    )
    # np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int), written out.
    assert DEPTHS == (
        0, 3, 5, 8, 10, 13, 15, 18, 21, 23, 26, 28, 31, 33, 36, 38, 41, 44, 46, 49,
        51, 54, 56, 59, 62, 64, 67, 69, 72, 74, 77, 79, 82, 85, 87, 90, 92, 95, 97, 100,
    )  # fmt: skip
    assert TOKENS_TO_GENERATE == {"niah": 128, "variable_tracking": 30, "cwe": 120, "fwe": 50}


def test_unknown_version_is_named() -> None:
    with pytest.raises(KeyError, match="no niah prompt version 'v9'; known: ruler"):
        template("niah", "v9")


def test_singular_rewrite_is_rulers() -> None:
    assert singular(NIAH_TEMPLATE) == (
        "A special magic {type_needle_v} is hidden within the following text. Make sure to "
        "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat is "
        "the special magic {type_needle_v} for {query} mentioned in the provided text?"
    )
    assert singular(NIAH_PREFIX) == (
        " The special magic {type_needle_v} for {query} mentioned in the provided text is"
    )


def test_single_needle_prompt_byte_for_byte() -> None:
    prompt = niah.build(niah.preset("niah_single_1"), seed=11, units=2)
    (needle,) = prompt.facts["needles"]
    key, value = needle["key"], needle["value"]
    # depth d puts the needle before sentence int(2 × d / 100)
    before = int(2 * (needle["depth"] / 100))
    lines = [NOISE, NOISE]
    lines.insert(before, f"One of the special magic numbers for {key} is: {value}.")
    assert prompt.body == (
        "A special magic number is hidden within the following text. Make sure to memorize it. "
        "I will quiz you about the number afterwards.\n"
        + "\n".join(lines)
        + f"\nWhat is the special magic number for {key} mentioned in the provided text?"
    )
    assert prompt.answer_prefix == (
        f" The special magic number for {key} mentioned in the provided text is"
    )
    assert prompt.expected == (value,)


def test_multi_query_prompt_byte_for_byte() -> None:
    prompt = niah.build(niah.preset("niah_multiquery"), seed=5, units=0, essay="")
    keys = prompt.facts["query"].split(", ")
    assert len(keys) == 4 and keys[3].startswith("and ")
    query = f"{keys[0]}, {keys[1]}, {keys[2]}, and {keys[3][4:]}"
    needles = [
        f"One of the special magic numbers for {n['key']} is: {n['value']}."
        for n in prompt.facts["needles"]
    ]
    # An empty essay: RULER's joining leaves an empty run before each needle.
    context = " ".join(part for needle in needles for part in ("", needle)) + " "
    assert prompt.body == (
        "Some special magic numbers are hidden within the following text. Make sure to memorize "
        "it. I will quiz you about the numbers afterwards.\n"
        f"{context}\nWhat are all the special magic numbers for {query} mentioned in the "
        "provided text?"
    )
    assert prompt.answer_prefix == (
        f" The special magic numbers for {query} mentioned in the provided text are"
    )


def test_variable_tracking_prompt_byte_for_byte() -> None:
    spec = variable_tracking.VtSpec(num_chains=1, num_hops=2, fewshot=False)
    prompt = variable_tracking.build(spec, seed=3, units=3)
    a, b, c = prompt.facts["chains"][0]
    (value,) = prompt.facts["values"]
    statements = [f"VAR {a} = {value}", f"VAR {b} = VAR {a} ", f"VAR {c} = VAR {b} "]
    lines = prompt.context.split("\n")
    assert [line for line in lines if line != NOISE] == statements
    assert lines.count(NOISE) == 3
    assert prompt.body == (
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
        + "\n".join(lines)
        + f"\nQuestion: Find all variables that are assigned the value {value} in the text above."
    )
    assert prompt.answer_prefix == (
        " Answer: According to the chain(s) of variable assignment in the text above, 3 "
        f"variables are assgined the value {value}, they are: "
    )


def test_variable_tracking_example_precedes_the_task() -> None:
    spec = variable_tracking.VtSpec(num_hops=2)
    prompt = variable_tracking.build(spec, seed=3, units=3, fewshot_units=4)
    example = variable_tracking.build_fewshot(spec, seed=3, units=4)
    task = variable_tracking.build(variable_tracking.VtSpec(num_hops=2, fewshot=False), 3, 3)
    assert prompt.body == f"{example.text} {' '.join(example.expected)}\n\n{task.body}"
    assert all(len(name) == 3 for name in example.expected)
    assert example.answer_prefix.endswith("they are: ")


def _numbered_words(listed: str) -> list[str]:
    pairs = re.findall(r"(\d+)\. (\S+)", listed)
    assert [int(i) for i, _ in pairs] == list(range(1, len(pairs) + 1))
    assert listed == " ".join(f"{i}. {w}" for i, w in pairs)
    return [w for _, w in pairs]


def test_cwe_prompt_byte_for_byte() -> None:
    spec = aggregation.CweSpec(num_cw=2, num_fewshot=1)
    prompt = aggregation.build_cwe(spec, seed=9, units=3, target=1000)
    head = CWE_TEMPLATE.split("{context}")[0]
    tail = CWE_TEMPLATE.split("{context}")[1]
    example, task = prompt.body.split("\n" + head)
    assert task == prompt.context + tail
    # The task's list under 4,096 tokens: 2 common words 6 times, the third word once.
    counts = Counter(_numbered_words(prompt.context))
    assert sorted(counts.values()) == [1, 6, 6]
    assert {w for w, c in counts.items() if c == 6} == set(prompt.expected)
    # The worked example: 20 words, 2 common ones 3 times, the rest once, then its answer.
    listed, answer = re.fullmatch(
        re.escape(head) + r"(.*)" + re.escape(tail + CWE_PREFIX) + r" (.*)", example
    ).groups()  # type: ignore[union-attr]
    example_counts = Counter(_numbered_words(listed))
    assert sorted(example_counts.values()) == [1] * 18 + [3, 3]
    assert set(_numbered_words(answer)) == {w for w, c in example_counts.items() if c == 3}
    assert prompt.answer_prefix == CWE_PREFIX


def test_cwe_frequencies_from_4096_tokens() -> None:
    spec = aggregation.CweSpec()
    prompt = aggregation.build_cwe(spec, seed=9, units=12, target=4096)
    counts = Counter(_numbered_words(prompt.context))
    assert sorted(counts.values()) == [3, 3] + [30] * 10
    example = prompt.body.split("\n" + CWE_TEMPLATE.split("{context}")[0])[0]
    assert sorted(Counter(_numbered_words(example.split("\n")[1])).values()) == [3] * 30 + [10] * 10


def test_fwe_prompt_byte_for_byte() -> None:
    prompt = aggregation.build_fwe(aggregation.FweSpec(), seed=4, units=40)
    assert prompt.body == (
        "Read the following coded text and track the frequency of each coded word. Find the three"
        f" most frequently appeared coded words. {prompt.context}\nQuestion: Do not provide any"
        " explanation. Please ignore the dots '....'. What are the three most frequently appeared"
        " words in the above coded text?"
    )
    assert prompt.answer_prefix == FWE_PREFIX


def test_prefix_modes() -> None:
    prompt = variable_tracking.build(variable_tracking.VtSpec(fewshot=False), seed=1, units=6)
    prefill = prompt_messages(prompt, "prefill")
    assert [m.role for m in prefill] == ["user", "assistant"]
    assert prefill[0].content == prompt.body
    assert prefill[1].content == prompt.answer_prefix.strip()
    assert not prefill[1].content.endswith(" ")
    (append,) = prompt_messages(prompt, "append")
    assert append.role == "user" and append.content == prompt.body + prompt.answer_prefix
    with pytest.raises(ValueError, match="prefill or append"):
        prompt_messages(prompt, "both")  # type: ignore[arg-type]
