"""The rag probe's config entry (``probe: rag``): the cases entry, retrieved in RAG mode."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from needlescope.config import distinct
from needlescope.probes.cases.entry import CasesProbe


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

    def mode_count(self) -> int:
        return distinct(self.context_modes)

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
