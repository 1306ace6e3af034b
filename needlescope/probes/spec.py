"""A probe's one declaration: what config validation, the grid, the warehouse and the report
read of it. Built-in probes declare theirs as ``PROBES`` in their folder's ``__init__.py``
(``needlescope/probes/<name>/``); another probe registers its own (``registry.register``).
Plain data naming modules by string, so declaring a probe imports none of its code."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProbeSpec:
    name: str  # the ``probe:`` of a config entry and of every cell
    module: str  # its module of pure functions, the ``Probe`` protocol (probes/base.py)
    entry: str  # "module:Class": its config entry, a pydantic model with ``probe: Literal[name]``
    rank: int  # where it comes in tables and the report (lower first)
    # "module:function": how many cells an entry makes, counted from its axes without making
    # them (a config asking for a billion cells is refused at once); None: made and counted.
    counter: str | None = None
    # The folder its warehouse side lives in (``warehouse/probes/<folder>/``: views and
    # charts), when several probes share one (RULER's families); default: the probe's name.
    folder: str | None = None
    judged: bool = False  # a judge model may grade its answers (``judge:`` in its entry)
    ruler: bool = False  # a RULER family: its effective length follows RULER's threshold

    @property
    def warehouse_folder(self) -> str:
        return self.folder or self.name
