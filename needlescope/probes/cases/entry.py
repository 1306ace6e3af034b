"""The cases probe's config entry (``probe: cases``): needle cases at depth percents."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from needlescope.config import Count, LengthUnit, ProbeEntry, distinct

if TYPE_CHECKING:
    from needlescope.config import SweepConfig


class CasesProbe(ProbeEntry):
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

    def mode_count(self) -> int:
        """The context modes a cell is asked in (one; rag: its ``context_modes``)."""
        return 1

    def cell_count(self, config: SweepConfig) -> int | None:
        """The cells per model, from the axes (``ProbeEntry.cell_count``)."""
        probe = self
        from needlescope.probes.cases.case_file import load_cases
        from needlescope.probes.cases.probe import probe_depths

        modes = self.mode_count()
        axes = (load_cases(probe.cases_file, probe.cases), probe.lengths, probe_depths(probe))
        prompts = distinct(probe.prompts) if probe.prompts else 1  # else one, the case's language
        return math.prod(len(a) if isinstance(a, dict) else distinct(a) for a in axes) * (
            distinct(probe.fillers) * modes * prompts * probe.repeats
        )
