"""Sweep configuration: YAML validated into frozen pydantic models.

Every error is reported as one line naming the file and the field, before Prefect is imported.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from needlescope.errors import ConfigError
from needlescope.paths import dir_problem, file_problem

if TYPE_CHECKING:
    from needlescope.providers.base import ChatRequest, Message
from needlescope.reasoning import (
    DEFAULT_REASONING_BUDGET,
    reasoning_allowance,
    thinks_by_default,
    uses_openai_reasoning_params,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"
BUILTIN_FILLERS = ("pattern", "noise", "prose-en", "prose-zh")
PROVIDER_KINDS = ("local", "openai", "anthropic", "gemini")
# Where a remote provider answers when the config gives no base_url.
DEFAULT_BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
LengthUnit = Literal["tokens", "bytes", "chars"]
# Grid axes of sizes take whole numbers only: `true` or `1.5` in YAML is a mistake, not 1.
Count = Annotated[int, Field(gt=0, le=100_000_000, strict=True)]


def check_url(value: str) -> None:
    """An http(s) URL with a host and a valid port, or a ValueError saying what is wrong."""
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError as exc:  # "Port out of range 0-65535", "Port could not be cast…"
        raise ValueError(f"not a usable URL {without_credentials(value)!r}: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise ValueError(
            f"{without_credentials(value)!r}: the URL must start with http:// or https://"
        )
    if not url.hostname:
        raise ValueError(f"{without_credentials(value)!r}: the URL names no host")
    if port == 0:
        raise ValueError(f"{without_credentials(value)!r}: port 0 is not a port to connect to")


def has_credentials(url: str) -> bool:
    parts = urlsplit(url)
    return parts.username is not None or parts.password is not None


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` taken out (for storing and showing it)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Generation(Frozen):
    """Settings sent with every request. Part of the cell id: changing one asks the model again."""

    # None or "omit": not sent (the recall seed sends neither temperature nor max_tokens).
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    # None: sized to the probe's answer; "omit": not sent at all.
    max_tokens: PositiveInt | Literal["omit"] | None = None
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("temperature", mode="before")
    @classmethod
    def _omitted_temperature(cls, value: Any) -> Any:
        return None if value == "omit" else value

    @property
    def answer_tokens(self) -> int | None:
        """The configured answer budget, or None to size it to the probe's answer."""
        return self.max_tokens if isinstance(self.max_tokens, int) else None

    @property
    def sends_max_tokens(self) -> bool:
        return self.max_tokens != "omit"

    def request(self, messages: tuple[Message, ...], answer_tokens: int) -> ChatRequest:
        """The request these settings send for ``messages`` with an answer budget."""
        from needlescope.providers.base import ChatRequest

        extra = {k: v for k, v in {"top_p": self.top_p, "seed": self.seed}.items() if v is not None}
        return ChatRequest(
            messages=messages,
            max_tokens=answer_tokens if self.sends_max_tokens else None,
            temperature=self.temperature,
            extra={**extra, **self.extra},
        )


class Price(Frozen):
    """US dollars per million tokens. Output tokens include reasoning (billed as output)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    # Prompt tokens read from the provider's cache; None: priced as any input token.
    cached_input_per_mtok: float | None = Field(default=None, ge=0)

    def cost(
        self,
        prompt_tokens: int | None,
        output_tokens: int | None,
        cached_tokens: int | None = None,
    ) -> float | None:
        if prompt_tokens is None and output_tokens is None:
            return None
        cached = min(cached_tokens or 0, prompt_tokens or 0)
        cached_rate = self.input_per_mtok
        if self.cached_input_per_mtok is not None:
            cached_rate = self.cached_input_per_mtok
        return (
            ((prompt_tokens or 0) - cached) * self.input_per_mtok
            + cached * cached_rate
            + (output_tokens or 0) * self.output_per_mtok
        ) / 1e6


class ModelConfig(Frozen):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    provider: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    # The name of a Prefect Secret block holding the key: where scheduled deployments keep it.
    api_key_secret: Annotated[str, Field(min_length=1)] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    context_window: PositiveInt | None = None
    concurrency: PositiveInt = 4
    delay_s: float = Field(default=0.0, ge=0)  # seconds between two requests' starts (pacing)
    timeout_s: float = Field(default=600, gt=0)
    max_retry_after_s: float = Field(default=60, ge=0)
    threads: PositiveInt | None = None
    under_test: bool = True  # false for a model that only judges or embeds
    generation: Generation = Field(default_factory=Generation)
    # Generation settings as a grid axis: each entry becomes a model "<name>@<label>" whose
    # generation is this one's with the entry's fields (and `extra` keys) laid over it.
    variants: dict[Annotated[str, Field(pattern=NAME_PATTERN)], dict[str, Any]] = Field(
        default_factory=dict
    )
    price: Price | None = None
    # A model that thinks gets answer budget + reasoning_budget as its output limit. None: by
    # its name (o1/o3/o4/gpt-5, deepseek-reasoner, Gemini 2.5 and later); a model whose
    # replies carry reasoning is treated as one from then on. Not part of a cell's id.
    reasoning: bool | None = None
    reasoning_budget: PositiveInt = DEFAULT_REASONING_BUDGET
    # OpenAI's reasoning-model parameters: max_completion_tokens, no temperature or top_p.
    # None: true for OpenAI-compatible model ids starting o1, o3, o4 or gpt-5.
    openai_reasoning_params: bool | None = None

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDER_KINDS:
            raise ValueError(f"unknown provider {value!r}; known: {', '.join(PROVIDER_KINDS)}")
        return value

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        if value is not None:
            check_url(value)
        return value

    @field_serializer("base_url")
    def _no_credentials(self, value: str | None) -> str | None:
        # Credentials in a URL are secrets like keys: a stored or printed config never has them.
        return None if value is None else without_credentials(value)

    @model_validator(mode="after")
    def _remote_needs_url(self) -> ModelConfig:
        if self.provider == "openai" and not self.base_url:
            raise ValueError("an openai model needs base_url (e.g. https://api.openai.com/v1)")
        if self.provider != "local" and not self.model:
            raise ValueError(f"an {self.provider} model needs model (the id the API expects)")
        if self.api_key_env and self.api_key_secret:
            raise ValueError("give api_key_env or api_key_secret, not both")
        if self.base_url and has_credentials(self.base_url):
            key = next((k for k in ("api_key_env", "api_key_secret") if getattr(self, k)), None)
            if key is None and any(h.lower() == "authorization" for h in self.headers):
                key = "an Authorization header"
            if key is not None:
                raise ValueError(
                    f"base_url: credentials in the URL (sent as HTTP Basic auth) and {key}"
                    " together: give one of them"
                )
        return self

    @model_validator(mode="after")
    def _provider_accepts_generation(self) -> ModelConfig:
        from needlescope.provider_rules import check_generation

        check_generation(
            self.provider,
            self.model,
            self.generation,
            reasoning_params=self.sends_reasoning_params,
        )
        return self

    @property
    def thinks(self) -> bool:
        """Whether the model reasons before answering (configured, else by its name)."""
        if self.reasoning is not None:
            return self.reasoning
        return thinks_by_default(self.provider, self.model)

    @property
    def sends_reasoning_params(self) -> bool:
        """OpenAI-compatible: send max_completion_tokens and no temperature / top_p."""
        if self.provider != "openai":
            return False
        if self.openai_reasoning_params is not None:
            return self.openai_reasoning_params
        return uses_openai_reasoning_params(self.model)

    def output_limit(self, answer_tokens: int) -> int:
        """The output limit sent for an answer budget: room for reasoning added."""
        return answer_tokens + reasoning_allowance(
            self.provider,
            self.generation.extra,
            reasoning=self.thinks,
            reasoning_budget=self.reasoning_budget,
        )

    def endpoint(self) -> str:
        """The URL the provider talks to (configured, or the provider's public API)."""
        return self.base_url or DEFAULT_BASE_URLS.get(self.provider, "")

    def identity(self) -> dict[str, Any]:
        """What identifies the model in a cell id: never keys, URLs or concurrency."""
        return {"name": self.name, "provider": self.provider, "model": self.model}


class FillerSpec(Frozen):
    kind: Literal["pattern", "noise", "prose", "corpus"]
    pattern: str = Field(default="a|", min_length=1)
    language: Literal["en", "zh"] = "en"
    path: Path | None = None
    seed: int = 0
    scrub_digits: bool = True
    # "none": a corpus used as it is, as the recall seed used a novel: each .txt file (or the
    # one file ``path`` names) is a whole haystack, not fitted to a length, digits kept.
    # "paper": built as the Counting-Stars repository builds its haystack (in ``language``),
    # its length the repository's nominal one (fillers.PaperCorpusFiller), digits kept.
    fit: Literal["auto", "none", "paper"] = "auto"

    @model_validator(mode="after")
    def _corpus_needs_path(self) -> FillerSpec:
        if self.kind == "corpus" and self.path is None:
            raise ValueError("a corpus filler needs path (a directory of .txt files)")
        if self.fit != "auto":
            what = "a file used as it is" if self.fit == "none" else "the paper's haystack"
            if self.kind != "corpus":
                raise ValueError(f"fit: {self.fit} is for corpus fillers ({what})")
            if "scrub_digits" in self.model_fields_set and self.scrub_digits:
                raise ValueError(f"fit: {self.fit} keeps the digits: scrub_digits cannot be true")
        return self

    @property
    def as_is(self) -> bool:
        return self.fit == "none"

    @property
    def paper(self) -> bool:
        return self.fit == "paper"


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
        from needlescope.haystack import parse_regions
        from needlescope.needle_ranges import counted_needles
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
        from needlescope.needle_ranges import counted_needles

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
        from needlescope.probes.goto import GOTO_TEMPLATES

        for value in values:
            if value not in GOTO_TEMPLATES:
                raise ValueError(
                    f"unknown prompt template {value!r}; known: {', '.join(sorted(GOTO_TEMPLATES))}"
                )
        return values

    @model_validator(mode="after")
    def _distinct_values_fit(self) -> GotoProbe:
        from needlescope.probes.goto import SEED_TEMPLATE

        distinct = [p for p in self.prompts if p != SEED_TEMPLATE]
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
        from needlescope.probes.cases import PROMPTS

        return PROMPTS

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
        from needlescope.probes.rag import PROMPTS

        return PROMPTS

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


ProbeConfig = Annotated[
    RecallProbe | CountingStarsProbe | GotoProbe | CasesProbe | RagProbe,
    Field(discriminator="probe"),
]


class RetryPolicy(Frozen):
    retries: int = Field(default=3, ge=0, le=20)
    backoff_s: list[Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]] = Field(
        default=[2.0, 10.0, 30.0], max_length=50
    )


class Budget(Frozen):
    """A sweep stops sending when either is spent; unsent cells wait for a later run."""

    usd: float | None = Field(default=None, gt=0)
    tokens: PositiveInt | None = None


def _expandable(model: Any, variants: Any) -> bool:
    if not variants or not isinstance(variants, dict):
        return False
    generation = model.get("generation") or {}
    return (
        isinstance(generation, dict)
        and isinstance(generation.get("extra") or {}, dict)
        and all(
            isinstance(o, dict) and isinstance(o.get("extra") or {}, dict)
            for o in variants.values()
        )
    )


class Schedule(Frozen):
    """When the config's `nightly` deployment runs (a cron line in ``timezone``)."""

    cron: str = "0 3 * * *"
    timezone: str = "UTC"
    active: bool = True

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        from cronsim import CronSim, CronSimError

        try:
            CronSim(value, datetime(2026, 1, 1))
        except CronSimError as exc:
            raise ValueError(f"invalid cron {value!r}: {exc}") from None
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}") from None
        return value


class SweepConfig(Frozen):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: str = ""
    seed: int = 0
    epoch: str | None = None
    warehouse: Path | None = None
    save_prompts: bool = False
    batch_size: PositiveInt = 32
    models: list[ModelConfig] = Field(min_length=1)
    probes: list[ProbeConfig] = Field(min_length=1)
    fillers: dict[str, FillerSpec] = Field(default_factory=dict)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    budget: Budget | None = None
    schedule: Schedule = Field(default_factory=Schedule)
    # The order cells are sent in. "auto": "prefix" for providers that cache prompt prefixes
    # (consecutive prompts share the longest prefix), else "grid" (the grid's own order).
    # "shuffled" (seeded) is there to measure what the order buys.
    cell_order: Literal["auto", "prefix", "grid", "shuffled"] = "auto"
    # Merge the warehouse's small files when a run ends (warehouse/compaction.py).
    compact: bool = True
    # A grid larger than this is refused before a cell is made: it is a mistake (repeats:
    # 1000000000) far more often than a plan.
    max_cells: PositiveInt = 1_000_000
    # A sweep holds a claim on each cell it works on (warehouse/claims.py), renewed while it
    # lives; a crashed sweep's claims lapse after this many seconds (at once on this machine).
    claim_timeout_s: float = Field(default=120.0, ge=1, le=86_400)

    @model_validator(mode="before")
    @classmethod
    def _expand_variants(cls, data: Any) -> Any:
        """Each model variant becomes a model of its own, so variants are cells of their own."""
        if not isinstance(data, dict) or not isinstance(data.get("models"), list):
            return data
        models = []
        for model in data["models"]:
            variants = model.get("variants") if isinstance(model, dict) else None
            if variants is None or not _expandable(model, variants):
                models.append(model)  # field validation then names what is wrong
                continue
            for label, overrides in variants.items():
                generation = dict(model.get("generation") or {})
                overrides = dict(overrides or {})
                extra = {**dict(generation.get("extra") or {}), **dict(overrides.pop("extra", {}))}
                known = {k: v for k, v in overrides.items() if k in Generation.model_fields}
                extra.update({k: v for k, v in overrides.items() if k not in known})
                generation.update(known, extra=extra)
                models.append(
                    {
                        **model,
                        "name": f"{model.get('name')}@{label}",
                        "variants": {},
                        "generation": generation,
                    }
                )
        return {**data, "models": models}

    @model_validator(mode="after")
    def _cross_checks(self) -> SweepConfig:
        names = [m.name for m in self.models]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"model names must be unique; repeated: {', '.join(duplicated)}")
        for index, probe in enumerate(self.probes):
            for filler in getattr(probe, "fillers", []):
                if filler not in self.fillers and filler not in BUILTIN_FILLERS:
                    known = ", ".join([*BUILTIN_FILLERS, *self.fillers])
                    raise ValueError(
                        f"probes.{index}.fillers: unknown filler {filler!r}; known: {known}"
                    )
        for index, probe in enumerate(self.probes):
            if isinstance(probe, RecallProbe) and probe.lengths is None:
                fitted = [f for f in probe.fillers if not self.filler_spec(f).as_is]
                if fitted:
                    raise ValueError(
                        f"probes.{index}.lengths: Field required (fillers {', '.join(fitted)}"
                        " are fitted to a length)"
                    )
            elif not isinstance(probe, RecallProbe):
                as_is = [f for f in getattr(probe, "fillers", []) if self.filler_spec(f).as_is]
                if as_is:
                    raise ValueError(
                        f"probes.{index}.fillers: {as_is[0]!r} is used as it is (fit: none),"
                        f" which only the recall probe supports"
                    )
            if not isinstance(probe, CountingStarsProbe):
                paper = [f for f in getattr(probe, "fillers", []) if self.filler_spec(f).paper]
                if paper:
                    raise ValueError(
                        f"probes.{index}.fillers: {paper[0]!r} is the Counting-Stars paper's"
                        f" haystack (fit: paper), which only the counting_stars probe supports"
                    )
        for index, probe in enumerate(self.probes):
            for role in ("judge", "embedder"):
                name = getattr(probe, role, None)
                if name is not None and name not in names:
                    raise ValueError(f"probes.{index}.{role}: unknown model {name!r}")
        return self

    def filler_spec(self, name: str) -> FillerSpec:
        if name in self.fillers:
            return self.fillers[name]
        if name == "pattern":
            return FillerSpec(kind="pattern")
        if name == "noise":
            return FillerSpec(kind="noise")
        if name in ("prose-en", "prose-zh"):
            return FillerSpec(kind="prose", language=name.removeprefix("prose-"))  # type: ignore[arg-type]
        raise KeyError(name)

    def tested_models(self) -> list[ModelConfig]:
        return [m for m in self.models if m.under_test]

    def model(self, name: str) -> ModelConfig:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)


def _format_location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-"))


_FIELD_FIRST = re.compile(r"([a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_]+)*): ")


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def parse_config(data: Any, source: str = "<config>") -> SweepConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = _format_location(tuple(first["loc"]))
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown field"
        # A check across fields names its field first ("regions: ..."): part of the location.
        if (named := _FIELD_FIRST.match(message)) and first["type"] == "value_error":
            location = ".".join(p for p in (location, named[1]) if p)
            message = message[named.end() :]
        where = f"{source}: {location}: " if location else f"{source}: "
        raise ConfigError(_one_line(where + message)) from None


def load_config(path: str | Path) -> SweepConfig:
    from needlescope.config_yaml import read_yaml

    path = Path(path)
    config = parse_config(read_yaml(path), str(path))
    config = _resolve_relative_paths(config, path)
    _check_grid_size(config, path)
    return config


def _check_grid_size(config: SweepConfig, source: Path) -> None:
    """A grid past ``max_cells`` is refused before a cell is made (it is counted, not built)."""
    from needlescope.grid_size import grid_sizes

    sizes = grid_sizes(config)
    total = sum(sizes)
    if total > config.max_cells:
        largest = max(range(len(sizes)), key=sizes.__getitem__)
        raise ConfigError(
            f"{source}: max_cells: the grid would make {total:,} cells (probes.{largest}:"
            f" {sizes[largest]:,}), more than max_cells ({config.max_cells:,}); shrink the grid"
            " or raise max_cells"
        )


def _resolve_relative_paths(config: SweepConfig, source: Path) -> SweepConfig:
    """Corpus paths in a config are relative to the config file, as a user reading it expects."""
    base = source.parent
    fillers = {
        name: spec.model_copy(update={"path": (base / spec.path)})
        if spec.path is not None and not spec.path.is_absolute()
        else spec
        for name, spec in config.fillers.items()
    }
    for name, spec in fillers.items():
        if spec.kind == "corpus" and spec.path is not None:
            _check_corpus(spec, f"{source}: fillers.{name}.path")
    probes = [_resolve_probe_paths(probe, base) for probe in config.probes]
    for index, probe in enumerate(probes):
        for name in ("cases_file", "rubric_file"):
            path = getattr(probe, name, None)
            if isinstance(path, Path) and (problem := file_problem(path)) not in (
                None,
                "not found",
            ):
                raise ConfigError(f"{source}: probes.{index}.{name}: {path}: {problem}")
        if isinstance(probe, CasesProbe):  # a bad case file fails here, before Prefect starts
            from needlescope.probes.cases import load_cases

            load_cases(probe.cases_file, probe.cases)
        if getattr(probe, "judge", None) and getattr(probe, "rubric_file", None):
            from needlescope.judge import load_rubric

            load_rubric(probe.rubric_file)
    return config.model_copy(update={"fillers": fillers, "probes": probes})


def _check_corpus(spec: FillerSpec, where: str) -> None:
    """A corpus folder (or, used as it is, a file) whose every .txt entry is a regular UTF-8
    file: a folder named x.txt, a pipe or a symlink loop would fail the sweep mid-way."""
    from needlescope.cells import filler_identity

    assert spec.path is not None
    path = spec.path
    whole_files = spec.as_is or spec.paper  # these take one file as well as a folder
    if whole_files and file_problem(path) is None:
        entries = [path]
    else:
        problem = dir_problem(path)
        if problem == "not found":
            kind = "not found" if whole_files else "corpus directory not found"
            raise ConfigError(f"{where}: {kind}: {path}")
        if problem is not None:
            raise ConfigError(f"{where}: {path}: {problem}")
        entries = sorted(p for p in path.iterdir() if p.suffix == ".txt")
    if not entries:
        raise ConfigError(f"{where}: no .txt files in {path}")
    for entry in entries:
        if (problem := file_problem(entry)) is not None:
            raise ConfigError(f"{where}: {entry}: {problem}")
    # Each haystack is read once here (cached for the sweep), so bad text fails now.
    specs = [spec.model_copy(update={"path": e}) for e in entries] if spec.as_is else [spec]
    try:
        for each in specs:
            filler_identity(each)
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: a .txt file in {path} is not UTF-8 text") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(_one_line(f"{where}: {path}: {exc}")) from None


def _resolve_probe_paths(probe: Any, base: Path) -> Any:
    updates = {
        name: base / value
        for name in ("cases_file", "rubric_file")
        if isinstance(value := getattr(probe, name, None), Path) and not value.is_absolute()
    }
    return probe.model_copy(update=updates) if updates else probe


def load_dotenv_once() -> None:
    from dotenv import load_dotenv

    load_dotenv(dotenv_path=Path.cwd() / ".env", override=False)


def resolve_api_key(model: ModelConfig) -> str | None:
    """The model's key from the environment (or .env); a missing one is a config error.

    A key kept in a Prefect Secret block (``api_key_secret``) is read by the flow, not here.
    """
    if model.api_key_env is None:
        return None
    load_dotenv_once()
    key = os.environ.get(model.api_key_env)
    if not key:
        raise ConfigError(
            f"models.{model.name}: environment variable {model.api_key_env} is not set"
        )
    return key
