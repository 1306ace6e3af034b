"""Which cells a run sweeps, and in what order: its part of the grid (a rerun's cells, a
shard), those that fit their model's window, those the epoch has not graded, each model's in
its sending order; and the helper models (judges) they need."""

from collections.abc import Collection
from dataclasses import dataclass, field

from needlescope.config import ProbeConfig, SweepConfig
from needlescope.fitting import fits_context
from needlescope.grid import Cell, order_cells, shard_of
from needlescope.probes.cases.entry import CasesProbe
from needlescope.probes.registry import expand_with_probes
from needlescope.providers.registry import CACHES_PREFIXES


def helper_models(
    config: SweepConfig, cells: list[Cell], probe_of: dict[str, ProbeConfig]
) -> set[str]:
    """Models the cells to do need besides the ones under test: judges (embedders start apart)."""
    return {
        probe.judge
        for cell in cells
        if isinstance(probe := probe_of[cell.cell_id], CasesProbe) and probe.judge
    }


def uses_prefix_order(config: SweepConfig, model: str) -> bool:
    if config.model(model).cache == "auto":
        return True  # the readers of a cached prefix follow its writer
    order = config.cell_order
    if order == "auto":
        return config.model(model).provider in CACHES_PREFIXES
    return order == "prefix"


def select_cells(
    cells: list[Cell], only_cells: Collection[str] | None, shard: int | None, shards: int
) -> list[Cell]:
    """The cells this flow run is for: a rerun's chosen cells, one shard of a split sweep."""
    if only_cells is not None:
        wanted = set(only_cells)
        cells = [c for c in cells if c.cell_id in wanted]
    if shard is not None and shards > 1:
        cells = [c for c in cells if shard_of(c.cell_id, shards) == shard]
    return cells


@dataclass
class Plan:
    """The cells of a run: all of its grid part, those that fit their window, those to do."""

    cells: list[Cell]
    kept: list[Cell]
    todo: list[Cell]
    probe_of: dict[str, ProbeConfig]
    by_model: dict[str, list[Cell]] = field(default_factory=dict)
    # Every cell of the config by id (a provider batch adopted from another run names ids).
    grid: dict[str, Cell] = field(default_factory=dict)
    # False for a shard's part of the grid: the run that fanned it out judges the epoch's gates.
    whole_epoch: bool = True

    @property
    def window_dropped(self) -> int:
        return len(self.cells) - len(self.kept)


def plan_run(
    config: SweepConfig,
    done: set[str],
    only_cells: Collection[str] | None,
    shard: int | None,
    shards: int,
) -> Plan:
    """The run's cells in each model's sending order, ``done`` ones (graded) left out."""
    probe_of_cell = expand_with_probes(config)
    cells = select_cells(list(probe_of_cell), only_cells, shard, shards)
    kept = [c for c in cells if fits_context(c, config.model(c.model))]
    todo = [c for c in kept if c.cell_id not in done]
    plan = Plan(cells, kept, todo, {c.cell_id: p for c, p in probe_of_cell.items()})
    plan.grid = {c.cell_id: c for c in probe_of_cell}
    plan.whole_epoch = shard is None or shards <= 1
    for cell in todo:
        plan.by_model.setdefault(cell.model, []).append(cell)
    for model, model_cells in plan.by_model.items():
        order = "prefix" if uses_prefix_order(config, model) else config.cell_order
        plan.by_model[model] = order_cells(model_cells, order.replace("auto", "grid"), config.seed)
    return plan
