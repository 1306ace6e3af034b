"""U-NIAH in its own terms: its case file, its three messages, its cl100k length budget, its
recursive chunks and RAG context, and default keywords its reference answers recall fully."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._file import load_config
from needlescope.config._sweep import parse_config
from needlescope.errors import ConfigError
from needlescope.fitting import tokens
from needlescope.fitting._search import measure_text
from needlescope.grading import keywords as keyword_rules
from needlescope.haystack import chunking
from needlescope.haystack._fillers import SyntheticProseFiller
from needlescope.haystack._insert import last_sentence_end
from needlescope.probes.build import build_context, rebuild
from needlescope.probes.cases import case_file, uniah
from needlescope.probes.cases import probe as cases
from needlescope.probes.rag import probe as rag
from needlescope.probes.registry import expand_grid
from needlescope.providers.base import Message

REPO = Path(__file__).resolve().parents[2]
UNIAH_FORMAT = REPO / "configs" / "cases" / "uniah-format.yaml"
SHIPPED = [REPO / "configs" / "cases" / n for n in ("en.yaml", "zh.yaml", "uniah-format.yaml")]
PROSE = SyntheticProseFiller("en", 0)
SYSTEM = (
    "You are a helpful AI bot that answers questions for a user. Keep your response short and "
    "direct"
)
SOUP_QUESTION = "What are the secret ingredients needed to make the perfect winter soup?"


def config(**probe: Any) -> Any:
    return parse_config(
        {
            "name": "u",
            "seed": 7,
            "models": [{"name": "m", "provider": "local"}],
            "probes": [
                {
                    "probe": "cases",
                    "cases_file": str(UNIAH_FORMAT),
                    "cases": ["soup_ingredients"],
                    "lengths": [300],
                    "depths": [50],
                    "prompts": ["uniah"],
                    "length_budget": "seed",
                    **probe,
                }
            ],
        }
    )


def cell(**probe: Any) -> Any:
    cfg = config(**probe)
    return next(cases.expand(cfg, cfg.probes[0]))


async def by_chars(text: str) -> int:
    return measure_text(text, "chars")


# --- the case file ----------------------------------------------------------------------------


def test_a_case_file_laid_out_as_uniahs_loads_unchanged(caplog: pytest.LogCaptureFixture) -> None:
    # configs/cases/uniah-format.yaml has U-NIAH's structure: a `definitions:` list of needles
    # under an anchor, cases aliasing it, and needles written with spaces around them.
    with caplog.at_level(logging.WARNING):
        loaded = case_file.parse_cases(
            yaml.safe_load(UNIAH_FORMAT.read_text("utf-8")), "uniah.yaml"
        )
    assert list(loaded) == [
        "harbour_single_needle",
        "soup_ingredients",
        "observatory_building",
        "observatory_visit",
    ]
    assert "uniah.yaml: skipped definitions: a list, not a case" in caplog.text
    soup = loaded["soup_ingredients"]
    assert soup.needles[0].text == (
        " Smoked paprika is one of the secret ingredients needed to make the perfect winter soup. "
    )
    building, visit = loaded["observatory_building"], loaded["observatory_visit"]
    assert [n.text for n in building.needles] == [n.text for n in visit.needles]
    assert building.needles[2].text.startswith("The night guide")  # no spaces: kept as written
    assert building.question != visit.question


def test_the_definitions_list_is_not_a_case_to_pick(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown case 'definitions' \(a list, not a case\)"):
        case_file.load_cases(UNIAH_FORMAT, ["definitions"])
    only_lists = tmp_path / "lists.yaml"
    only_lists.write_text("definitions: &x\n  - a needle\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no cases, only lists \(definitions\)"):
        case_file.load_cases(only_lists)


def test_a_needle_the_true_answer_does_not_mention_is_not_checked() -> None:
    visit = case_file.load_cases(UNIAH_FORMAT)["observatory_visit"]
    assert visit.needles[0].keywords == ()  # the telescope: its answer does not mention it
    expected = cases.expected_of(visit)
    grade = cases.grade(expected, {}, "Visitors sign a green leather logbook.")
    assert [n.needle_index for n in grade.needles] == [2, 3]  # needle 1 has no row
    assert grade.detail["needles"][0] == {
        "needle": 1,
        "recall": None,
        "recalled": None,
        "found": [],
    }
    # Needle 2: five of its six words (not "bound"); needle 3: none. Needle 1 is not counted.
    assert grade.accuracy == pytest.approx(100 * (5 / 6 + 0) / 2)


# --- default keywords against the reference answer --------------------------------------------


def without(text: str, keywords: tuple[str, ...]) -> str:
    """``text`` with every match of ``keywords`` taken out (as keyword recall matches them)."""
    folded = keyword_rules.fold(text)
    for keyword in keywords:
        pattern = keyword_rules.keyword_pattern(keyword)
        assert pattern is not None
        folded = pattern.sub(" ", folded)
    return folded


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_each_case_is_recalled_fully_by_its_true_answer_and_not_by_its_question(
    path: Path,
) -> None:
    for name, case in case_file.load_cases(path).items():
        expected = cases.expected_of(case)
        assert cases.grade(expected, {}, case.true_answer).accuracy == 100.0, name
        assert cases.grade(expected, {}, case.question).accuracy == 0.0, name
        for index, needle in enumerate(case.needles):
            if not needle.keywords:
                continue
            taken = cases.grade(expected, {}, without(case.true_answer, needle.keywords))
            assert taken.accuracy is not None and taken.accuracy < 100.0, (name, index)
            assert taken.detail["needles"][index]["recall"] == 0.0


def test_default_keywords_are_the_words_the_true_answer_uses() -> None:
    needles = [
        " Figs are one of the secret things in the perfect tart. ",
        " Water at exactly 93 degrees makes the perfect tart crust. ",
    ]
    question = "What goes into the perfect tart?"
    true_answer = "Figs, and water at 93 degrees for the crust."
    # "exactly" and "makes" are the needle's, but the reference answer does not say them.
    assert case_file.default_keywords(needles, question, true_answer) == [
        ("Figs",),
        ("Water", "93", "degrees", "crust"),
    ]
    # Without a reference answer, the needle's own distinctive words, as before.
    assert case_file.default_keywords(needles, question)[1] == (
        "Water",
        "exactly",
        "93",
        "degrees",
        "makes",
        "crust",
    )


def test_shipped_cases_keep_their_cell_ids() -> None:
    # Default keywords join a case's hash: the shipped cases' keywords did not change.
    english = case_file.load_cases(REPO / "configs" / "cases" / "en.yaml")
    chinese = case_file.load_cases(REPO / "configs" / "cases" / "zh.yaml")
    assert english["plum_cake_secrets"].sha256 == "0b39e97a3f4766a1"
    assert english["lighthouse_colour"].sha256 == "10990586f465b2ae"
    assert chinese["qingshi_tea"].sha256 == "5dac60b78875d5b8"
    ids = sorted(c.cell_id for c in expand_grid(load_config(REPO / "configs" / "cases.yaml")))
    # cases.yaml also runs a distractor case since issue 18: the recipe cells keep their ids.
    assert {"0bed085fffe90175", "228f319457dad952", "ccadd67df38e7ae7"} <= set(ids)
    assert ids[:2] == ["0bed085fffe90175", "228f319457dad952"]
    ids = sorted(c.cell_id for c in expand_grid(load_config(REPO / "configs" / "rag.yaml")))
    assert ids[:3] == ["4a1ea5301ad9108a", "510a73c23fae7f22", "7e68d2b563d69553"]


# --- the three messages -----------------------------------------------------------------------


def test_uniah_messages_byte_for_byte() -> None:
    the_cell = cell(depths=[100])
    rendered = cases.render(the_cell, PROSE, "prose", 500)
    system, context, question = rendered.messages
    assert system == Message("system", SYSTEM)
    assert context == Message("user", rendered.haystack_text)
    assert question == Message(
        "user",
        SOUP_QUESTION + " Don't give information outside the document or repeat your findings",
    )
    assert rendered.prompt_text == "\n\n".join(m.content for m in rendered.messages)


def test_the_prompt_hash_and_bytes_cover_every_message() -> None:
    the_cell = cell()
    context = rebuild(cases, the_cell, PROSE, "prose", 800, 0)
    assert context.messages == context.rendered.messages and len(context.messages) == 3
    assert context.prompt_bytes == sum(len(m.content.encode()) for m in context.messages)
    other = rebuild(cases, the_cell, PROSE, "prose", 800, 0)
    assert other.prompt_sha256 == context.prompt_sha256
    # The same texts under needlescope's own single message hash differently.
    own = rebuild(cases, cell(prompts=["cases-en-v1"]), PROSE, "prose", 800, 0)
    assert len(own.messages) == 1 and own.prompt_sha256 != context.prompt_sha256
    assert own.haystack_text == context.haystack_text
    # A Chinese-free, brace-holding question passes through untouched.
    assert "{" not in uniah.QUESTION.format(question="x")


def test_prompts_are_a_grid_axis_and_pair_on_their_haystack() -> None:
    cfg = config(prompts=["cases-en-v1", "uniah"])
    own, theirs = list(cases.expand(cfg, cfg.probes[0]))
    assert (own.prompt_version, theirs.prompt_version) == ("cases-en-v1", "uniah")
    a = cases.render(own, PROSE, "prose", 900)
    b = cases.render(theirs, PROSE, "prose", 900)
    assert a.facts["pair_id"] == b.facts["pair_id"] == own.context_id
    assert theirs.cell_id != own.cell_id


# --- length_budget: seed ----------------------------------------------------------------------


def test_cl100k_is_tiktokens_encoding_offline() -> None:
    assert tokens.encode("hello world") == [15339, 1917]
    assert tokens.count("The best thing to do in San Francisco is eat a sandwich.") == 13
    text = "云栖村的第一件宝物是一面铜镜。"
    # "云" is 2 tokens: one token covers half its bytes, which is no character.
    assert [tokens.prefix_chars(text, n) for n in range(5)] == [0, 0, 1, 1, 2]
    assert tokens.prefix_chars("abc", 99) == 3


@pytest.mark.parametrize(("length", "buffer"), [(300, 200), (600, 200), (1000, 300)])
def test_seed_budget_fills_the_length_less_the_buffer_in_cl100k(length: int, buffer: int) -> None:
    the_cell = cell(lengths=[length], final_context_length_buffer=buffer)
    context = asyncio.run(build_context(cases, the_cell, PROSE, "prose", by_chars))
    needles = [n.text for n in cases.case_of(the_cell).needles]
    share = length - buffer - sum(tokens.count(n) for n in needles)
    filler = PROSE.text(context.filler_chars)
    # The filler is exactly its first `share` tokens, as U-NIAH cuts its encoded haystack.
    assert tokens.decode(tokens.encode(PROSE.text(context.filler_chars + 500))[:share]) == filler
    assert context.rendered.haystack_text.count("winter soup") == 3
    assert the_cell.params()["final_context_length_buffer"] == buffer
    assert context.prompt_length == len(context.prompt_text)  # measured whole, as sent


def test_seed_depth_100_puts_the_needles_at_the_very_end() -> None:
    the_cell = cell(depths=[100])
    chars = cases.seed_filler_chars(the_cell, PROSE)
    rendered = cases.render(the_cell, PROSE, "prose", chars)
    needles = "".join(n.text for n in cases.case_of(the_cell).needles)
    text = PROSE.text(chars)
    assert rendered.haystack_text == text + needles
    # needlescope's own rule keeps them before the sentence the length cut.
    end = last_sentence_end(text)
    assert end is not None and end < len(text)  # the cut falls inside a sentence here
    own = cases.haystack(cases.case_of(the_cell), 100, PROSE, chars)
    assert own.text.endswith(text[end:]) and not own.text.endswith(needles)


def test_seed_settings_join_the_cell_only_when_used() -> None:
    seeded = cell().params()
    assert (seeded["length_budget"], seeded["final_context_length_buffer"]) == ("seed", 200)
    plain = cell(length_budget="prompt", prompts=None).params()
    assert "length_budget" not in plain and "final_context_length_buffer" not in plain


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        ({"length_unit": "chars"}, "length_budget: seed counts cl100k tokens"),
        ({"prompts": ["uniah-rag"]}, "unknown prompt template 'uniah-rag'"),
        ({"judge_prompt": "llm-judge"}, "judge_prompt"),
    ],
)
def test_bad_uniah_settings_are_one_line_errors(probe: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(**probe)
    assert message in str(caught.value) and "\n" not in str(caught.value)


# --- recursive character chunks (LangChain's splitter, as U-NIAH uses it) -----------------------

# Chunks and start indices that langchain-text-splitters 0.3.6 (U-NIAH's pin) gives for these.
LANGCHAIN_CHUNKS = [
    (
        "Para one is here.\n\nPara two, a little longer than one.\nIts second line.\n\nThree.",
        30,
        10,
        [
            ("Para one is here.", 0),
            ("Para two, a little longer", 19),
            ("longer than one.", 38),
            ("Its second line.", 55),
            ("Three.", 73),
        ],
    ),
    (
        "alpha beta gamma delta epsilon zeta eta theta iota kappa",
        20,
        8,
        [
            ("alpha beta gamma", 0),
            ("gamma delta epsilon", 11),
            ("epsilon zeta eta", 23),
            ("eta theta iota", 36),
            ("iota kappa", 46),
        ],
    ),
    (
        "abcdefghijklmnopqrstuvwxyz",
        10,
        3,
        [("abcdefghij", 0), ("hijklmnopq", 7), ("opqrstuvwx", 14), ("vwxyz", 21)],
    ),
    (
        "Short.\n\n\n\nAfter blank lines.   Spaces   here.",
        16,
        4,
        [("Short.", 0), ("After blank", 10), ("lines.   Spaces", 22), ("here.", 40)],
    ),
]


@pytest.mark.parametrize(("text", "size", "overlap", "want"), LANGCHAIN_CHUNKS)
def test_recursive_chunks_match_langchains(
    text: str, size: int, overlap: int, want: list[tuple[str, int]]
) -> None:
    chunks = chunking.split_text(text, size, overlap)
    assert list(zip(chunks, chunking.chunk_starts(text, chunks, overlap), strict=True)) == want


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab .\n云")), max_size=400),
    size=st.integers(2, 80),
    data=st.data(),
)
def test_chunks_are_stripped_pieces_of_the_text(text: str, size: int, data: Any) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    chunks = chunking.split_text(text, size, overlap)
    for chunk, start in zip(chunks, chunking.chunk_starts(text, chunks, overlap), strict=True):
        assert chunk and chunk == chunk.strip()
        assert text[start : start + len(chunk)] == chunk
        assert len(chunk) <= size  # every piece here can be split down to characters
    assert "".join(text.split()) == "" or chunks


# --- U-NIAH's RAG context ---------------------------------------------------------------------


def test_topk_takes_the_k_best_whatever_their_length() -> None:
    ranked = ["best " * 200, "second", "third", "fourth"]
    picked = uniah.pick_chunks(ranked, "topk", top_k=3, available=10)
    assert [p.rank for p in picked] == [0, 1, 2] and picked[0].text == ranked[0]
    assert uniah.join_context(picked, "topk", False) == "\n\n".join(ranked[:3])
    assert uniah.join_context(picked, "topk", True) == "\n\n".join(reversed(ranked[:3]))


def test_full_and_half_fill_exactly_cutting_the_last_chunk() -> None:
    ranked = [
        "The soup needs smoked paprika.",
        "Chestnuts are roasted first.",
        "Brown butter goes in at the end.",
    ]
    sizes = [tokens.count(t) for t in ranked]
    available = sizes[0] + sizes[1] + 3
    picked = uniah.pick_chunks(ranked, "full", top_k=5, available=available)
    assert [p.rank for p in picked] == [0, 1, 2] and picked[2].cut == 3
    assert picked[2].text == tokens.decode(tokens.encode(ranked[2])[:3])
    assert sum(tokens.count(p.text) for p in picked) == available
    half = uniah.pick_chunks(ranked, "half", top_k=5, available=2 * sizes[0] + 1)
    assert [(p.rank, p.cut) for p in half] == [(0, None)]  # 0 tokens left: nothing is cut
    context = uniah.join_context(picked, "full", True)
    assert context == "\n\n".join(p.text for p in reversed(picked)).strip()


def test_uniahs_rag_prompt_byte_for_byte() -> None:
    prompt = uniah.rag_prompt("Chunk one.\n\nChunk {two}.", "Which ingredients?")
    assert prompt == (
        "Use the following pieces of context to answer the question at the end.\n"
        "    Keep the answer as concise as possible.\n"
        "    Don't give information outside the document or repeat your findings\n"
        "    Context:\n"
        "    Chunk one.\n\nChunk {two}.\n"
        "\n"
        "    Question: \n"
        "    Which ingredients?\n"
        "\n"
        "    Answer:"
    )


MARKERS = ("soup", "secret", "ingredients")  # the question's words: needle chunks rank first


async def fake_embed(texts: list[str]) -> list[list[float]]:
    return [[float(t.lower().count(w)) for w in MARKERS] + [0.05] for t in texts]


def rag_cells(**probe: Any) -> dict[str, Any]:
    cfg = parse_config(
        {
            "name": "r",
            "seed": 7,
            "models": [{"name": "m", "provider": "local"}],
            "probes": [
                {
                    "probe": "rag",
                    "cases_file": str(UNIAH_FORMAT),
                    "cases": ["soup_ingredients"],
                    "lengths": [600],
                    "depths": [50],
                    "length_budget": "seed",
                    "chunking": "uniah",
                    "chunk_size": 300,
                    "chunk_overlap": 50,
                    "context_modes": ["topk", "half", "full"],
                    "top_k": 2,
                    "prompts": ["uniah-rag"],
                    **probe,
                }
            ],
        }
    )
    return {c.params()["mode"]: c for c in rag.expand(cfg, cfg.probes[0])}


def build_rag(the_cell: Any) -> Any:
    return asyncio.run(rag.retrieve(the_cell, PROSE, "prose", fake_embed, by_chars))


def test_rag_in_uniahs_terms() -> None:
    cells = rag_cells()
    assert cells["topk"].params()["chunking"] == "uniah"
    topk, half, full = (build_rag(cells[m]) for m in ("topk", "half", "full"))
    haystack = topk.haystack_text
    chunks = chunking.split_text(haystack, 300, 50)
    assert topk.rendered.facts["chunks"] == len(chunks)
    # topk: the two chunks with the needles, whole, a blank line apart, in U-NIAH's prompt.
    order = topk.rendered.facts["order"]
    context = "\n\n".join(chunks[i] for i in order)
    assert topk.prompt_text == uniah.rag_prompt(context, SOUP_QUESTION)
    # half: the length less the prompt's own tokens, halved, filled exactly.
    available = 600 - tokens.count(uniah.rag_prompt("", SOUP_QUESTION))
    cut = half.rendered.facts["cut"]
    kept = [chunks[i] for i in half.rendered.facts["order"] if i != cut["chunk"]]
    assert sum(tokens.count(c) for c in kept) + cut["tokens"] == available // 2
    # full: the whole haystack fits, nothing is cut.
    assert "cut" not in full.rendered.facts
    assert sorted(full.rendered.facts["order"]) == list(range(len(chunks)))
    for built, the_cell in ((half, cells["half"]), (topk, cells["topk"])):
        facts = built.rendered.facts
        again = rag.rebuild(the_cell, PROSE, "prose", built.filler_chars, facts)
        assert again.prompt_text == built.prompt_text


def test_rag_and_llm_cells_in_uniahs_terms_share_their_haystack() -> None:
    the_cell = cell(lengths=[600])
    llm = asyncio.run(build_context(cases, the_cell, PROSE, "prose", by_chars))
    built = build_rag(rag_cells()["topk"])
    assert built.haystack_text == llm.haystack_text
    assert built.rendered.facts["pair_id"] == llm.rendered.facts["pair_id"]
    needle_chunks = [r for r in built.rendered.facts["retrieval"] if r["retrieved"]]
    assert needle_chunks  # a needle's words, without its own spaces, sit whole in a chunk


def test_chunking_uniah_needs_tokens() -> None:
    with pytest.raises(ConfigError, match="chunking: uniah fills the length in cl100k tokens"):
        rag_cells(length_unit="chars", length_budget="prompt")
    with pytest.raises(ConfigError, match="unknown prompt template 'uniah'"):
        rag_cells(prompts=["uniah"])


def test_words_pattern_is_what_keyword_recall_matches() -> None:
    pattern = keyword_rules.keyword_pattern("chestnuts")
    assert pattern is not None and pattern.search("two roasted chestnut's shells")
    assert re.sub(pattern, "_", "chestnuts, Chestnut") == "_, Chestnut"  # folded text only
