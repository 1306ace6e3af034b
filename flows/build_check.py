"""Which cells of a sweep can be built, found before anything is sent.

A cell the grid names but cannot build is found by building it exactly as the sweep will, so a
config that passes builds every cell it counted. The commands check before Prefect starts with
what measures lengths on this machine; a token length only a hosted count endpoint can measure
is *unchecked* there, and the sweep checks it before any model query. A cell too long for its
model's context window is dropped for that model, and counted so.

Design: docs/design/orchestration.md#build-check
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from needlescope.config import ProbeConfig, SweepConfig
from needlescope.errors import ConfigError, LengthError, ProviderError
from needlescope.fitting import ProvenFit, RememberedFit, fits_context, local_slot_size
from needlescope.grid import Cell
from needlescope.probes.registry import expand_with_probes
from needlescope.providers.base import Provider
from needlescope.providers.open import REMOTE_TOKENIZERS, open_provider
from needlescope.tasks.contexts import ContextBuilder

GROUPS_SHOWN = 6  # cell groups named per kind of problem; the rest are counted
_NUMBER = re.compile(r"[0-9][0-9,.]*")


@dataclass
class BuildCheck:
    """What building the cells found: those that cannot be built (refused), those too long
    for their model's window (dropped), those whose length only a hosted API can count."""

    built: int = 0
    unbuildable: list[tuple[Cell, str]] = field(default_factory=list)
    window_dropped: list[Cell] = field(default_factory=list)
    unchecked: list[Cell] = field(default_factory=list)
    # The token fits counted (by the model's tokenizer): the run's build takes them as they are.
    fits: dict[str, ProvenFit] = field(default_factory=dict)

    def refusal(self) -> str | None:
        """One line per kind of problem, naming the cells by their axes, with counts."""
        if not self.unbuildable:
            return None
        kinds: dict[str, list[tuple[Cell, str]]] = {}
        for cell, reason in self.unbuildable:
            kinds.setdefault(_NUMBER.sub("N", reason), []).append((cell, reason))
        return "\n".join(_kind_line(found) for found in kinds.values())


def _kind_line(found: list[tuple[Cell, str]]) -> str:
    groups = Counter(_axes(cell) for cell, _ in found)
    shown = [f"{axes} ({n} cell{'s' * (n != 1)})" for axes, n in groups.most_common(GROUPS_SHOWN)]
    if len(groups) > GROUPS_SHOWN:
        shown.append(f"and {len(groups) - GROUPS_SHOWN} more groups")
    cells = len(found)
    why = found[0][1] if len({reason for _, reason in found}) == 1 else f"e.g. {found[0][1]}"
    return f"{cells} cell{'s' * (cells != 1)} cannot be built ({why}): " + "; ".join(shown)


def _axes(cell: Cell) -> str:
    """A cell's place in the grid, as a person names it: probe, length, needles, region."""
    length = "as-is" if cell.as_is else f"length {cell.length} {cell.length_unit}"
    where = cell.region if cell.depth is None else f"depth {cell.depth:g}"
    return f"{cell.probe} {length}, {cell.needle_count} needles, region {where}"


def needs_hosted_count(config: SweepConfig, cell: Cell) -> bool:
    """The cell's build counts tokens that only its model's API can count: a length in tokens,
    or a prompt that sizes itself in lines (goto), whose tokens are measured as built."""
    hosted = config.model(cell.model).provider in REMOTE_TOKENIZERS
    return hosted and cell.length_unit in ("tokens", "lines")


def _window_checked_here(config: SweepConfig, cell: Cell) -> bool:
    """A self-sized prompt's window check counts its tokens: not where only the API can."""
    return config.model(cell.model).provider not in REMOTE_TOKENIZERS


def _share_key(cell: Cell) -> tuple[str, str]:
    """Cells built the same way whatever their model: characters and bytes measure alike; a
    token length, a window check and a judge's model are the model's own."""
    per_model = cell.length_unit in ("tokens", "lines") or cell.nominal or cell.as_is
    return (cell.model if per_model else "", cell.context_id)


async def check_cells(
    config: SweepConfig,
    cells: Iterable[Cell],
    probe_of: dict[str, ProbeConfig],
    *,
    hosted: bool = False,
    api_keys: dict[str, str] | None = None,
    remembered: dict[str, RememberedFit] | None = None,
) -> BuildCheck:
    """Build ``cells`` as the sweep would (nothing is kept and nothing is sent but the counts
    of a hosted tokenizer, and those only with ``hosted``): which cannot be built, which are too
    long for their window, which were left unchecked (a hosted count without ``hosted``, or a
    count that failed: the sweep's build retries it and fails that cell alone). ``remembered``:
    the fits the warehouse stores, each proven by one count as the sweep proves them."""
    check = BuildCheck()
    todo: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        if needs_hosted_count(config, cell) and not hosted:
            check.unchecked.append(cell)
        else:
            todo.setdefault(_share_key(cell), []).append(cell)
    if not todo:
        return check
    by_model: dict[str, list[Cell]] = {}
    for group in todo.values():
        by_model.setdefault(group[0].model, []).append(group[0])
    async with contextlib.AsyncExitStack() as stack:
        providers = await _providers(config, by_model, hosted, api_keys or {}, stack)
        builder = ContextBuilder(
            config, providers, probe_of=dict(probe_of), remembered=dict(remembered or {})
        )
        for group in todo.values():
            await _check_group(config, builder, group, check, hosted)
    return check


async def _check_group(
    config: SweepConfig, builder: ContextBuilder, group: list[Cell], check: BuildCheck, hosted: bool
) -> None:
    cell = group[0]
    try:
        context = await builder.fitted(cell.model, cell, checking=True)
        window = hosted or _window_checked_here(config, cell)
        too_long = await builder.overflow(cell.model, context) if window else None
    except LengthError as exc:
        check.unbuildable += [(c, str(exc)) for c in group]
        return
    except ProviderError:
        check.unchecked += group
        return
    if too_long:
        check.window_dropped += group
        return
    check.built += len(group)
    if cell.length_unit == "tokens" and cell.model not in builder.estimated:
        stored = cell.cell_id in builder.recalled
        held = builder.remembered.get(cell.cell_id) if stored else None
        fit = RememberedFit(
            context.filler_chars,
            context.prompt_length,
            held.haystack_length if held else None,
            context.prompt_sha256,
        )
        check.fits[cell.cell_id] = ProvenFit(fit, stored)


async def _providers(
    config: SweepConfig,
    by_model: dict[str, list[Cell]],
    hosted: bool,
    api_keys: dict[str, str],
    stack: contextlib.AsyncExitStack,
) -> dict[str, Provider]:
    """A client for each model whose tokens the check counts: local models' llama.cpp, an
    OpenAI-compatible one's estimate (nothing sent), a hosted count endpoint with ``hosted``."""
    providers: dict[str, Provider] = {}
    for name, cells in by_model.items():
        model = config.model(name)
        if model.provider in REMOTE_TOKENIZERS and not hosted:
            continue
        if not any(_share_key(c)[0] for c in cells):  # characters and bytes: no tokenizer
            continue
        providers[name] = await open_provider(
            stack,
            model,
            ctx_per_slot=local_slot_size(cells, model),
            api_key=api_keys.get(name),
            offline=model.provider not in REMOTE_TOKENIZERS,
        )
    return providers


def hosted_only(config: SweepConfig, cells: Collection[Cell]) -> list[Cell]:
    """The cells a check before Prefect left for the sweep: those a hosted API counts."""
    return [c for c in cells if needs_hosted_count(config, c)]


async def check_config(config: SweepConfig, graded: Collection[str] = ()) -> BuildCheck:
    """The commands' check: every cell of the grid not ``graded`` yet, built with what
    measures on this machine; cells longer than their model's window (told from their length
    alone) are dropped without building."""
    probe_of = expand_with_probes(config)
    done = set(graded)
    todo: list[Cell] = []
    dropped: list[Cell] = []
    for cell in probe_of:
        if cell.cell_id in done:
            continue
        (todo if fits_context(cell, config.model(cell.model)) else dropped).append(cell)
    ids = {c.cell_id: p for c, p in probe_of.items()}
    check = await check_cells(config, todo, ids)
    check.window_dropped += dropped
    return check


def refuse_unbuildable(check: BuildCheck) -> None:
    """ConfigError, one line per kind of problem, when a cell cannot be built."""
    if (refusal := check.refusal()) is not None:
        raise ConfigError(refusal)
