"""Sweep configuration: YAML validated into frozen pydantic models.

Every error is reported as one line naming the file and the field, before Prefect is imported.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from needlescope.config._errors import FIELD_FIRST, format_location, one_line
from needlescope.config._models import (
    NAME_PATTERN,
    BatchSettings,
    Frozen,
    Generation,
    ModelConfig,
    Price,
    check_url,
    has_credentials,
    without_credentials,
)
from needlescope.config._probes import ProbeConfig, ProbeEntry
from needlescope.errors import ConfigError
from needlescope.gates import Gate, Notify, check_gate_probes
from needlescope.probes.catalog import on_change

BUILTIN_FILLERS = ("pattern", "noise", "prose-en", "prose-zh")


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
    # Regression gates judged per model when a sweep ends (needlescope.gates), and the Prefect
    # notification block their alerts go to.
    gates: list[Gate] = Field(default_factory=list)
    notify: Notify | None = None

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
            if probe.takes_as_is and getattr(probe, "lengths", None) is None:
                fillers: list[str] = getattr(probe, "fillers", [])
                fitted = [f for f in fillers if not self.filler_spec(f).as_is]
                if fitted:
                    raise ValueError(
                        f"probes.{index}.lengths: Field required (fillers {', '.join(fitted)}"
                        " are fitted to a length)"
                    )
            elif not probe.takes_as_is:
                as_is = [f for f in getattr(probe, "fillers", []) if self.filler_spec(f).as_is]
                if as_is:
                    raise ValueError(
                        f"probes.{index}.fillers: {as_is[0]!r} is used as it is (fit: none),"
                        f" which the {probe.probe} probe does not support"
                    )
            if not probe.takes_paper:
                paper = [f for f in getattr(probe, "fillers", []) if self.filler_spec(f).paper]
                if paper:
                    raise ValueError(
                        f"probes.{index}.fillers: {paper[0]!r} is the Counting-Stars paper's"
                        f" haystack (fit: paper), which the {probe.probe} probe does not support"
                    )
        for index, probe in enumerate(self.probes):
            for role in ("judge", "embedder"):
                name = getattr(probe, role, None)
                if name is not None and name not in names:
                    raise ValueError(f"probes.{index}.{role}: unknown model {name!r}")
        check_gate_probes(self.gates, [p.probe for p in self.probes])
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


def parse_config(data: Any, source: str = "<config>") -> SweepConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = format_location(tuple(first["loc"]))
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown field"
        # A check across fields names its field first ("regions: ..."): part of the location.
        if (named := FIELD_FIRST.match(message)) and first["type"] == "value_error":
            location = ".".join(p for p in (location, named[1]) if p)
            message = message[named.end() :]
        where = f"{source}: {location}: " if location else f"{source}: "
        raise ConfigError(one_line(where + message)) from None


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


# The config's models, importable from here whichever module defines them.
__all__ = [
    "BUILTIN_FILLERS",
    "BatchSettings",
    "Budget",
    "FillerSpec",
    "Generation",
    "ModelConfig",
    "Price",
    "ProbeConfig",
    "ProbeEntry",
    "RetryPolicy",
    "Schedule",
    "SweepConfig",
    "check_url",
    "has_credentials",
    "load_dotenv_once",
    "one_line",
    "parse_config",
    "resolve_api_key",
    "without_credentials",
]


def _probes_changed() -> None:
    """A probe registered or unregistered (probes/catalog.py): the entries ``probes:`` takes."""
    from pydantic.fields import FieldInfo

    from needlescope.config._probes import probe_union

    field = SweepConfig.model_fields["probes"]
    SweepConfig.model_fields["probes"] = FieldInfo.merge_field_infos(
        field,
        annotation=list[probe_union()],  # type: ignore[misc]
    )
    SweepConfig.model_rebuild(force=True)


on_change(_probes_changed)
