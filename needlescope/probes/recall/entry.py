"""The recall probe's config entry (``probe: recall``): its grid axes and their checks."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from needlescope.config import Count, LengthUnit, ProbeEntry, distinct

if TYPE_CHECKING:
    from needlescope.config import SweepConfig


class RecallProbe(ProbeEntry):
    probe: Literal["recall"]
    takes_as_is: ClassVar[bool] = True
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

    def cell_count(self, config: SweepConfig) -> int | None:
        """The cells per model, from the axes (``ProbeEntry.cell_count``)."""
        probe = self
        from needlescope.haystack import as_is_files

        fitted = distinct(f for f in probe.fillers if not config.filler_spec(f).as_is)
        specs = [config.filler_spec(f) for f in dict.fromkeys(probe.fillers)]
        files = sum(len(as_is_files(s.path)) for s in specs if s.as_is and s.path is not None)
        counts = distinct(probe.needle_counts or [0])
        variants = math.prod(
            (
                distinct(probe.placements),
                distinct(probe.regions),
                distinct(probe.prompts),
                probe.repeats,
            )
        )
        return (distinct(probe.lengths or []) * fitted + files) * counts * variants
