"""Sweep configuration: a YAML file validated into frozen pydantic models, each error one line
naming the file and the field, before Prefect is imported (``load_config``, ``parse_config``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.config._errors import FIELD_FIRST, format_location, one_line
    from needlescope.config._file import load_config
    from needlescope.config._models import Frozen
    from needlescope.config._probes import Count, LatentListProbe, MrcrProbe
    from needlescope.config._ruler import CWE_PARAMETERS, FWE_PARAMETERS, RulerProbeBase
    from needlescope.config._sweep import (
        BUILTIN_FILLERS,
        AggregationProbe,
        CasesProbe,
        CountingStarsProbe,
        FillerSpec,
        GotoProbe,
        ModelConfig,
        NiahProbe,
        ProbeConfig,
        RagProbe,
        RecallProbe,
        SweepConfig,
        VariableTrackingProbe,
        parse_config,
        resolve_api_key,
        without_credentials,
    )

__all__ = [
    "BUILTIN_FILLERS",
    "CWE_PARAMETERS",
    "FIELD_FIRST",
    "FWE_PARAMETERS",
    "AggregationProbe",
    "CasesProbe",
    "Count",
    "CountingStarsProbe",
    "FillerSpec",
    "Frozen",
    "GotoProbe",
    "LatentListProbe",
    "ModelConfig",
    "MrcrProbe",
    "NiahProbe",
    "ProbeConfig",
    "RagProbe",
    "RecallProbe",
    "RulerProbeBase",
    "SweepConfig",
    "VariableTrackingProbe",
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
        "Frozen": "._models",
        "Count": "._probes",
        "LatentListProbe": "._probes",
        "MrcrProbe": "._probes",
        "CWE_PARAMETERS": "._ruler",
        "FWE_PARAMETERS": "._ruler",
        "RulerProbeBase": "._ruler",
        "AggregationProbe": "._sweep",
        "BUILTIN_FILLERS": "._sweep",
        "CasesProbe": "._sweep",
        "CountingStarsProbe": "._sweep",
        "FillerSpec": "._sweep",
        "GotoProbe": "._sweep",
        "ModelConfig": "._sweep",
        "NiahProbe": "._sweep",
        "ProbeConfig": "._sweep",
        "RagProbe": "._sweep",
        "RecallProbe": "._sweep",
        "SweepConfig": "._sweep",
        "parse_config": "._sweep",
        "VariableTrackingProbe": "._sweep",
        "resolve_api_key": "._sweep",
        "without_credentials": "._sweep",
    },
)
