"""The latent_list probe's config entry (``probe: latent_list``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt

from needlescope.config import Count, LengthUnit, ProbeEntry


class LatentListProbe(ProbeEntry):
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
