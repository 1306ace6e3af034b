"""The goto probe's config entry (``probe: goto``): the Little Retrieval Test's axes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from needlescope.config import Count, ProbeEntry, distinct

if TYPE_CHECKING:
    from needlescope.config import SweepConfig


class GotoProbe(ProbeEntry):
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

    def cell_count(self, config: SweepConfig) -> int | None:
        """The cells per model, from the axes (``ProbeEntry.cell_count``)."""
        probe = self
        axes = (probe.line_counts, probe.orders, probe.prompts)
        return math.prod(distinct(axis) for axis in axes) * probe.repeats
