"""Grid cells, the unit of work: a cell id hashes everything that changes prompt or answer."""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

from needlescope.config import FillerSpec, ModelConfig, SweepConfig
from needlescope.haystack import PAPER_KIND, filler_from_spec
from needlescope.provenance import canonical_json, short_hash

# Bump when the meaning of a cell's fields changes, so old and new cells never share an id.
ID_VERSION = 1
AS_IS = 0  # a cell's length when its haystack is not fitted (a corpus with fit: none)


@dataclass(frozen=True)
class Cell:
    model: str
    model_identity: str  # canonical JSON of ModelConfig.identity()
    generation: str  # canonical JSON of the generation settings
    probe: str
    probe_params: str  # canonical JSON of the probe's own parameters (digits, snap, …)
    filler: str
    filler_spec: str  # canonical JSON of the filler's definition
    placement: str
    region: str
    prompt_version: str
    length: int
    length_unit: str
    needle_count: int
    repeat: int
    seed: int
    depth: float | None = None  # depth percent of the first needle (cases, rag)

    def context_key(self) -> dict[str, Any]:
        """Everything that shapes the context except the model: the same for every model."""
        key = {
            "v": ID_VERSION,
            "probe": self.probe,
            "params": self.probe_params,
            "filler": self.filler_spec,
            "placement": self.placement,
            "region": self.region,
            "prompt": self.prompt_version,
            "length": self.length,
            "unit": self.length_unit,
            "needles": self.needle_count,
            "repeat": self.repeat,
            "seed": self.seed,
        }
        if self.depth is not None:
            key["depth"] = self.depth
        return key

    @property
    def as_is(self) -> bool:
        """Length 0: the haystack is a corpus file as it is; its measured length is stored."""
        return self.length == AS_IS

    @property
    def nominal(self) -> bool:
        """The haystack is the Counting-Stars paper's for a nominal length (a corpus with
        ``fit: paper``): built to it, not fitted; the prompt's real length is measured."""
        described = json.loads(self.filler_spec)
        return isinstance(described, dict) and described.get("kind") == PAPER_KIND

    # Hashed once per cell (a cell id is read dozens of times on a cell's way through a sweep);
    # a frozen cell never changes, and dataclasses.replace makes a new one.
    @functools.cached_property
    def context_id(self) -> str:
        return short_hash(self.context_key())

    @functools.cached_property
    def cell_id(self) -> str:
        return short_hash(
            {**self.context_key(), "model": self.model_identity, "generation": self.generation}
        )

    @property
    def rng_seed(self) -> int:
        """Seed for needles and placement: shared by all models, so their prompts pair up."""
        return int(self.context_id, 16)

    @property
    def label(self) -> str:
        where = self.region if self.depth is None else f"d{self.depth:g}"
        size = "as-is" if self.as_is else f"{self.length}{_unit_suffix(self.length_unit)}"
        return (
            f"{self.model} {self.probe} {size} "
            f"n{self.needle_count} {self.filler} {where} r{self.repeat} [{self.cell_id[:8]}]"
        )

    def params(self) -> dict[str, Any]:
        return dict(json.loads(self.probe_params))


class ModelFields(TypedDict):
    model: str
    model_identity: str
    generation: str


def model_fields(model: ModelConfig) -> ModelFields:
    """The model's part of a cell: its name, identity and generation settings."""
    return {
        "model": model.name,
        "model_identity": canonical_json(model.identity()),
        "generation": canonical_json(model.generation.model_dump()),
    }


def _unit_suffix(unit: str) -> str:
    return {"tokens": "tok", "bytes": "B", "chars": "ch", "lines": " lines"}.get(unit, unit)


@functools.cache
def filler_identity(spec: FillerSpec) -> str:
    """The filler's own description: generator versions and corpus content, not its path."""
    return canonical_json(filler_from_spec(spec).describe())


def default_epoch(config: SweepConfig, now: datetime | None = None) -> str:
    """An epoch is the config's name plus the UTC date: tomorrow's nightly run asks afresh."""
    if config.epoch:
        return config.epoch
    return f"{config.name}-{(now or datetime.now(UTC)).astimezone(UTC).date().isoformat()}"


def shard_of(cell_id: str, shards: int) -> int:
    """Which of ``shards`` parts of a sweep a cell belongs to: stable across runs and machines."""
    return int(cell_id[:12], 16) % shards if shards > 1 else 0


def prefix_order_key(cell: Cell) -> tuple[Any, ...]:
    """Cells whose prompts share a long prefix sort next to each other.

    Prompts of one probe, template and filler share the filler's text up to their first
    needle (a filler's text of n characters is the first n of one stream), so sorting by the
    first needle's position (depth × length) puts the longest shared prefixes side by side.
    """
    depth = cell.depth if cell.depth is not None else 0.0
    return (
        cell.probe,
        cell.prompt_version,
        cell.filler_spec,
        cell.length_unit,
        -depth * cell.length,
        -cell.length,
        cell.probe_params,
        cell.region,
        cell.placement,
        cell.needle_count,
        cell.repeat,
        cell.cell_id,
    )


def order_cells(cells: list[Cell], order: str, seed: int = 0) -> list[Cell]:
    """Cells in the order they are sent: "prefix", "shuffled" (seeded) or "grid" (as given)."""
    if order == "prefix":
        return sorted(cells, key=prefix_order_key)
    if order == "shuffled":
        shuffled = list(cells)
        random.Random(seed).shuffle(shuffled)
        return shuffled
    return list(cells)
