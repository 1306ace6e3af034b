"""The mrcr probe's config entry (``probe: mrcr``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from needlescope.config import Count, LengthUnit, ProbeEntry


class MrcrProbe(ProbeEntry):
    """OpenAI's MRCR on conversations of our own: ``needles`` repeats of one request among
    other requests, as many as fit each length (the whole conversation as sent)."""

    probe: Literal["mrcr"]
    lengths: list[Count] = Field(min_length=1)
    length_unit: LengthUnit = "tokens"
    needles: list[Literal[2, 4, 8]] = Field(default=[2, 4, 8], min_length=1)
    answer_tokens: PositiveInt = 512  # a repeated reply runs to about 300 tokens
    repeats: PositiveInt = 1
