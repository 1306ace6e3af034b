"""needlescope: how well large language models recall facts spread through long contexts.

The public API; everything else is internal and may move (docs/architecture.md):
- configs: ``load_config(path)``, ``parse_config(data)``, ``SweepConfig``;
- sweeps: ``sweep`` (the Prefect flow: ``sweep("configs/demo.yaml")``) and ``rerun_failed``;
- results: ``Warehouse(folder)``, whose ``connect()`` gives DuckDB with every view;
- extending: the ``Probe`` and ``Provider`` protocols;
- errors: ``NeedlescopeError`` and the hierarchy under it.

Each name is imported on first use: no Prefect until a flow is asked for.
Design: docs/design/package.md#public-api
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports
from needlescope.errors import (
    ConfigError,
    GGUFError,
    LengthError,
    MissingFacts,
    NeedlescopeError,
    ProviderError,
    RuleError,
    WarehouseError,
)

if TYPE_CHECKING:
    from needlescope.config import SweepConfig, load_config, parse_config
    from needlescope.flows.rerun import rerun_failed
    from needlescope.flows.sweep import sweep
    from needlescope.probes.base import Probe
    from needlescope.providers.base import Provider
    from needlescope.warehouse.store import Warehouse

__all__ = [
    "ConfigError",
    "GGUFError",
    "LengthError",
    "MissingFacts",
    "NeedlescopeError",
    "Probe",
    "Provider",
    "ProviderError",
    "RuleError",
    "SweepConfig",
    "Warehouse",
    "WarehouseError",
    "load_config",
    "parse_config",
    "rerun_failed",
    "sweep",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SweepConfig": ".config",
        "load_config": ".config",
        "parse_config": ".config",
        "rerun_failed": ".flows.rerun",
        "sweep": ".flows.sweep",
        "Probe": ".probes.base",
        "Provider": ".providers.base",
        "Warehouse": ".warehouse.store",
    },
)
