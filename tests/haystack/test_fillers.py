from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._sweep import FillerSpec
from needlescope.haystack._fillers import (
    CorpusFiller,
    Filler,
    NoiseFiller,
    PatternFiller,
    SyntheticProseFiller,
    filler_from_spec,
)

SHARED_CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"
lengths = st.integers(min_value=0, max_value=300_000)
seeds = st.integers(min_value=0, max_value=2**32)


def has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def shared_corpus(name: str) -> Path:
    path = SHARED_CORPORA / name
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    (tmp_path / "b_second.txt").write_text("Second file, year 1999.\n", encoding="utf-8")
    (tmp_path / "a_first.txt").write_text("First file\r\nhas 42 lines.\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("not part of the corpus", encoding="utf-8")
    return tmp_path


def generated_fillers(seed: int) -> list[Filler]:
    return [NoiseFiller(seed), SyntheticProseFiller("en", seed), SyntheticProseFiller("zh", seed)]


# --- every filler -----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=lengths, m=lengths)
def test_generated_fillers_are_exact_and_prefix_stable(seed: int, n: int, m: int) -> None:
    for filler in generated_fillers(seed):
        short, long = sorted((n, m))
        first = filler.text(short)
        second = filler.text(long)
        assert len(first) == short and len(second) == long
        assert second.startswith(first)
        # A fresh instance asked in the other order gives the same text: no dependence on history.
        fresh = type(filler)(**_init_params(filler))
        assert fresh.text(long) == second
        assert fresh.text(short) == first


def _init_params(filler: Filler) -> dict[str, object]:
    params = dict(filler.describe())
    params.pop("kind")
    params.pop("version", None)
    return params


@settings(max_examples=40, deadline=None)
@given(pattern=st.text(min_size=1, max_size=8), n=lengths, m=lengths)
def test_pattern_filler_repeats_its_pattern(pattern: str, n: int, m: int) -> None:
    filler = PatternFiller(pattern)
    short, long = sorted((n, m))
    assert len(filler.text(short)) == short
    assert filler.text(long).startswith(filler.text(short))
    assert filler.text(long) == (pattern * (long + 1))[:long]


def test_pattern_filler_defaults_to_the_seed_pattern() -> None:
    assert PatternFiller().text(7) == "a|a|a|a"
    with pytest.raises(ValueError, match="non-empty"):
        PatternFiller("")


@settings(max_examples=15, deadline=None)
@given(seed=seeds, other=seeds)
def test_same_seed_same_text_other_seed_other_text(seed: int, other: int) -> None:
    for a, b in zip(generated_fillers(seed), generated_fillers(seed), strict=True):
        assert a.text(5000) == b.text(5000)
        assert a.describe() == b.describe()
    if seed != other:
        for a, b in zip(generated_fillers(seed), generated_fillers(other), strict=True):
            assert a.text(5000) != b.text(5000)
            assert a.describe() != b.describe()


@pytest.mark.parametrize("filler", generated_fillers(7), ids=lambda f: f.name)
def test_generated_text_has_no_digits(filler: Filler) -> None:
    assert not has_digit(filler.text(2_000_000))


@settings(max_examples=20, deadline=None)
@given(seed=seeds)
def test_no_digits_for_any_seed(seed: int) -> None:
    for filler in generated_fillers(seed):
        assert not has_digit(filler.text(20_000))


def test_negative_length_is_an_error() -> None:
    for filler in [PatternFiller(), *generated_fillers(0)]:
        with pytest.raises(ValueError, match="negative"):
            filler.text(-1)


# --- noise ------------------------------------------------------------------------------------


def test_noise_is_lowercase_words_and_punctuation() -> None:
    text = NoiseFiller(3).text(200_000)
    assert set(text) <= set("abcdefghijklmnopqrstuvwxyz ,.;?")
    words = text.split()
    assert len(words) > 20_000
    assert "  " not in text
    assert 3 < sum(map(len, words)) / len(words) < 9


# --- synthetic prose --------------------------------------------------------------------------


def test_english_prose_reads_like_sentences() -> None:
    text = SyntheticProseFiller("en", 1).text(500_000)
    sentences = re.findall(r"[A-Z][^.?!]*[.?!]", text)
    assert len(sentences) > 3000
    assert "\n\n" in text and "  " not in text
    assert all(ch.isascii() for ch in text)
    vocabulary = set(re.findall(r"[a-z][a-z-]+", text.lower()))
    assert len(vocabulary) > 600
    # Varied: few sentences repeat in half a megabyte.
    assert len(set(sentences)) > 0.95 * len(sentences)


def test_chinese_prose_uses_chinese_punctuation() -> None:
    text = SyntheticProseFiller("zh", 1).text(300_000)
    for mark in "。，；":
        assert mark in text
    assert not re.search(r"[A-Za-z]", text)
    sentences = re.findall(r"[^。？！]+[。？！]", text)
    assert len(sentences) > 5000
    assert len(set(sentences)) > 0.9 * len(sentences)
    assert len(set(text)) > 600


def test_prose_describes_itself() -> None:
    filler = SyntheticProseFiller("zh", 5)
    assert filler.name == "prose-zh"
    description = filler.describe()
    assert description["kind"] == "prose" and description["language"] == "zh"
    assert description["seed"] == 5
    json.dumps(description)


def test_prose_rejects_unknown_language() -> None:
    with pytest.raises(ValueError, match="language"):
        SyntheticProseFiller("fr", 0)  # type: ignore[arg-type]


def test_prose_reuses_generated_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its speed is measured in bench/bench_haystack.py; here: shorter texts generate nothing new.
    filler = SyntheticProseFiller("en", 2)
    longest = filler.text(2_000_000)
    blocks = 0
    generate = filler._next_block

    def counted() -> str:
        nonlocal blocks
        blocks += 1
        return generate()

    monkeypatch.setattr(filler, "_next_block", counted)
    for n in range(1_000_000, 2_000_000, 10_000):
        assert filler.text(n) == longest[:n]
    assert blocks == 0


# --- corpus -----------------------------------------------------------------------------------


def test_corpus_files_in_name_order_repeated_and_scrubbed(corpus_dir: Path) -> None:
    filler = CorpusFiller(corpus_dir)
    unit = "First file\nhas  lines.\n\nSecond file, year .\n\n"
    assert filler.text(len(unit)) == unit
    assert filler.text(len(unit) * 2 + 5) == unit * 2 + unit[:5]
    assert filler.name == f"corpus-{corpus_dir.name}"


def test_corpus_keeps_digits_when_asked(corpus_dir: Path) -> None:
    text = CorpusFiller(corpus_dir, scrub_digits=False).text(200)
    assert "42" in text and "1999" in text


def test_corpus_reads_files_once_and_lazily(corpus_dir: Path) -> None:
    filler = CorpusFiller(corpus_dir)
    (corpus_dir / "a_first.txt").write_text("Changed before the first read.\n", encoding="utf-8")
    first = filler.text(60)
    assert first.startswith("Changed before the first read.")
    for path in corpus_dir.glob("*.txt"):
        path.unlink()
    assert filler.text(60) == first


def test_corpus_describe_identifies_content_not_location(corpus_dir: Path, tmp_path: Path) -> None:
    description = CorpusFiller(corpus_dir).describe()
    json.dumps(description)
    assert description["files"] == ["a_first.txt", "b_second.txt"]
    assert str(corpus_dir.parent) not in json.dumps(description)
    (corpus_dir / "b_second.txt").write_text("Different text.\n", encoding="utf-8")
    assert CorpusFiller(corpus_dir).describe() != description


@settings(max_examples=30, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=4),
    n=st.integers(0, 3000),
    m=st.integers(0, 3000),
)
def test_corpus_exact_prefix_stable_and_digit_free(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], n: int, m: int
) -> None:
    directory = tmp_path_factory.mktemp("corpus")
    for index, text in enumerate(texts):
        (directory / f"{index:03d}.txt").write_bytes(text.encode("utf-8"))
    filler = CorpusFiller(directory)
    short, long = sorted((n, m))
    assert len(filler.text(short)) == short
    assert filler.text(long).startswith(filler.text(short))
    assert not has_digit(filler.text(long))


def test_corpus_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found") as missing:
        CorpusFiller(tmp_path / "nowhere")
    (tmp_path / "readme.md").write_text("no text files here", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no \.txt files") as empty:
        CorpusFiller(tmp_path)
    for error in (missing, empty):
        assert "\n" not in str(error.value)


@pytest.mark.parametrize("name", ["en", "zh", "paul_graham_essays"])
def test_shared_corpora(name: str) -> None:
    directory = shared_corpus(name)
    filler = CorpusFiller(directory)
    first_file = sorted(directory.glob("*.txt"))[0]
    opening = first_file.read_text(encoding="utf-8").replace("\r\n", "\n").strip("\n")
    opening = "".join(ch for ch in opening[:2000] if not ch.isdigit())
    text = filler.text(3_000_000)
    assert len(text) == 3_000_000
    assert text.startswith(opening[:1000])
    assert not has_digit(text)
    assert "\r" not in text
    assert filler.text(1_000_000) == text[:1_000_000]


def test_shared_corpus_repeats_when_too_short() -> None:
    directory = shared_corpus("paul_graham_essays")
    documents = [
        path.read_text(encoding="utf-8").replace("\r\n", "\n").strip("\n")
        for path in sorted(directory.glob("*.txt"))
    ]
    unit = "".join(ch for ch in "\n\n".join(documents) + "\n\n" if not ch.isdigit())
    assert CorpusFiller(directory).text(3 * len(unit) + 10) == unit * 3 + unit[:10]


def test_shared_corpus_keeps_digits_unscrubbed() -> None:
    filler = CorpusFiller(shared_corpus("paul_graham_essays"), scrub_digits=False)
    assert has_digit(filler.text(1_000_000))


# --- factory ----------------------------------------------------------------------------------


def test_filler_from_spec_builds_every_kind(corpus_dir: Path) -> None:
    fillers = [
        filler_from_spec(FillerSpec(kind="pattern")),
        filler_from_spec(FillerSpec(kind="pattern", pattern="x-")),
        filler_from_spec(FillerSpec(kind="noise", seed=3)),
        filler_from_spec(FillerSpec(kind="prose", language="zh", seed=1)),
        filler_from_spec(FillerSpec(kind="prose")),
        filler_from_spec(FillerSpec(kind="corpus", path=corpus_dir)),
        filler_from_spec(FillerSpec(kind="corpus", path=corpus_dir, scrub_digits=False)),
    ]
    for filler in fillers:
        assert isinstance(filler, Filler)
        assert len(filler.text(123)) == 123
        json.dumps(filler.describe())
    assert fillers[1].text(4) == "x-x-"
    assert [f.name for f in fillers[:5]] == ["pattern", "pattern", "noise", "prose-zh", "prose-en"]
    assert filler_from_spec(FillerSpec(kind="noise", seed=3)).text(999) == NoiseFiller(3).text(999)
