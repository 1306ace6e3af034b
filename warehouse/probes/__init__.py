"""Each probe's warehouse side, in the folder its declaration names (``ProbeSpec``'s
``warehouse_folder``: ``warehouse/probes/<folder>/``): its views (every ``*.sql`` of the
folder, created after views.sql, in the probes' order) and its part of the report
(``report.py``: ``figures(con, probe)``, and ``answers(con, probe)`` where it shows its
answers). A probe from outside registers its side with :func:`register`.

The store reads the views as files and never imports a folder's ``report.py``; the report
imports it when it draws the probe's section.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from needlescope.probes.catalog import specs

PACKAGE = __name__


@dataclass(frozen=True)
class Side:
    """A warehouse side given in code (a probe from outside needlescope's folders)."""

    views: str = ""  # its views' SQL
    figures: Callable[[Any, str], Any] | None = None  # (con, probe) -> ProbeCharts
    answers: Callable[[Any, str], str] | None = None  # (con, probe) -> HTML


_REGISTERED: dict[str, Side] = {}


def register(folder: str, side: Side) -> None:
    _REGISTERED[folder] = side


def unregister(folder: str) -> None:
    _REGISTERED.pop(folder, None)


def folders() -> list[str]:
    """The probes' warehouse folders, each once, in the probes' order."""
    return list(dict.fromkeys(s.warehouse_folder for s in specs().values()))


def views_sql() -> str:
    """Every probe's views, folder by folder: its ``*.sql`` files by name, or its registered
    side's SQL."""
    parts = []
    for folder in folders():
        if folder in _REGISTERED:
            parts.append(_REGISTERED[folder].views)
            continue
        try:
            files = resources.files(f"{PACKAGE}.{folder}")
        except ModuleNotFoundError:  # a probe with no warehouse side of its own
            continue
        sql = sorted((f for f in files.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
        parts += [f.read_text() for f in sql]
    return "\n".join(parts)


def _hook(probe: str, name: str) -> Callable[[Any, str], Any] | None:
    found = specs().get(probe)
    if found is None:
        return None
    folder = found.warehouse_folder
    if folder in _REGISTERED:
        return getattr(_REGISTERED[folder], name)
    try:
        module = importlib.import_module(f"{PACKAGE}.{folder}.report")
    except ModuleNotFoundError as exc:
        if exc.name not in (f"{PACKAGE}.{folder}", f"{PACKAGE}.{folder}.report"):
            raise
        return None
    hook: Callable[[Any, str], Any] | None = getattr(module, name, None)
    return hook


def figures(con: Any, probe: str) -> Any:
    """The probe's own charts (``report.figures.ProbeCharts``), or None when it has none."""
    hook = _hook(probe, "figures")
    return None if hook is None else hook(con, probe)


def answers(con: Any, probe: str) -> str:
    """The probe's answer blocks (HTML), or '' when it shows none."""
    hook = _hook(probe, "answers")
    return "" if hook is None else str(hook(con, probe))


__all__ = ["Side", "answers", "figures", "folders", "register", "unregister", "views_sql"]
