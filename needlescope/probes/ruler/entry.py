"""The config entries of RULER's families: ``niah``, ``variable_tracking`` and
``aggregation``, in RULER's parameter names."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt, model_validator

from needlescope.config import Count, ProbeEntry


class RulerProbeBase(ProbeEntry):
    """What RULER's three probes share: token lengths as RULER counts them, its prompts, and
    how its answer prefix is sent."""

    lengths: list[Count] = Field(min_length=1)
    length_unit: Literal["tokens"] = "tokens"  # RULER's lengths are the model's tokens
    # ruler: the length is RULER's max_seq_length, the answer's tokens_to_generate included
    # (niah 128, vt 30, cwe 120, fwe 50); prompt: the prompt's tokens alone.
    length_budget: Literal["ruler", "prompt"] = "ruler"
    prompts: list[str] = Field(default=["ruler"], min_length=1)
    # auto: an assistant prefill where the provider continues one (Anthropic, the local
    # llama.cpp server; not a reasoning model), else appended to the user's message.
    answer_prefix: Literal["auto", "prefill", "append"] = "auto"
    repeats: PositiveInt = 1

    def families(self) -> tuple[str, ...]:
        raise NotImplementedError

    @model_validator(mode="after")
    def _known_ruler_prompts(self) -> RulerProbeBase:
        from needlescope.probes.ruler.templates import TEMPLATES

        for family in self.families():
            known = TEMPLATES[family]  # type: ignore[index]
            for value in self.prompts:
                if value not in known:
                    raise ValueError(
                        f"prompts: unknown {family} prompt {value!r}; known: {', '.join(known)}"
                    )
        return self


NIAH_PARAMETERS = (
    "type_haystack",
    "type_needle_k",
    "type_needle_v",
    "num_needle_k",
    "num_needle_v",
    "num_needle_q",
)


class NiahProbe(RulerProbeBase):
    """RULER's needle variants: its presets by name, or its parameters (RULER's defaults)."""

    probe: Literal["niah"]
    presets: list[str] | None = Field(default=None, min_length=1)
    type_haystack: Literal["noise", "essay", "needle"] | None = None
    type_needle_k: Literal["words", "numbers", "uuids"] | None = None
    type_needle_v: Literal["words", "numbers", "uuids"] | None = None
    num_needle_k: Annotated[int, Field(gt=0, le=40, strict=True)] | None = None
    num_needle_v: Annotated[int, Field(gt=0, le=40, strict=True)] | None = None
    num_needle_q: Annotated[int, Field(gt=0, le=40, strict=True)] | None = None
    # The text of the essay haystack (RULER: Paul Graham's essays); a grid axis of essay cells.
    fillers: list[str] = Field(default=["prose-en"], min_length=1)

    def families(self) -> tuple[str, ...]:
        return ("niah",)

    @model_validator(mode="after")
    def _presets_or_parameters(self) -> NiahProbe:
        from needlescope.probes.ruler.niah import PRESETS, NiahSpec

        given = [name for name in NIAH_PARAMETERS if getattr(self, name) is not None]
        if self.presets is not None:
            for name in self.presets:
                if name not in PRESETS:
                    raise ValueError(
                        f"presets: unknown niah preset {name!r}; known: {', '.join(PRESETS)}"
                    )
            if given:
                raise ValueError(f"{given[0]}: give presets or RULER's parameters, not both")
            return self
        try:
            NiahSpec(**{name: getattr(self, name) for name in given})
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return self

    def specs(self) -> list[tuple[str | None, Any]]:
        """(preset name or None, NiahSpec) of each variant, in grid order."""
        from needlescope.probes.ruler.niah import PRESETS, NiahSpec

        if self.presets is not None:
            return [(name, PRESETS[name]) for name in self.presets]
        given = {name: getattr(self, name) for name in NIAH_PARAMETERS}
        return [(None, NiahSpec(**{k: v for k, v in given.items() if v is not None}))]


class VariableTrackingProbe(RulerProbeBase):
    """RULER's variable tracking (``vt``): chains of ``VAR X = VAR Y`` assignments."""

    probe: Literal["variable_tracking"]
    num_chains: Annotated[int, Field(gt=0, le=100, strict=True)] = 1
    num_hops: Annotated[int, Field(gt=0, le=100, strict=True)] = 4
    fewshot: bool = True  # RULER's worked example before the question

    def families(self) -> tuple[str, ...]:
        return ("variable_tracking",)


CWE_PARAMETERS = ("num_cw", "freq_cw", "freq_ucw", "num_fewshot")
FWE_PARAMETERS = ("alpha", "vocab_size", "coded_wordlen")


class AggregationProbe(RulerProbeBase):
    """RULER's aggregation: the most common words (``cwe``) or frequent coded words (``fwe``)."""

    probe: Literal["aggregation"]
    task: Literal["cwe", "fwe"]
    num_cw: Annotated[int, Field(gt=0, le=1000, strict=True)] = 10
    freq_cw: Annotated[int, Field(gt=0, le=1000, strict=True)] = 30
    freq_ucw: Annotated[int, Field(gt=0, le=1000, strict=True)] = 3
    num_fewshot: Annotated[int, Field(ge=0, le=10, strict=True)] = 1
    alpha: float = Field(default=2.0, gt=1, le=10)
    vocab_size: Annotated[int, Field(ge=4, le=100_000, strict=True)] = 2000
    coded_wordlen: Annotated[int, Field(ge=3, le=20, strict=True)] = 6

    def families(self) -> tuple[str, ...]:
        return (self.task,)

    @model_validator(mode="after")
    def _own_task_parameters(self) -> AggregationProbe:
        other = FWE_PARAMETERS if self.task == "cwe" else CWE_PARAMETERS
        stray = [name for name in other if name in self.model_fields_set]
        if stray:
            raise ValueError(f"{stray[0]}: not a parameter of task {self.task}")
        return self
