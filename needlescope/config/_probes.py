"""The probe entries of a sweep config, one model per probe (part of the config
package's models). Prompt names are checked against probes/templates.py and
stars_templates.py, data modules that import nothing of a probe."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from needlescope.config._models import Frozen
from needlescope.config._ruler import AggregationProbe, NiahProbe, VariableTrackingProbe

LengthUnit = Literal["tokens", "bytes", "chars"]
# Grid axes of sizes take whole numbers only: `true` or `1.5` in YAML is a mistake, not 1.
Count = Annotated[int, Field(gt=0, le=100_000_000, strict=True)]


class RecallProbe(Frozen):
    probe: Literal["recall"]
    # Optional only when every filler is used as it is (a corpus with fit: none).
    lengths: list[Count] | None = Field(default=None, min_length=1)
    length_unit: LengthUnit = "tokens"
    # "prompt": a cell's length is the whole prompt's; "haystack": the haystack's own length
    # before the needles go in (the recall seed's context_length). One value, not an axis.
    length_budget: Literal["prompt", "haystack"] = "prompt"
    # Optional only when every region gives its needle counts (0-0.1:1,0.9-1:39).
    needle_counts: list[Count] | None = Field(default=None, min_length=1)
    digits: int = Field(default=4, ge=2, le=15)
    # even / random: needlescope's placement over the regions laid end to end; seed: the
    # recall seed's, range by range (the default when every prompt is a seed template).
    placements: list[Literal["even", "random", "seed"]] = Field(default=["even"], min_length=1)
    regions: list[str] = Field(default=["whole"], min_length=1)
    jitter: float = Field(default=0.0, ge=0, le=1)  # the seed's random offset ratio
    fillers: list[str] = Field(default=["pattern"], min_length=1)
    prompts: list[str] = Field(default=["recall-en-v1"], min_length=1)
    repeats: PositiveInt = 1
    snap: Literal["auto", "char", "word", "sentence"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _seed_placement_by_default(cls, data: Any) -> Any:
        from needlescope.probes.templates import SEED_TEMPLATES

        if not isinstance(data, dict) or "placements" in data:
            return data
        prompts = data.get("prompts")
        if isinstance(prompts, list) and prompts and all(p in SEED_TEMPLATES for p in prompts):
            return {**data, "placements": ["seed"]}
        return data

    @field_validator("prompts")
    @classmethod
    def _known_prompts(cls, values: list[str]) -> list[str]:
        from needlescope.probes.templates import RECALL_TEMPLATES

        for value in values:
            if value not in RECALL_TEMPLATES:
                known = ", ".join(sorted(RECALL_TEMPLATES))
                raise ValueError(f"unknown prompt template {value!r}; known: {known}")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> RecallProbe:
        from needlescope.haystack import counted_needles, parse_regions
        from needlescope.probes.templates import SEED_TEMPLATES

        seeded = "seed" in self.placements
        for region in self.regions:
            if seeded:
                total = counted_needles(region)
                if total is not None and self.needle_counts not in (None, [total]):
                    raise ValueError(
                        f"regions: {region!r} places {total} needles, but needle_counts is"
                        f" {self.needle_counts}"
                    )
                if total is None and self.needle_counts is None:
                    raise ValueError(f"regions: {region!r} gives no counts: give needle_counts")
            if set(self.placements) - {"seed"}:
                try:
                    parse_regions(region)
                except ValueError as exc:
                    raise ValueError(
                        f"regions: {exc} (counts and absolute ranges need placements: [seed])"
                    ) from None
        if self.needle_counts is None and not seeded:
            raise ValueError("needle_counts: Field required")
        if self.jitter and not seeded:
            raise ValueError("jitter: the seed's random offsets need placements: [seed]")
        if self.digits != 4 and set(self.prompts) & set(SEED_TEMPLATES):
            raise ValueError("digits: the seed's prompt asks for four-digit numbers: use digits 4")
        distinct = 9 * 10 ** (self.digits - 1)  # needlescope's templates never repeat a value
        most = max(max(self.counts_for(r)) for r in self.regions)
        if self.lengths and most > max(self.lengths):  # a needle takes a unit at least
            raise ValueError(
                f"needle_counts: {most:,} needles cannot fit in a length of {max(self.lengths):,}"
            )
        if most > distinct and set(self.prompts) - set(SEED_TEMPLATES):
            raise ValueError(
                f"needle_counts: {most:,} needles need {most:,} distinct {self.digits}-digit"
                f" values, and there are {distinct:,}: raise digits or lower the count"
            )
        return self

    def counts_for(self, region: str) -> list[int]:
        """The needle counts a region is swept with: its own counts' total, or needle_counts."""
        from needlescope.haystack import counted_needles

        total = counted_needles(region) if "seed" in self.placements else None
        if total is not None:
            return [total]
        assert self.needle_counts is not None  # validated
        return list(self.needle_counts)


STAR_PRESETS = {"32-32": (32, 32), "64-32": (64, 32), "16-32": (16, 32), "32-16": (32, 16)}


class CountingStarsProbe(Frozen):
    """Counting-Stars-(M-N): M star sentences, N lengths evenly up to ``max_length``."""

    probe: Literal["counting_stars"]
    preset: Literal["32-32", "64-32", "16-32", "32-16"] | None = None
    stars: Annotated[int, Field(gt=0, le=100_000)] | None = (
        None  # M; default: the preset's, else 32
    )
    steps: Annotated[int, Field(gt=0, le=100_000)] | None = (
        None  # N; default: the preset's, else 32
    )
    max_length: PositiveInt | None = None
    lengths: list[Count] | None = None  # explicit lengths instead of max_length / steps
    length_unit: LengthUnit = "tokens"
    languages: list[Literal["en", "zh"]] = Field(default=["en"], min_length=1)
    orders: list[Literal["ordered", "shuffled"]] = Field(default=["shuffled"], min_length=1)
    fillers: list[str] = Field(default=["prose-en"], min_length=1)
    reasoning: bool = False  # the repository's variant: a mistaken and a correct count per star
    # Templates, each with its language and variant; default: needlescope's own for every
    # language in `languages` (stars-en-v1, stars-reasoning-zh-v1, …).
    prompts: list[str] | None = Field(default=None, min_length=1)
    # random: drawn per cell (`orders` applies); paper: the repository's fixed list, first M.
    counts: Literal["random", "paper"] = "random"
    repeats: PositiveInt = 1

    @field_validator("prompts")
    @classmethod
    def _known_prompts(cls, values: list[str] | None) -> list[str] | None:
        from needlescope.probes.stars_templates import TEMPLATES

        for value in values or []:
            if value not in TEMPLATES:
                known = ", ".join(TEMPLATES)
                raise ValueError(f"unknown prompt template {value!r}; known: {known}")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> CountingStarsProbe:
        from needlescope.probes.stars_counts import COUNTS
        from needlescope.probes.stars_templates import TEMPLATES

        if self.lengths is None and self.max_length is None:
            raise ValueError("give max_length (with a preset or steps) or explicit lengths")
        given = self.model_fields_set
        for name in self.prompts or []:
            template = TEMPLATES[name]
            if "languages" in given and template.language not in self.languages:
                raise ValueError(
                    f"prompts: {name} is a {template.language} template, but languages is"
                    f" {self.languages} (leave languages out: the prompts give them)"
                )
            if "reasoning" in given and template.reasoning != self.reasoning:
                raise ValueError(
                    f"prompts: {name} is {'' if template.reasoning else 'not '}the reasoning"
                    f" variant, but reasoning is {str(self.reasoning).lower()}"
                )
        if self.counts == "paper":
            if "orders" in given:
                raise ValueError(
                    "orders: the paper's counts (counts: paper) come in the paper's order;"
                    " leave orders out"
                )
            if self.star_count() > len(COUNTS):
                raise ValueError(f"stars: the paper's counts hold {len(COUNTS)} stars at most")
        return self

    def star_count(self) -> int:
        return self.stars or (STAR_PRESETS[self.preset][0] if self.preset else 32)

    def templates(self) -> list[str]:
        """The templates of the grid, in order: `prompts`, else one per language."""
        from needlescope.probes.stars_templates import template_version

        if self.prompts is not None:
            return list(self.prompts)
        return [template_version(language, self.reasoning) for language in self.languages]

    def length_grid(self) -> list[int]:
        if self.lengths is not None:
            return list(self.lengths)
        steps = self.steps or (STAR_PRESETS[self.preset][1] if self.preset else 32)
        assert self.max_length is not None
        return sorted({max(1, round(self.max_length * (i + 1) / steps)) for i in range(steps)})


class GotoProbe(Frozen):
    """The Little Retrieval Test: n register lines and one `go to line k` instruction."""

    probe: Literal["goto"]
    line_counts: list[Count] = Field(min_length=1)
    orders: list[Literal["ordered", "shuffled"]] = Field(
        default=["ordered", "shuffled"], min_length=1
    )
    value_max: int = Field(default=10000, ge=10)  # needlescope's templates (goto-seed: 50,000)
    prompts: list[str] = Field(default=["goto-v1"], min_length=1)
    # random: anywhere but the file's ends, drawn apart from k; seed: at index k − 1 of the
    # seed's list (header, then the register lines as shown), i.e. right after shown line k − 2.
    instruction_at: Literal["random", "seed"] = "random"
    # Shuffled files: blocks of this many lines shuffled, order kept inside a block (the
    # seed's README); unset, every line on its own.
    shuffle_block: Count | None = None
    repeats: PositiveInt = 1

    @field_validator("prompts")
    @classmethod
    def _known_prompts(cls, values: list[str]) -> list[str]:
        from needlescope.probes.templates import GOTO_TEMPLATES

        for value in values:
            if value not in GOTO_TEMPLATES:
                raise ValueError(
                    f"unknown prompt template {value!r}; known: {', '.join(sorted(GOTO_TEMPLATES))}"
                )
        return values

    @model_validator(mode="after")
    def _distinct_values_fit(self) -> GotoProbe:
        from needlescope.probes.templates import GOTO_SEED

        distinct = [p for p in self.prompts if p != GOTO_SEED]
        if distinct and max(self.line_counts) > self.value_max:
            raise ValueError(
                f"line_counts up to {max(self.line_counts)} need value_max ≥ that "
                f"(every line holds a distinct value with {distinct[0]})"
            )
        if self.shuffle_block is not None and "shuffled" not in self.orders:
            raise ValueError(
                "shuffle_block: it shuffles the shuffled files: add shuffled to orders"
            )
        return self


class CasesProbe(Frozen):
    """Needle cases (U-NIAH / the original needle test) at depth percents of a corpus."""

    probe: Literal["cases"]
    cases_file: Path
    cases: list[str] | None = None  # case names from the file; default: all of them
    lengths: list[Count] = Field(min_length=1)
    length_unit: LengthUnit = "tokens"
    # prompt: the whole prompt is the cell's length; seed: U-NIAH's, the haystack and needles
    # fill the length minus final_context_length_buffer in cl100k tokens, the question on top.
    length_budget: Literal["prompt", "seed"] = "prompt"
    final_context_length_buffer: int = Field(default=200, ge=0)  # with length_budget: seed
    # Prompt templates (a grid axis); default: needlescope's own in each case's language.
    prompts: list[str] | None = Field(default=None, min_length=1)
    # judge-v1: needlescope's rubric, JSON reply; uniah-judge: U-NIAH's LangChain evaluator.
    judge_prompt: Literal["judge-v1", "uniah-judge"] = "judge-v1"
    depths: list[float] | None = None  # explicit depth percents, 0–100
    depth_count: Annotated[int, Field(gt=0, le=100_000)] = 5
    depth_spacing: Literal["linear", "sigmoid"] = "linear"
    fillers: list[str] = Field(default=["prose-en"], min_length=1)
    answer_buffer: PositiveInt = 200  # tokens kept free for the answer
    judge: str | None = None  # a configured model that grades the answers (1–10 rubric)
    rubric_file: Path | None = None
    repeats: PositiveInt = 1

    @field_validator("depths")
    @classmethod
    def _percent(cls, values: list[float] | None) -> list[float] | None:
        if values is not None and not all(0 <= v <= 100 for v in values):
            raise ValueError("depth percents must be within 0–100")
        return values

    def known_prompts(self) -> tuple[str, ...]:
        from needlescope.probes.templates import CASES_PROMPTS

        return CASES_PROMPTS

    @model_validator(mode="after")
    def _consistent_cases(self) -> CasesProbe:
        known = self.known_prompts()
        for value in self.prompts or []:
            if value not in known:
                raise ValueError(
                    f"prompts: unknown prompt template {value!r}; known: {', '.join(known)}"
                )
        if self.length_budget == "seed" and self.length_unit != "tokens":
            raise ValueError(
                "length_budget: seed counts cl100k tokens (U-NIAH's unit): use length_unit tokens"
            )
        return self


class RagProbe(CasesProbe):
    """Cases in RAG mode: the haystack is chunked, embedded, and the best chunks fill the prompt."""

    probe: Literal["rag"]  # type: ignore[assignment]
    chunk_size: PositiveInt = 600  # characters
    chunk_overlap: int = Field(default=100, ge=0)
    context_modes: list[Literal["topk", "half", "full"]] = Field(default=["topk"], min_length=1)
    top_k: PositiveInt = 5
    reverse: bool = False  # least relevant first, most relevant next to the question
    embedder: str | None = None  # a configured local model to embed with; default: SmolLM2
    # windows: fixed character windows; uniah: U-NIAH's recursive splitter and context filling
    chunking: Literal["windows", "uniah"] = "windows"

    def known_prompts(self) -> tuple[str, ...]:
        from needlescope.probes.templates import RAG_PROMPTS

        return RAG_PROMPTS

    @model_validator(mode="after")
    def _overlap_below_size(self) -> RagProbe:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        if self.chunking == "uniah" and self.length_unit != "tokens":
            raise ValueError(
                "chunking: uniah fills the length in cl100k tokens (U-NIAH's unit): use "
                "length_unit tokens"
            )
        return self


class MrcrProbe(Frozen):
    """OpenAI's MRCR on conversations of our own: ``needles`` repeats of one request among
    other requests, as many as fit each length (the whole conversation as sent)."""

    probe: Literal["mrcr"]
    lengths: list[Count] = Field(min_length=1)
    length_unit: LengthUnit = "tokens"
    needles: list[Literal[2, 4, 8]] = Field(default=[2, 4, 8], min_length=1)
    answer_tokens: PositiveInt = 512  # a repeated reply runs to about 300 tokens
    repeats: PositiveInt = 1


class LatentListProbe(Frozen):
    """Michelangelo's Latent List: a Python list changed by ``operations`` statements among
    ``irrelevant`` ones, spread through a filler; the question asks for one of ``queries``."""

    probe: Literal["latent_list"]
    lengths: list[Count] = Field(min_length=1)
    length_unit: LengthUnit = "tokens"
    operations: list[Annotated[int, Field(ge=0, le=10_000, strict=True)]] = Field(min_length=1)
    irrelevant: list[Annotated[int, Field(ge=0, le=10_000, strict=True)]] = Field(
        default=[0], min_length=1
    )
    queries: list[Literal["list", "length", "element"]] = Field(default=["list"], min_length=1)
    fillers: list[str] = Field(default=["prose-en"], min_length=1)
    prompts: list[Literal["latent-list-v1"]] = Field(default=["latent-list-v1"], min_length=1)
    answer_tokens: PositiveInt = 96  # twelve two-digit values at most
    repeats: PositiveInt = 1


ProbeConfig = Annotated[
    RecallProbe
    | CountingStarsProbe
    | GotoProbe
    | CasesProbe
    | RagProbe
    | NiahProbe
    | VariableTrackingProbe
    | AggregationProbe
    | MrcrProbe
    | LatentListProbe,
    Field(discriminator="probe"),
]
