"""Every probe's declaration (:class:`~needlescope.probes.spec.ProbeSpec`), by name.

Built-in probes are found, not listed: each folder of ``needlescope/probes/`` whose
``__init__.py`` declares ``PROBES`` (RULER's folder declares its three families). Another probe
(a plugin's, a test's) joins with :func:`register`, and leaves with :func:`unregister`. Config
validation (the ``probes:`` entries), the grid, the warehouse and the report all read this one
catalog. Finding the probes imports their folders' ``__init__`` files, which import nothing.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from functools import cache
from typing import cast

from needlescope.probes.spec import ProbeSpec

_ADDED: dict[str, ProbeSpec] = {}
# Called after a probe is registered or unregistered: config validation rebuilds its entries.
_LISTENERS: list[Callable[[], None]] = []


@cache
def _builtin() -> dict[str, ProbeSpec]:
    import needlescope.probes as package

    found: dict[str, ProbeSpec] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        folder = importlib.import_module(f"{package.__name__}.{info.name}")
        for spec in getattr(folder, "PROBES", ()):
            found[spec.name] = spec
    return found


def specs() -> dict[str, ProbeSpec]:
    """Every probe's declaration by name, in the order probes are shown (``rank``)."""
    every = {**_builtin(), **_ADDED}
    return dict(sorted(every.items(), key=lambda item: (item[1].rank, item[0])))


def spec(name: str) -> ProbeSpec:
    found = specs().get(name)
    if found is None:
        raise KeyError(f"unknown probe {name!r}; known: {', '.join(specs())}")
    return found


def entry_classes() -> tuple[type, ...]:
    """Each probe's config entry class (``ProbeSpec.entry``), in the catalog's order."""
    return tuple(cast(type, _attribute(s.entry)) for s in specs().values())


def _attribute(path: str) -> object:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def register(probe: ProbeSpec) -> None:
    """Add a probe from outside needlescope's folders; config validation takes its entries
    from now on."""
    if probe.name in _builtin():
        raise ValueError(f"probe {probe.name!r} is needlescope's own")
    _ADDED[probe.name] = probe
    _changed()


def unregister(name: str) -> None:
    _ADDED.pop(name, None)
    _changed()


def on_change(listener: Callable[[], None]) -> None:
    _LISTENERS.append(listener)


def _changed() -> None:
    for listener in _LISTENERS:
        listener()


def rank(name: str) -> tuple[int, str]:
    """A sort key for probe names: the declared rank, then the name (unknown names last)."""
    found = specs().get(name)
    return (found.rank if found else 1_000_000, name)


def ordered(names: Iterable[str]) -> list[str]:
    """Probe names without repeats, in the catalog's order."""
    return sorted(dict.fromkeys(names), key=rank)
