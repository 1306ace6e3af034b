"""The counting_stars probe's config entry (``probe: counting_stars``): Counting-Stars-(M-N)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from needlescope.config import Count, LengthUnit, ProbeEntry, distinct

STAR_PRESETS = {"32-32": (32, 32), "64-32": (64, 32), "16-32": (16, 32), "32-16": (32, 16)}


if TYPE_CHECKING:
    from needlescope.config import SweepConfig


class CountingStarsProbe(ProbeEntry):
    """Counting-Stars-(M-N): M star sentences, N lengths evenly up to ``max_length``."""

    probe: Literal["counting_stars"]
    takes_paper: ClassVar[bool] = True
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
        from needlescope.probes.counting_stars.templates import TEMPLATES

        for value in values or []:
            if value not in TEMPLATES:
                known = ", ".join(TEMPLATES)
                raise ValueError(f"unknown prompt template {value!r}; known: {known}")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> CountingStarsProbe:
        from needlescope.probes.counting_stars.counts import COUNTS
        from needlescope.probes.counting_stars.templates import TEMPLATES

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
        from needlescope.probes.counting_stars.templates import template_version

        if self.prompts is not None:
            return list(self.prompts)
        return [template_version(language, self.reasoning) for language in self.languages]

    def length_grid(self) -> list[int]:
        if self.lengths is not None:
            return list(self.lengths)
        steps = self.steps or (STAR_PRESETS[self.preset][1] if self.preset else 32)
        assert self.max_length is not None
        return sorted({max(1, round(self.max_length * (i + 1) / steps)) for i in range(steps)})

    def cell_count(self, config: SweepConfig) -> int | None:
        """The cells per model, from the axes (``ProbeEntry.cell_count``)."""
        probe = self
        from needlescope.probes.counting_stars.probe import fillers_for
        from needlescope.probes.counting_stars.templates import TEMPLATES

        fillers = sum(
            distinct(fillers_for(config, probe.fillers, TEMPLATES[prompt].language))
            for prompt in dict.fromkeys(probe.templates())
        )
        orders = 1 if probe.counts == "paper" else distinct(probe.orders)  # the paper's own order
        return len(probe.length_grid()) * fillers * orders * probe.repeats
