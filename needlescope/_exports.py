"""A package's public names, each imported from its private module on first use.

A package's ``__init__`` declares what it offers (``__all__``) and where each name lives; the
module is imported when the name is first asked for. So importing a package costs nothing,
and packages that use each other (config and probes, grid and haystack) import in the order
their modules need, as plain modules would. Under ``TYPE_CHECKING`` each ``__init__`` imports
the same names directly, for mypy.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each of ``names`` (name -> the module
    it lives in, relative to the package) imported on first use, then kept as an attribute."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
