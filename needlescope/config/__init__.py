"""Sweep configuration: a YAML file validated into frozen pydantic models, each error one line
naming the file and the field, before Prefect is imported (``load_config``, ``parse_config``).
A probe's own entry lives in its folder (``needlescope/probes/<name>/entry.py``), built from
``ProbeEntry``, ``Count`` and ``LengthUnit``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.config._errors import FIELD_FIRST, format_location, one_line
    from needlescope.config._file import load_config
    from needlescope.config._models import BatchSettings, Count, Frozen, LengthUnit
    from needlescope.config._probes import ProbeConfig, ProbeEntry, distinct
    from needlescope.config._sweep import (
        BUILTIN_FILLERS,
        FillerSpec,
        ModelConfig,
        SweepConfig,
        parse_config,
        resolve_api_key,
        without_credentials,
    )

__all__ = [
    "BUILTIN_FILLERS",
    "FIELD_FIRST",
    "BatchSettings",
    "Count",
    "FillerSpec",
    "Frozen",
    "LengthUnit",
    "ModelConfig",
    "ProbeConfig",
    "ProbeEntry",
    "SweepConfig",
    "distinct",
    "format_location",
    "load_config",
    "one_line",
    "parse_config",
    "resolve_api_key",
    "without_credentials",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FIELD_FIRST": "._errors",
        "format_location": "._errors",
        "one_line": "._errors",
        "load_config": "._file",
        "BatchSettings": "._models",
        "Count": "._models",
        "Frozen": "._models",
        "LengthUnit": "._models",
        "ProbeConfig": "._probes",
        "ProbeEntry": "._probes",
        "distinct": "._probes",
        "BUILTIN_FILLERS": "._sweep",
        "FillerSpec": "._sweep",
        "ModelConfig": "._sweep",
        "SweepConfig": "._sweep",
        "parse_config": "._sweep",
        "resolve_api_key": "._sweep",
        "without_credentials": "._sweep",
    },
)
