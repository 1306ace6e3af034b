"""Rebuilding a stored cell's haystack from its ``cells`` row, and the text around each needle."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from needlescope.config import FillerSpec, SweepConfig
from needlescope.errors import MissingFacts, NeedlescopeError
from needlescope.grid import Cell, filler_identity
from needlescope.haystack import PAPER_KIND, Filler, PatternFiller, filler_from_spec
from needlescope.probes.base import Probe, prompt_sha256
from needlescope.probes.registry import probe_module
from needlescope.provenance import canonical_json

CONTEXT_CHARS = 120  # of haystack on each side of a needle
MAX_NEEDLE_CONTEXTS = 100  # needles with their context, per answer
NEEDLE_REACH = 400  # characters after a needle's offset its value may sit at (a star sentence)
CELL_FIELDS = (
    "model",
    "model_identity",
    "generation",
    "probe",
    "probe_params",
    "filler",
    "filler_spec",
    "placement",
    "region",
    "prompt_version",
    "length",
    "length_unit",
    "needle_count",
    "repeat",
    "seed",
)


class ContextUnavailable(NeedlescopeError):
    """A cell's haystack cannot be rebuilt; the message says why, for the reader."""


def facts_of(row: Mapping[str, Any]) -> dict[str, Any]:
    text = row.get("facts")
    try:
        facts = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return facts if isinstance(facts, dict) else {}


def cell_of(row: Mapping[str, Any]) -> tuple[Cell, Probe]:
    """The :class:`Cell` a ``cells`` row was built from, checked against its ``cell_id``."""
    try:
        module = probe_module(str(row.get("probe")))
    except KeyError as exc:
        raise ContextUnavailable(f"unknown probe {row.get('probe')!r}") from exc
    missing = [name for name in CELL_FIELDS if row.get(name) is None]
    if missing:
        raise ContextUnavailable(f"the cell row has no {', '.join(missing)}")
    depth = row.get("depth")  # a needle case's (the cells view reads older rows' too)
    cell = Cell(
        model=str(row["model"]),
        model_identity=str(row["model_identity"]),
        generation=str(row["generation"]),
        probe=str(row["probe"]),
        probe_params=str(row["probe_params"]),
        filler=str(row["filler"]),
        filler_spec=str(row["filler_spec"]),
        placement=str(row["placement"]),
        region=str(row["region"]),
        prompt_version=str(row["prompt_version"]),
        length=int(row["length"]),
        length_unit=str(row["length_unit"]),
        needle_count=int(row["needle_count"]),
        repeat=int(row["repeat"]),
        seed=int(row["seed"]),
        depth=None if depth is None else float(depth),
    )
    if cell.cell_id != row.get("cell_id"):
        raise ContextUnavailable("the cell's fields do not hash to its id")
    return cell, module


def _own_haystack(identity: str) -> bool:
    """Whether the filler is a haystack the probe makes itself (RULER's ``kind: ruler``)."""
    try:
        described = json.loads(identity)
    except ValueError:
        return False
    return isinstance(described, dict) and described.get("kind") == "ruler"


def _spec_from_identity(identity: str) -> FillerSpec:
    """The filler definition behind a built-in filler's description (not corpora)."""
    try:
        described = json.loads(identity)
    except ValueError as exc:
        raise ContextUnavailable("the filler description is not JSON") from exc
    kind = described.get("kind") if isinstance(described, dict) else None
    if kind == "pattern":
        spec = FillerSpec(kind="pattern", pattern=described.get("pattern", "a|"))
    elif kind in ("noise", "prose"):
        spec = FillerSpec(
            kind=kind, seed=int(described.get("seed", 0)), language=described.get("language", "en")
        )
    elif kind == "corpus":
        raise ContextUnavailable(
            f"the corpus folder {described.get('directory')!r} is not in the run's config"
        )
    elif kind == PAPER_KIND:
        files = ", ".join(described.get("files") or [])
        raise ContextUnavailable(f"the corpus of {files} is not in the run's config")
    else:
        raise ContextUnavailable(f"filler {kind!r} cannot be rebuilt")
    if canonical_json(filler_from_spec(spec).describe()) != identity:
        raise ContextUnavailable("the filler's generator changed since this cell was built")
    return spec


class Rebuilder:
    """Rebuilds haystacks, reusing fillers (their text grows once) and parsed configs."""

    def __init__(self, configs: Mapping[str, str | None]) -> None:
        self._config_json = dict(configs)
        self._configs: dict[str, SweepConfig | None] = {}
        self._fillers: dict[tuple[str, str | None], tuple[Filler, str]] = {}

    def _config(self, run_id: object) -> SweepConfig | None:
        key = str(run_id)
        if key not in self._configs:
            text = self._config_json.get(key)
            try:
                self._configs[key] = SweepConfig.model_validate_json(text) if text else None
            except ValueError:  # a legacy import's config, or one from an older needlescope
                self._configs[key] = None
        return self._configs[key]

    def filler(self, row: Mapping[str, Any]) -> tuple[Filler, str]:
        identity = str(row["filler_spec"])
        config = self._config(row.get("run_id"))
        cache_key = (identity, str(row.get("run_id")) if config is not None else None)
        if cache_key in self._fillers:
            return self._fillers[cache_key]
        if _own_haystack(identity):  # RULER's noise, needles and lists: made by the probe
            self._fillers[cache_key] = (PatternFiller(" "), "none")
            return self._fillers[cache_key]
        spec: FillerSpec | None = None
        if config is not None:
            try:
                candidate = config.filler_spec(str(row["filler"]))
                if filler_identity(candidate) == identity:
                    spec = candidate
            except (KeyError, ValueError, OSError):
                spec = None  # e.g. the corpus folder is gone
        if spec is None:
            spec = _spec_from_identity(identity)
        try:
            found = (filler_from_spec(spec), spec.kind)
        except (ValueError, OSError) as exc:
            raise ContextUnavailable(str(exc)) from exc
        self._fillers[cache_key] = found
        return found

    def haystack(self, row: Mapping[str, Any]) -> tuple[str, list[int], list[Any]]:
        """The haystack of a ``cells`` row, its needles' offsets and the needle values."""
        if row.get("filler_chars") is None or row.get("prompt_length") is None:
            raise ContextUnavailable("the cell's prompt was never built")
        cell, module = cell_of(row)
        filler, kind = self.filler(row)
        try:
            rendered = module.rebuild(cell, filler, kind, int(row["filler_chars"]), facts_of(row))
        except MissingFacts as exc:
            raise ContextUnavailable(str(exc)) from exc
        except Exception as exc:  # a probe that needs more than the cell row
            raise ContextUnavailable(f"{cell.probe} cells cannot be rebuilt here") from exc
        if row.get("prompt_sha256") and prompt_sha256(rendered) != row["prompt_sha256"]:
            raise ContextUnavailable("the rebuilt prompt differs from the one sent")
        return rendered.haystack_text, list(rendered.offsets), needle_values(rendered.expected)


def needle_values(expected: Any) -> list[Any]:
    """The needles of a cell's ``expected``: recall's values and the stars' counts are the
    list itself; a needle case's are its needle sentences."""
    if isinstance(expected, list | tuple):
        return list(expected)
    if isinstance(expected, dict) and isinstance(expected.get("needles"), list):
        return list(expected["needles"])
    return []


def _needle_text(value: Any) -> str:
    return str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""


def _pattern(needle: str) -> re.Pattern[str]:
    """A needle in text; a number only whole ("15" is not in "115" or "150")."""
    if needle.isdigit():
        return re.compile(rf"(?<![0-9]){re.escape(needle)}(?![0-9])")
    return re.compile(re.escape(needle))


def locate(haystack: str, offset: int, needle: str) -> int | None:
    """Where ``needle`` sits: at its offset (recall, cases), else just after it, as a star's
    count sits inside its sentence ("… the little penguin counted 15 ★."); None if neither."""
    if not needle:
        return None
    if haystack.startswith(needle, offset):
        return offset
    found = _pattern(needle).search(haystack, offset, offset + NEEDLE_REACH)
    return found.start() if found else None


def snippets(
    haystack: str, offsets: Sequence[int], values: Sequence[Any], width: int = CONTEXT_CHARS
) -> list[list[str]]:
    """[before, needle, after] around each needle (``width`` characters on each side, with
    "…" where the haystack goes on)."""
    out = []
    for index, offset in enumerate(offsets[:MAX_NEEDLE_CONTEXTS]):
        needle = _needle_text(values[index]) if index < len(values) else ""
        found = locate(haystack, offset, needle)
        start_at, end = (offset, offset) if found is None else (found, found + len(needle))
        start, stop = max(0, start_at - width), end + width
        before = ("…" if start > 0 else "") + haystack[start:start_at]
        after = haystack[end:stop] + ("…" if stop < len(haystack) else "")
        out.append([before, haystack[start_at:end], after])
    return out


def found_in_prompt(prompt: str, values: Sequence[Any]) -> tuple[list[int], list[Any]]:
    """Needle offsets in a stored prompt, by searching each value after the previous one."""
    offsets, position = [], 0
    for value in values:
        needle = _needle_text(value)
        found = _pattern(needle).search(prompt, position) if needle else None
        if found is None:
            raise ContextUnavailable("the needles are not in the stored prompt")
        offsets.append(found.start())
        position = found.end()
    return offsets, list(values)
