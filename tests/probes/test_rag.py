"""The rag probe: chunking, ranking, selection, retrieval records, and building with a fake
embedder (a bag of marker words) and a character measure."""

from __future__ import annotations

import asyncio
import itertools
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from needlescope.config._sweep import parse_config
from needlescope.errors import ConfigError, LengthError
from needlescope.fitting._search import measure_text
from needlescope.haystack._fillers import SyntheticProseFiller
from needlescope.probes.base import Context
from needlescope.probes.build import build_context
from needlescope.probes.cases import probe as cases
from needlescope.probes.rag import probe as rag
from needlescope.probes.rag import retrieval
from needlescope.probes.rag.retrieval import Chunk

REPO = Path(__file__).resolve().parents[2]
EN_CASES = REPO / "configs" / "cases" / "en.yaml"
PROSE = SyntheticProseFiller("en", 0)
MARKERS = ("cardamom", "hazelnut", "elderflower", "secret", "ingredient", "plum", "cake")


# --- chunking ---------------------------------------------------------------------------------


def test_chunks_overlap_and_end_at_the_end() -> None:
    chunks = retrieval.chunk_text("abcdefghij", 4, 1)
    assert chunks == [
        Chunk(0, 0, 4, "abcd"),
        Chunk(1, 3, 7, "defg"),
        Chunk(2, 6, 10, "ghij"),
    ]
    assert retrieval.chunk_text("abcdefghijk", 4, 1)[-1] == Chunk(3, 9, 11, "jk")
    assert retrieval.chunk_text("abc", 10, 2) == [Chunk(0, 0, 3, "abc")]
    assert retrieval.chunk_text("", 10, 2) == []


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (4, 4), (4, -1), (4, 9)])
def test_bad_chunk_settings(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="chunk"):
        retrieval.chunk_text("abcdef", size, overlap)


@given(st.text(max_size=3000), st.integers(1, 400), st.data())
def test_chunks_cover_the_text(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    chunks = retrieval.chunk_text(text, size, overlap)
    covered = [False] * len(text)
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert 0 < chunk.end - chunk.start <= size
        covered[chunk.start : chunk.end] = [True] * (chunk.end - chunk.start)
    assert all(covered)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for a, b in itertools.pairwise(chunks):
        assert b.start - a.start == size - overlap  # each starts a fixed step after the last
    assert not chunks or chunks[-1].end == len(text)


# --- ranking and selection --------------------------------------------------------------------


def test_cosine() -> None:
    assert retrieval.cosine([1, 0], [2, 0]) == pytest.approx(1.0)
    assert retrieval.cosine([1, 0], [0, 3]) == pytest.approx(0.0)
    assert retrieval.cosine([1, 1], [-1, -1]) == pytest.approx(-1.0)
    assert retrieval.cosine([0, 0], [1, 2]) == 0.0
    assert retrieval.cosine([math.nan, 1], [1, 2]) == 0.0
    with pytest.raises(ValueError, match="widths"):
        retrieval.cosine([1, 2], [1, 2, 3])


def test_rank_orders_by_similarity_with_stable_ties() -> None:
    question = [1.0, 0.0]
    chunks = [[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, 0.0], [0.0, 0.0]]
    # Chunks 1 and 3 tie at 1.0 (text order kept), then 2 (0.71), then 0 and 4 tie at 0.
    assert retrieval.rank(question, chunks) == [1, 3, 2, 0, 4]
    assert retrieval.rank(question, []) == []


RANKING = [4, 1, 3, 0, 2]
SIZES = {0: 10, 1: 10, 2: 10, 3: 30, 4: 10}


@pytest.mark.parametrize(
    ("mode", "top_k", "budget", "chosen"),
    [
        ("topk", 2, 100, [4, 1]),
        ("topk", 9, 100, [4, 1, 3, 0, 2]),
        ("topk", 3, 40, [4, 1]),  # the third best does not fit the length
        ("half", 5, 50, [4, 1, 3]),
        ("full", 5, 60, [4, 1, 3, 0]),
        ("full", 5, 45, [4, 1]),  # stops at the first chunk that does not fit
        ("full", 5, 5, []),
    ],
)
def test_select(mode: Any, top_k: int, budget: int, chosen: list[int]) -> None:
    assert retrieval.select(RANKING, SIZES, mode, top_k=top_k, budget=budget) == chosen


def test_select_rejects_unknown_modes_and_arrange_reverses() -> None:
    with pytest.raises(ValueError, match="topk, half or full"):
        retrieval.select(RANKING, SIZES, "most", top_k=1, budget=9)  # type: ignore[arg-type]
    assert retrieval.arrange([4, 1, 3], reverse=False) == [4, 1, 3]
    assert retrieval.arrange([4, 1, 3], reverse=True) == [3, 1, 4]


def test_retrieval_record() -> None:
    chunks = retrieval.chunk_text("x" * 100, 40, 10)  # [0,40) [30,70) [60,100)
    ranking = [2, 0, 1]
    needles = [(5, 20), (32, 38), (45, 65), (90, 95)]
    record = retrieval.retrieval_record(needles, chunks, ranking, selected=[2, 0])
    assert record == [
        {"needle": 1, "chunk": 0, "rank": 2, "retrieved": True, "partial": False},
        # In chunks 0 and 1; chunk 0 ranks better.
        {"needle": 2, "chunk": 0, "rank": 2, "retrieved": True, "partial": False},
        # Only chunk 1 holds all of it; chunk 2 (chosen) holds its end.
        {"needle": 3, "chunk": 1, "rank": 3, "retrieved": False, "partial": True},
        {"needle": 4, "chunk": 2, "rank": 1, "retrieved": True, "partial": False},
    ]
    assert retrieval.retrieval_record([(50, 55)], chunks, ranking, [])[0]["retrieved"] is False


def test_memoize_embeds_each_text_once() -> None:
    calls: list[list[str]] = []

    async def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [[float(len(t))] for t in texts]

    cached = retrieval.memoize(embed, max_items=3)

    async def run() -> None:
        assert await cached(["a", "bb", "a"]) == [[1.0], [2.0], [1.0]]
        assert await cached(["bb", "ccc"]) == [[2.0], [3.0]]
        assert await cached(["dddd"]) == [[4.0]]  # 3 texts kept: "a", the oldest, goes
        assert await cached(["a", "dddd"]) == [[1.0], [4.0]]

    asyncio.run(run())
    assert calls == [["a", "bb"], ["ccc"], ["dddd"], ["a"]]


# --- cells and building -----------------------------------------------------------------------


def sweep(**rag_probe: Any) -> Any:
    shared = {"cases_file": str(EN_CASES), "cases": ["plum_cake_secrets"], "depths": [30.0]}
    shared |= {"lengths": [3000], "length_unit": "chars", "fillers": ["prose-en"]}
    return parse_config(
        {
            "name": "t",
            "seed": 5,
            "models": [{"name": "m", "provider": "local"}],
            "probes": [
                {"probe": "cases", **shared},
                {
                    "probe": "rag",
                    **shared,
                    "chunk_size": 400,
                    "chunk_overlap": 80,
                    "context_modes": ["topk", "half", "full"],
                    "top_k": 2,
                    **rag_probe,
                },
            ],
        }
    )


def rag_cells(**rag_probe: Any) -> dict[str, Any]:
    cfg = sweep(**rag_probe)
    return {c.params()["mode"]: c for c in rag.expand(cfg, cfg.probes[1])}


async def by_chars(text: str) -> int:
    return measure_text(text, "chars")


def fake_vector(text: str) -> list[float]:
    lowered = text.lower()
    return [float(lowered.count(word)) for word in MARKERS] + [0.05]


async def fake_embed(texts: list[str]) -> list[list[float]]:
    return [fake_vector(t) for t in texts]


def build(cell: Any) -> Context:
    return asyncio.run(rag.retrieve(cell, PROSE, "prose", fake_embed, by_chars))


def test_expand_adds_the_context_modes() -> None:
    cfg = sweep()
    cells = list(rag.expand(cfg, cfg.probes[1]))
    assert [c.params()["mode"] for c in cells] == ["topk", "half", "full"]
    topk, half = cells[0].params(), cells[1].params()
    assert (topk["top_k"], half["top_k"]) == (2, None)
    assert topk["embedder"] == rag.DEFAULT_EMBEDDER
    assert (cells[0].probe, cells[0].prompt_version, cells[0].depth) == ("rag", "rag-en-v1", 30.0)
    assert len({c.cell_id for c in cells}) == 3


def test_overlap_must_be_smaller_than_the_chunk() -> None:
    with pytest.raises(ConfigError, match=r"probes\.1\.rag: chunk_overlap must be smaller"):
        sweep(chunk_size=100, chunk_overlap=100)


def test_topk_puts_the_needle_chunks_in_the_prompt() -> None:
    context = build(rag_cells()["topk"])
    facts = context.rendered.facts
    assert len(facts["order"]) == 2
    assert context.prompt_length == len(context.prompt_text) <= 3000
    retrieved = [r for r in facts["retrieval"] if r["retrieved"]]
    assert len(retrieved) >= 2 and all(r["rank"] <= 2 for r in retrieved)
    for needle in context.expected["needles"][:2]:
        assert needle in context.prompt_text
    assert context.prompt_text.index("[1] ") < context.prompt_text.index("Question: What are")
    assert context.max_tokens == 200


def test_half_and_full_fill_their_share_of_the_length() -> None:
    cells = rag_cells()
    half, full = build(cells["half"]), build(cells["full"])
    chunk_cost = 400 + len("[10] \n\n")
    assert 1500 - chunk_cost < half.prompt_length <= 1500
    assert 3000 - chunk_cost < full.prompt_length <= 3000
    assert len(full.rendered.facts["order"]) > len(half.rendered.facts["order"]) >= 2
    assert all(r["retrieved"] for r in full.rendered.facts["retrieval"])


def test_reverse_puts_the_best_chunk_next_to_the_question() -> None:
    forward = build(rag_cells()["full"])
    backward = build(rag_cells(reverse=True)["full"])
    assert backward.rendered.facts["order"] == forward.rendered.facts["order"][::-1]
    best = forward.rendered.facts["order"][0]
    chunk = retrieval.chunk_text(forward.haystack_text, 400, 80)[best].text.strip()
    prompt = backward.prompt_text
    assert prompt.index(chunk) > prompt.index("[2] ")  # the last passage


def test_rag_haystack_is_the_llm_cells_haystack() -> None:
    cfg = sweep()
    llm_cell = next(cases.expand(cfg, cfg.probes[0]))
    llm = asyncio.run(build_context(cases, llm_cell, PROSE, "prose", by_chars))
    for cell in rag_cells().values():
        context = build(cell)
        assert context.haystack_text == llm.haystack_text
        assert context.filler_chars == llm.filler_chars
        assert context.rendered.offsets == llm.rendered.offsets
        assert context.rendered.facts["pair_id"] == llm_cell.context_id
        assert context.expected == llm.expected
        assert rag.cases_twin(cell).context_id == llm_cell.context_id


def test_rebuild_gives_the_same_prompt() -> None:
    cell = rag_cells(reverse=True)["half"]
    context = build(cell)
    order = context.rendered.facts["order"]
    rebuilt = rag.rebuild(cell, PROSE, "prose", context.filler_chars, {"order": order})
    assert rebuilt.prompt_text == context.prompt_text
    with pytest.raises(NotImplementedError, match=r"rag\.build"):
        rag.render(cell, PROSE, "prose", 100)


def test_grading_is_the_cases_grading() -> None:
    context = build(rag_cells()["topk"])
    grade = rag.grade(context.expected, context.rendered.facts, "Cardamom and hazelnuts.")
    assert grade.accuracy == pytest.approx(100 * (0.5 + 0.5 + 0) / 3)


def test_too_short_for_the_instructions_is_a_length_error() -> None:
    cfg = sweep(lengths=[400])
    cell = next(c for c in rag.expand(cfg, cfg.probes[1]) if c.params()["mode"] == "half")
    with pytest.raises(LengthError):
        build(cell)


def test_a_wrong_number_of_vectors_is_an_error() -> None:
    async def short(texts: list[str]) -> list[list[float]]:
        return [[1.0]]

    with pytest.raises(ValueError, match="vectors"):
        asyncio.run(rag.retrieve(rag_cells()["topk"], PROSE, "prose", short, by_chars))
