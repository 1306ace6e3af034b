"""The probes, by name. Each is a module of pure functions (see probes/base.py)."""

from __future__ import annotations

import importlib
from types import ModuleType

MODULES = {
    "recall": "needlescope.probes.recall",
    "counting_stars": "needlescope.probes.counting_stars",
    "goto": "needlescope.probes.goto",
    "cases": "needlescope.probes.cases",
    "rag": "needlescope.probes.rag",
}


def probe_module(name: str) -> ModuleType:
    if name not in MODULES:
        raise KeyError(f"unknown probe {name!r}; known: {', '.join(MODULES)}")
    return importlib.import_module(MODULES[name])
