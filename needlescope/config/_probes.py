"""The probe entries of a sweep config: one pydantic model per probe, each in its probe's
folder (``needlescope/probes/<name>/entry.py``) and named by its declaration (the probes'
registry); here they become the one ``probes:`` field, told apart by their ``probe:`` key."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeAlias, Union

from pydantic import Field

from needlescope.config._models import Frozen


class ProbeEntry(Frozen):
    """What every probe entry has: the name of its probe, and which special fillers it takes."""

    probe: str
    # A corpus used as it is (``fit: none``): cells of length 0, one per file (recall only).
    takes_as_is: ClassVar[bool] = False
    # The Counting-Stars paper's haystack (``fit: paper``), built for a nominal length.
    takes_paper: ClassVar[bool] = False

    def cell_count(self, config: SweepConfig) -> int | None:
        """The cells this entry makes per model, counted from its axes without making them
        (a config asking for a billion cells is refused at once; it mirrors the probe's
        ``expand``); None: they are made and counted, up to one past ``max_cells``."""
        return None


def distinct(values: Iterable[Any]) -> int:
    """How many different values an axis has: a value given twice makes the same cells twice."""
    return len(dict.fromkeys(values))


if TYPE_CHECKING:
    from needlescope.config._sweep import SweepConfig


def probe_union() -> Any:
    """Every probe's entry (the catalog's), told apart by ``probe:``."""
    from needlescope.probes.catalog import entry_classes

    return Annotated[Union[entry_classes()], Field(discriminator="probe")]  # noqa: UP007


# For mypy, any probe's entry; at run time, the union of the probes' entries.
if TYPE_CHECKING:
    ProbeConfig: TypeAlias = ProbeEntry
else:
    ProbeConfig = probe_union()
