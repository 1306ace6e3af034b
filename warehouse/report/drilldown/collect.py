"""Drill-down: the answers behind a cell of a heatmap, embedded in the page.

A heatmap cell pools the answers of one or more cell configs over every epoch: the recall
needle charts (position accuracy, missing, misordered needles, hallucinations) a model, a
length and the variant axes the probe varies; Counting-Stars' star-index heatmap a model, a
length and its variant (stars, language, order, …); the needle cases' depth × length heatmaps
(keyword recall, judge score) a panel (the model, and the case or filler when several), a
setting (LLM, or RAG per context mode), a length and a depth. Each such family of heatmaps is
a :class:`Target`: the probes whose answers it pools, the config columns it is drawn from, and
how a row of those becomes the fields the chart's datum carries (``label``, the chart
module's own labelling, so the page and the chart agree). For each heatmap cell the page
carries up to :data:`PER_CELL` of its answers, picked in DuckDB with a window function
(parsed answers first, latest epoch first), never loading all answers:

* the expected needles, the reply (cut at :data:`RESPONSE_CHARS` characters), the grade
  (accuracy, parse_ok, error_kind; the judge's score for needle cases) and the per-needle
  outcomes (``needle_outcomes``: recall's correct / misorder / missing, a star's correct /
  partial / mistaken / missing, a case needle's correct / partial / missing);
* the haystack around each needle (±:data:`CONTEXT_CHARS` characters). The haystack is not
  stored (unless ``save_prompts``) but rebuilt exactly from the cell row: its fields give
  the :class:`~needlescope.cells.Cell` (checked against its id), ``filler_chars`` and
  ``prompt_length`` the fitted size (a RAG cell also its retrieval order, from ``facts``),
  and the rebuilt prompt is checked against the stored SHA-256. A cell that cannot be
  rebuilt (a corpus folder that is gone, a legacy import) says "context unavailable" and why.

Everything is one JSON object (``<script type="application/json" id="drilldown">``): the
page's script finds a clicked cell's answers by chart id (``charts``: its target, the datum
fields that name a cell and the field on y) and the key those fields make (``groups``):
:func:`cell_key` in Python, the same join in the script.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import duckdb
import polars as pl

from needlescope.cells import Cell, canonical_json, filler_identity
from needlescope.config import FillerSpec, SweepConfig
from needlescope.fillers import PAPER_KIND, Filler, filler_from_spec
from needlescope.probes import cases as cases_probe
from needlescope.probes import probe_module
from needlescope.probes.base import prompt_sha256
from needlescope.probes.build import rebuild
from needlescope.warehouse.charts import cases as charts_cases
from needlescope.warehouse.charts import counting_stars as charts_stars
from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.report.html import anchor, json_clean, json_script
from needlescope.warehouse.store import figures

# The recall heatmaps a click drills into: the field each puts on its y axis, its title, and
# how the panel's title names the clicked row.
HEATMAPS: dict[str, tuple[str, str]] = {
    "position_accuracy": ("needle_index", "Position accuracy"),
    "missing_by_position": ("needle_index", "Missing needles"),
    "misorder_by_position": ("needle_index", "Misordered needles"),
    "hallucinations_by_interval": ("interval", "Hallucinations"),
}
_FOCUS_LABELS = {"needle_index": "needle {}", "interval": "between needles {}"}
PER_CELL = 8  # answers shown per heatmap cell
MAX_ANSWERS = 1500  # answers in one page: fewer per cell when the heatmaps have many cells
RESPONSE_CHARS = 4000  # of each reply
RESPONSE_BUDGET = 2_000_000  # characters of replies in one page: shorter cuts past it
CONTEXT_CHARS = 120  # of haystack on each side of a needle
MAX_NEEDLE_CONTEXTS = 100  # needles with their context, per answer
CONTEXT_BUDGET = 3_000_000  # characters of context in one page, all cells together
REBUILD_SECONDS = 30.0  # time spent rebuilding contexts, all cells together
NEEDLE_REACH = 400  # characters after a needle's offset its value may sit at (a star sentence)
KEY_SEPARATOR = "\x1f"
# A recall cell config: every grid axis but the repeat (figures.AXES without the probe).
GROUP_AXES = figures.CONFIG_AXES
# Config columns read from an answer's cell row (c), the way the probes' views (views_*.sql)
# read them.
CELL_AXIS_SQL: dict[str, str] = {
    "language": "json_extract_string(c.probe_params, '$.language')",
    "order": "json_extract_string(c.probe_params, '$.order')",
    "reasoning": "coalesce(CAST(json_extract(c.probe_params, '$.reasoning') AS BOOLEAN), false)",
    "case": "json_extract_string(c.probe_params, '$.case')",
    "rag_mode": "json_extract_string(c.probe_params, '$.mode')",
    "depth": "TRY_CAST(json_extract_string(c.facts, '$.depth') AS DOUBLE)",
}
# Every config column a heatmap may be drawn from: of the answer's `results` row (s), or of
# its cell row.
AXIS_SQL: dict[str, str] = {
    **{axis: f's."{axis}"' for axis in GROUP_AXES},
    "stars": "s.needle_count",
    "mode": "CASE WHEN s.probe = 'rag' THEN 'rag' ELSE 'llm' END",
    **CELL_AXIS_SQL,
}
STARS_AXES = (
    "model",
    "length",
    "length_unit",
    "stars",
    "language",
    "order",
    "reasoning",
    "filler",
    "prompt_version",
)
CASES_AXES = (
    "model",
    "case",
    "mode",
    "rag_mode",
    "filler",
    "prompt_version",
    "length",
    "length_unit",
    "depth",
)
_DEPTH = re.compile(r"depth (.+)%")
_CELL_FIELDS = (
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


class ContextUnavailable(Exception):
    """A cell's haystack cannot be rebuilt; the message says why, for the reader."""


# ----------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Field:
    """A datum field that names a heatmap cell: how the panel's title shows it, and the value
    it stands for when the chart leaves it out (a heatmap without variant blocks)."""

    name: str
    shown: str = "{}"
    absent: str | None = None


@dataclass(frozen=True)
class Heatmap:
    """A drillable chart: its id in the page, its title, the field on its y axis and how the
    panel's title names that row (None when a field already names it)."""

    chart_id: str
    title: str
    focus: str
    focus_shown: str | None = None


@dataclass(frozen=True)
class Target:
    """Heatmaps whose cells pool the same answers.

    ``axes``: the config columns (:data:`AXIS_SQL`) the charts are drawn from; ``label``:
    adds the ``fields`` to a frame of them, as the charts label their data; ``name``: the
    first part of every key (the probe, for the recall charts).
    """

    name: str
    probes: tuple[str, ...]
    axes: tuple[str, ...]
    fields: tuple[Field, ...]
    label: Callable[[pl.DataFrame], pl.DataFrame]
    heatmaps: tuple[Heatmap, ...]
    accuracy: str = "accuracy"  # what the answers' accuracy measures, for the panel


def key_part(value: object) -> str:
    """``value`` as the page's script joins it into a key: JavaScript's ``String(value)``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def cell_key(target: str, *values: object) -> str:
    """The key of a heatmap cell in ``groups``: what the page builds from a clicked datum."""
    return KEY_SEPARATOR.join([target, *(key_part(v) for v in values)])


def group_key(probe: str, model: object, variant: object, length: object) -> str:
    """The key of a recall heatmap cell."""
    return cell_key(probe, model, variant, length)


def page_id(probe: str, figure: str) -> str:
    """A figure's id in the page (report.py's rule: recall keeps the plain names)."""
    return figure if probe == "recall" else f"{anchor(probe)}_{figure}"


def chart_ids(probe: str) -> dict[str, str]:
    """The page's id of each drillable recall heatmap of ``probe``."""
    return {page_id(probe, name): name for name in HEATMAPS}


_MODEL_VARIANT_LENGTH = (
    Field("model"),
    Field("variant", absent="all"),
    Field("length", "length {}"),
)


def _recall_heatmap(chart_id: str, name: str) -> Heatmap:
    focus, title = HEATMAPS[name]
    return Heatmap(chart_id, title, focus, _FOCUS_LABELS[focus])


def recall_target(probe: str, variants: Sequence[str]) -> Target:
    """The needle heatmaps of a probe drawn with the shared recall charts (report.py): a block
    per value of the varying ``variants``, labelled as ``charts.with_label`` does."""
    axes = list(variants)
    return Target(
        name=probe,
        probes=(probe,),
        axes=GROUP_AXES,
        fields=_MODEL_VARIANT_LENGTH,
        label=lambda frame: charts.with_label(frame, axes, "variant"),
        heatmaps=tuple(
            _recall_heatmap(chart_id, name) for chart_id, name in chart_ids(probe).items()
        ),
    )


def stars_target(variants: Sequence[str], chart_id: str) -> Target:
    """Counting-Stars' star-index heatmap: ``variants`` are the axes its blocks are labelled
    with (``charts_stars.variant_axes`` of the frame it was drawn from)."""
    axes = list(variants)
    return Target(
        name="counting_stars",
        probes=("counting_stars",),
        axes=STARS_AXES,
        fields=_MODEL_VARIANT_LENGTH,
        label=lambda frame: charts_stars.label(frame, axes, "variant"),
        heatmaps=(Heatmap(chart_id, "Stars found", "needle_index", "star {}"),),
    )


def cases_target(panel_axes: Sequence[str], heatmaps: Sequence[tuple[str, str]]) -> Target:
    """The needle cases' depth × length heatmaps ((chart id, title) each), LLM and RAG
    answers alike: ``panel_axes`` are those their panels are labelled with
    (``charts_cases.panel_axes`` of the grid they were drawn from)."""
    axes = list(panel_axes)
    return Target(
        name="cases",
        probes=("cases", "rag"),
        axes=CASES_AXES,
        fields=(
            Field("panel"),
            Field("setting"),
            Field("length", "length {}"),
            Field("depth", "depth {}%"),
        ),
        label=lambda frame: charts_cases.cell_labels(frame, axes),
        heatmaps=tuple(Heatmap(chart_id, title, "depth") for chart_id, title in heatmaps),
        accuracy="keyword accuracy",
    )


def keys(target: Target, frame: pl.DataFrame) -> list[str]:
    """The key of each row of ``frame`` (columns: the target's axes), as the page builds it
    from the datum of the row's heatmap cell (floats rounded as the charts' data is)."""
    labelled = target.label(frame)
    columns = []
    for field in target.fields:
        column = labelled.get_column(field.name)
        columns.append((column.round(4) if column.dtype.is_float() else column).to_list())
    return [cell_key(target.name, *values) for values in zip(*columns, strict=True)]


# ----------------------------------------------------------------------------- rebuilding


def _facts(row: Mapping[str, Any]) -> dict[str, Any]:
    text = row.get("facts")
    try:
        facts = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return facts if isinstance(facts, dict) else {}


def _depth(region: str, row: Mapping[str, Any]) -> float | None:
    """A cell's depth: from its facts (full precision) or its region ("depth 33.333%")."""
    match = _DEPTH.fullmatch(region)
    if not match:
        return None
    stored = _facts(row).get("depth")
    if isinstance(stored, int | float) and not isinstance(stored, bool):
        return float(stored)
    return float(match.group(1))


def cell_of(row: Mapping[str, Any]) -> tuple[Cell, ModuleType]:
    """The :class:`Cell` a ``cells`` row was built from, checked against its ``cell_id``."""
    try:
        module = probe_module(str(row.get("probe")))
    except KeyError as exc:
        raise ContextUnavailable(f"unknown probe {row.get('probe')!r}") from exc
    missing = [name for name in _CELL_FIELDS if row.get(name) is None]
    if missing:
        raise ContextUnavailable(f"the cell row has no {', '.join(missing)}")
    region = str(row["region"])
    depth = _depth(region, row)
    if depth is not None:  # cells with a depth store it as their region (rows.bare_cell_row)
        # those are needle cases (cases, rag), whose cells all have the cases probe's region
        region = str(getattr(module, "REGION", cases_probe.REGION))
    cell = Cell(
        model=str(row["model"]),
        model_identity=str(row["model_identity"]),
        generation=str(row["generation"]),
        probe=str(row["probe"]),
        probe_params=str(row["probe_params"]),
        filler=str(row["filler"]),
        filler_spec=str(row["filler_spec"]),
        placement=str(row["placement"]),
        region=region,
        prompt_version=str(row["prompt_version"]),
        length=int(row["length"]),
        length_unit=str(row["length_unit"]),
        needle_count=int(row["needle_count"]),
        repeat=int(row["repeat"]),
        seed=int(row["seed"]),
        depth=depth,
    )
    if cell.cell_id != row.get("cell_id"):
        raise ContextUnavailable("the cell's fields do not hash to its id")
    return cell, module


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
            if hasattr(module, "rebuild"):  # rag: the prompt also needs the retrieval order
                order = _facts(row).get("order")
                if not isinstance(order, list):
                    raise ContextUnavailable("the cell's facts have no retrieval order")
                cut = _facts(row).get("cut")
                rendered = module.rebuild(
                    cell, filler, kind, int(row["filler_chars"]), order, cut or None
                )
            else:
                rendered = rebuild(
                    module, cell, filler, kind, int(row["filler_chars"]), int(row["prompt_length"])
                ).rendered
        except ContextUnavailable:
            raise
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


def _found_in_prompt(prompt: str, values: Sequence[Any]) -> tuple[list[int], list[Any]]:
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


# ----------------------------------------------------------------------------- selection

_ORDER = '(error_kind IS NULL) DESC, coalesce(parse_ok, false) DESC, epoch DESC, "repeat", cell_id'
# What each picked answer carries beside its target's axes.
_ANSWER_SQL = {
    "run_id": "s.run_id",
    "epoch": "s.epoch",
    "cell_id": "s.cell_id",
    "repeat": 's."repeat"',
    "filler": 's."filler"',
    "error_kind": "s.error_kind",
    "parse_ok": "s.parse_ok",
    "accuracy": "s.accuracy",
    "validity": "s.validity",
}


def _quoted(columns: Sequence[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _answers_sql(target: Target, source: str, extra: Mapping[str, str]) -> str:
    """The answers of the target's probes with its axes and ``extra`` columns (name: SQL over
    the answer's row ``s`` and its cell row ``c``, joined only when an axis needs it)."""
    columns = {**{axis: AXIS_SQL[axis] for axis in target.axes}, **extra}
    selected = ", ".join(f'{sql} AS "{name}"' for name, sql in columns.items())
    join = "JOIN cells c ON c.cell_id = s.cell_id" if set(target.axes) & set(CELL_AXIS_SQL) else ""
    return f"SELECT {selected} FROM {source} s {join} WHERE list_contains($probes, s.probe)"


def _configs(con: duckdb.DuckDBPyConnection, target: Target, source: str) -> pl.DataFrame:
    """One row per config the target's charts are drawn from: its key and answer counts."""
    answers = _answers_sql(target, source, {"error_kind": "s.error_kind", "parse_ok": "s.parse_ok"})
    frame = con.sql(
        f"""
        SELECT {_quoted(target.axes)},
               count(*) FILTER (WHERE error_kind IS NULL AND parse_ok IS NOT NULL) AS answers_total,
               count(*) FILTER (WHERE error_kind IS NULL AND parse_ok) AS parsed_total,
               count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors_total
        FROM ({answers}) GROUP BY ALL
        """,
        params={"probes": list(target.probes)},
    ).pl()
    return frame.with_columns(pl.Series("key", keys(target, frame), dtype=pl.Utf8))


def _pick(
    con: duckdb.DuckDBPyConnection, target: Target, source: str, per_cell: int
) -> pl.DataFrame:
    """Up to ``per_cell`` results per heatmap cell of the target: parsed answers, then parse
    failures, then failed requests; latest epoch first. Picked per config in DuckDB (a cell
    is one config or a few), then per cell here."""
    answers = _answers_sql(target, source, _ANSWER_SQL)
    picked = con.sql(
        f"""
        SELECT * FROM ({answers})
        QUALIFY row_number() OVER (PARTITION BY {_quoted(target.axes)} ORDER BY {_ORDER})
            <= $per_cell
        """,
        params={"probes": list(target.probes), "per_cell": per_cell},
    ).pl()
    ranked = picked.with_columns(
        pl.Series("key", keys(target, picked), dtype=pl.Utf8),
        pl.col("error_kind").is_null().alias("answered"),
        pl.col("parse_ok").fill_null(False).alias("parsed"),
    ).sort(
        ["key", "answered", "parsed", "epoch", "repeat", "cell_id"],
        descending=[False, True, True, True, False, False],
    )
    return ranked.group_by("key", maintain_order=True).head(per_cell).select("key", *_ANSWER_SQL)


def _frame(con: duckdb.DuckDBPyConnection, query: str, **params: Any) -> pl.DataFrame:
    """A query's rows, or none when the warehouse lacks its table (an older warehouse)."""
    try:
        return con.sql(query, params=params or None).pl()
    except duckdb.Error:
        return pl.DataFrame()


@dataclass(frozen=True)
class Details:
    """What is read of the picked answers beside their `results` rows."""

    replies: pl.DataFrame
    needles: pl.DataFrame
    invented: pl.DataFrame
    judged: pl.DataFrame
    cells: pl.DataFrame
    configs: dict[str, str | None]


def _details(con: duckdb.DuckDBPyConnection, picked: str, chars: int) -> Details:
    key = "a.run_id = p.run_id AND a.epoch = p.epoch AND a.cell_id = p.cell_id"
    # the attempt `results` picked: the graded answer, else the latest failure
    same_attempt = """QUALIFY row_number() OVER (
            PARTITION BY a.run_id, a.epoch, a.cell_id
            ORDER BY (a.error_kind IS NULL) DESC, a.answered_at DESC
        ) = 1"""
    replies = _frame(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, left(a.response, $chars) AS response,
               length(a.response) AS response_chars, a.response_kept, a.parse_error,
               a.error, a.finish_reason, a.truncated, a.correct, a.missing, a.extra, a.wrong,
               -- the LLM judge's verdict on a needle case's answer (needlescope.judge)
               CASE WHEN a.probe IN ('cases', 'rag') THEN
                   TRY_CAST(json_extract_string(a.detail, '$.judge_score') AS INTEGER)
               END AS judge_score,
               CASE WHEN a.probe IN ('cases', 'rag') THEN
                   json_extract_string(a.detail, '$.judge_reason')
               END AS judge_reason,
               CASE WHEN a.probe IN ('cases', 'rag') THEN
                   json_extract_string(a.detail, '$.judge_error')
               END AS judge_error
        FROM answers a SEMI JOIN {picked} p ON {key}
        {same_attempt}
        """,
        chars=chars,
    )
    needles = _frame(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, a.needle_index, a.outcome
        FROM raw_needle_outcomes a SEMI JOIN {picked} p ON {key}
        ORDER BY a.run_id, a.epoch, a.cell_id, a.needle_index
        """,
    )
    invented = _frame(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, a.answer_index, a.value, a.key_from, a.key_to
        FROM raw_hallucinations a SEMI JOIN {picked} p ON {key}
        ORDER BY a.run_id, a.epoch, a.cell_id, a.answer_index
        """,
    )
    judged = (
        replies.filter(pl.col("judge_score").is_not_null() | pl.col("judge_error").is_not_null())
        if replies.height
        else replies
    )
    columns = ", ".join(f'c."{c}"' for c in ("cell_id", "run_id", *_CELL_FIELDS))
    cells = _frame(
        con,
        f"""
        SELECT {columns}, c.filler_chars, c.prompt_length, c.prompt_sha256, c.expected,
               c.facts, c.prompt_text IS NOT NULL AS has_prompt
        FROM cells c WHERE c.cell_id IN (SELECT cell_id FROM {picked})
        """,
    )
    configs = _frame(
        con,
        f"""
        SELECT run_id, any_value(config_json) AS config_json FROM runs
        WHERE run_id IN (SELECT run_id FROM cells WHERE cell_id IN
                         (SELECT cell_id FROM {picked}))
        GROUP BY run_id
        """,
    )
    config_json = {str(r["run_id"]): r["config_json"] for r in configs.iter_rows(named=True)}
    return Details(replies, needles, invented, judged, cells, config_json)


def _by_answer(frame: pl.DataFrame, columns: Sequence[str]) -> dict[tuple[Any, ...], list[Any]]:
    out: dict[tuple[Any, ...], list[Any]] = {}
    if frame.is_empty():
        return out
    for row in frame.iter_rows(named=True):
        key = (row["run_id"], row["epoch"], row["cell_id"])
        out.setdefault(key, []).append([row[c] for c in columns])
    return out


def _outcome_codes(rows: Sequence[Sequence[Any]], names: list[str]) -> str:
    """The outcome of needle i as the i-th character: a base-36 index into ``names`` (which
    grows as outcomes are met), "-" for a needle without a row. Compact: 1 byte a needle."""
    by_index = {int(i): str(outcome) for i, outcome in rows if i is not None}
    if not by_index:
        return ""
    codes = []
    for index in range(1, max(by_index) + 1):
        outcome = by_index.get(index)
        if outcome is None:
            codes.append("-")
            continue
        if outcome not in names:
            names.append(outcome)
        codes.append(_BASE36[names.index(outcome) % 36])
    return "".join(codes)


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _expected(text: object) -> dict[str, Any]:
    """What a cell expected, for the panel: its needle values (a needle case's sentences, with
    its question, true answer and each needle's keywords)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if isinstance(value, dict):
        found = {k: value[k] for k in ("question", "true_answer", "keywords") if k in value}
        return {"expected": needle_values(value), **found}
    if value is None:
        return {"expected": []}
    return {"expected": needle_values(value) or [value]}


def _retrieval(row: Mapping[str, Any]) -> list[str] | None:
    """Where each needle of a RAG cell went: into the prompt, in part, or not at all."""
    records = _facts(row).get("retrieval")
    if not isinstance(records, list):
        return None
    notes = []
    for record in records:
        record = record if isinstance(record, dict) else {}
        where = (
            "in the prompt"
            if record.get("retrieved")
            else ("partly in the prompt" if record.get("partial") else "not retrieved")
        )
        rank = record.get("rank")
        notes.append(where if rank is None else f"{where} (its chunk ranked {rank})")
    return notes


def _contexts(
    con: duckdb.DuckDBPyConnection,
    cells: pl.DataFrame,
    configs: Mapping[str, str | None],
    width: int,
) -> dict[str, dict[str, Any]]:
    """Per cell id: its expected needles and their contexts, or why those are unavailable."""
    builder = Rebuilder(configs)
    contexts: dict[str, dict[str, Any]] = {}
    spent = 0
    deadline = time.monotonic() + REBUILD_SECONDS
    need_prompt: list[str] = []
    rows = {str(r["cell_id"]): r for r in cells.iter_rows(named=True)} if cells.height else {}
    for cell_id, row in rows.items():
        base = _expected(row.get("expected"))
        retrieval = _retrieval(row)
        if retrieval is not None:
            base["retrieval"] = retrieval
        if spent >= CONTEXT_BUDGET or time.monotonic() > deadline:
            contexts[cell_id] = {**base, "unavailable": "left out to keep the page small"}
            continue
        try:
            haystack, offsets, values = builder.haystack(row)
        except ContextUnavailable as exc:
            contexts[cell_id] = {**base, "unavailable": str(exc)}
            if row.get("has_prompt"):
                need_prompt.append(cell_id)
            continue
        parts = snippets(haystack, offsets, values, width)
        spent += sum(len(p) for part in parts for p in part)
        contexts[cell_id] = {**base, "source": "rebuilt", "needles": parts}
    if need_prompt:  # saved prompts: find the needles in them instead
        stored = _frame(
            con,
            "SELECT cell_id, prompt_text FROM cells WHERE list_contains($ids, cell_id)",
            ids=need_prompt,
        )
        for cell_id, prompt in stored.iter_rows():
            found = contexts[str(cell_id)]
            try:
                offsets, values = _found_in_prompt(str(prompt), found["expected"])
            except ContextUnavailable:
                continue
            del found["unavailable"]
            found["source"] = "found in the stored prompt"
            found["needles"] = snippets(str(prompt), offsets, values, width)
    return contexts


def _chart(target: Target, heatmap: Heatmap) -> dict[str, Any]:
    return {
        "target": target.name,
        "title": heatmap.title,
        "focus": heatmap.focus,
        "focus_shown": heatmap.focus_shown,
        "fields": [[f.name, f.shown, f.absent] for f in target.fields],
        "accuracy": target.accuracy,
    }


def collect(
    con: duckdb.DuckDBPyConnection,
    targets: Sequence[Target],
    *,
    source: str = "results",
    per_cell: int = PER_CELL,
    width: int = CONTEXT_CHARS,
) -> dict[str, Any]:
    """The drill-down data of the heatmaps of ``targets``, from ``source`` (``results`` or
    the report's snapshot of it). JSON-able; see the module docstring.

    Bounded: at most ``per_cell`` answers per heatmap cell, fewer (down to 1) when the
    heatmaps have so many cells that more would pass :data:`MAX_ANSWERS`; replies cut at
    :data:`RESPONSE_CHARS` characters, less (down to 500) past :data:`RESPONSE_BUDGET`.
    """
    data: dict[str, Any] = {
        "per_cell": per_cell,
        "context_chars": width,
        "response_chars": RESPONSE_CHARS,
        "outcome_names": [],
        "charts": {},
        "groups": {},
        "answers": {},
        "contexts": {},
    }
    if not targets:
        return data
    for target in targets:
        for heatmap in target.heatmaps:
            data["charts"][heatmap.chart_id] = _chart(target, heatmap)
    configs = [_configs(con, target, source) for target in targets]
    cells = sum(frame["key"].n_unique() for frame in configs)
    per_cell = max(1, min(per_cell, MAX_ANSWERS // max(cells, 1)))
    data["per_cell"] = per_cell
    picked = pl.concat(
        [_pick(con, target, source, per_cell) for target in targets], how="vertical_relaxed"
    )
    if picked.is_empty():
        return data
    chars = max(500, min(RESPONSE_CHARS, RESPONSE_BUDGET // picked.height))
    data["response_chars"] = chars
    view = "drilldown_picked"
    con.register(view, picked.select("run_id", "epoch", "cell_id"))
    try:
        details = _details(con, view, chars)
    finally:
        con.unregister(view)
    totals = (
        pl.concat(
            [
                frame.select("key", "answers_total", "parsed_total", "errors_total")
                for frame in configs
            ]
        )
        .group_by("key")
        .sum()
    )
    for row in totals.iter_rows(named=True):
        data["groups"][row["key"]] = {
            "answers": row["answers_total"],
            "parsed": row["parsed_total"],
            "errors": row["errors_total"],
            "shown": [],
        }
    _add_answers(data, picked, details)
    data["contexts"] = _contexts(con, details.cells, details.configs, width)
    return dict(json_clean(data))


def _add_answers(data: dict[str, Any], picked: pl.DataFrame, details: Details) -> None:
    """Each picked answer into ``answers``, its id into its cell's ``shown``, in pick order."""
    outcomes = _by_answer(details.needles, ("needle_index", "outcome"))
    extra = _by_answer(details.invented, ("answer_index", "value", "key_from", "key_to"))
    reply = _by_ident(details.replies)
    judged = _by_ident(details.judged)
    for row in picked.iter_rows(named=True):
        ident = (row["run_id"], row["epoch"], row["cell_id"])
        answer_id = f"{row['epoch']}/{row['cell_id']}"
        # a cell answered between the count and the pick (a sweep writing beside the report)
        group = data["groups"].setdefault(
            row["key"], {"answers": 0, "parsed": 0, "errors": 0, "shown": []}
        )
        group["shown"].append(answer_id)
        got = reply.get(ident, {})
        answer = {
            "epoch": row["epoch"],
            "cell_id": row["cell_id"],
            "repeat": row["repeat"],
            "filler": row["filler"],
            "accuracy": row["accuracy"],
            "parse_ok": row["parse_ok"],
            "validity": row["validity"],
            "error_kind": row["error_kind"],
            "error": got.get("error"),
            "parse_error": got.get("parse_error"),
            "response": got.get("response"),
            "response_chars": got.get("response_chars"),
            "finish_reason": got.get("finish_reason"),
            "outcomes": _outcome_codes(outcomes.get(ident, []), data["outcome_names"]),
            "hallucinations": extra.get(ident, []),
        }
        if ident in judged:  # [score, its reason or why there is none]
            verdict = judged[ident]
            reason = verdict["judge_reason"] or verdict["judge_error"]
            answer["judge"] = [verdict["judge_score"], reason]
        data["answers"][answer_id] = answer


def _by_ident(frame: pl.DataFrame) -> dict[tuple[Any, ...], dict[str, Any]]:
    if frame.is_empty():
        return {}
    return {(r["run_id"], r["epoch"], r["cell_id"]): r for r in frame.iter_rows(named=True)}


# ----------------------------------------------------------------------------- page


PANEL = """
<section id="answers-panel" class="answers-panel" hidden aria-live="polite">
  <div class="answers-head">
    <strong id="answers-title">Answers</strong>
    <button type="button" id="answers-close" aria-label="Close">×</button>
  </div>
  <p id="answers-summary" class="muted"></p>
  <div id="answers-list"></div>
</section>
"""

STYLE = """
.answers-panel { position: fixed; top: 0; right: 0; width: min(46rem, 48vw); height: 100vh;
  overflow-y: auto; background: #fff; border-left: 2px solid #ccc; padding: 0.6rem 1rem 2rem;
  box-shadow: -4px 0 16px rgba(0,0,0,0.12); z-index: 10; font-size: 0.85rem; }
.answers-head { display: flex; justify-content: space-between; align-items: baseline; }
.answers-head button { font-size: 1.2rem; border: none; background: none; cursor: pointer; }
.answer { border-top: 1px solid #ddd; padding: 0.5rem 0; }
.answer pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6;
  padding: 0.4rem; max-height: 14rem; overflow-y: auto; }
.answer table td.ctx, .answer table td.said { white-space: normal; text-align: left; }
.answer table td.ctx { font-family: monospace; word-break: break-all; max-width: 30rem; }
.answer table td.said { min-width: 8rem; max-width: 16rem; }
.answer .needle { background: #ffe066; font-weight: bold; }
.answer tr.focus td { outline: 2px solid #e6550d; }
.outcome-correct { color: #1a7f37; } .outcome-missing { color: #b42318; }
.outcome-misorder, .outcome-mistaken { color: #6a3d9a; } .outcome-partial { color: #b54708; }
.vega.drillable svg g.role-mark path, .vega.drillable svg g.role-mark rect { cursor: pointer; }
"""

SCRIPT = r"""
(() => {
  const data = JSON.parse(document.getElementById('drilldown').textContent);
  const panel = document.getElementById('answers-panel');
  const list = document.getElementById('answers-list');
  const sep = '\u001f';
  const el = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  };
  const fmt = (v) => (typeof v === 'number'
    ? (Number.isInteger(v) ? String(v) : v.toFixed(1)) : (v ?? ''));
  const fill = (template, value) => template.replace('{}', () => fmt(value));
  document.getElementById('answers-close')
    .addEventListener('click', () => { panel.hidden = true; });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') panel.hidden = true; });

  function contextCell(parts) {
    const td = el('td', null, 'ctx');
    if (!parts) return td;
    td.append(parts[0]);
    td.append(el('span', parts[1], 'needle'));
    td.append(parts[2]);
    return td;
  }

  function expectedCell(ctx, i) {
    const td = el('td', ctx.expected[i - 1] ?? '', 'said');
    const keywords = ctx.keywords && ctx.keywords[i - 1];
    if (keywords) td.append(el('div', 'keywords: ' + keywords.join(', '), 'muted'));
    return td;
  }

  function renderAnswer(answer, chart, focusValue) {
    const box = el('div', null, 'answer');
    box.dataset.cellId = answer.cell_id;
    const grade = [
      'epoch ' + answer.epoch, 'repeat ' + answer.repeat, answer.filler,
      answer.error_kind ? 'error: ' + answer.error_kind
        : answer.validity && answer.validity !== 'valid' && answer.validity !== 'unknown'
          ? 'invalid (' + answer.validity + '): not counted'
        : answer.parse_ok === null || (answer.parse_ok && answer.accuracy === null)
          ? 'not counted (an empty reply, or keys the seed could not order)'
          : answer.parse_ok ? chart.accuracy + ' ' + fmt(answer.accuracy)
          : answer.accuracy === null ? 'no parseable JSON'
          : chart.accuracy + ' ' + fmt(answer.accuracy) + ', nothing read',
      'parse_ok ' + (answer.parse_ok === null ? '–' : answer.parse_ok),
    ];
    if (answer.judge) grade.push('judge ' + (answer.judge[0] ?? '–') + '/10');
    grade.push('cell ' + answer.cell_id);
    box.append(el('div', grade.join(' · '), 'grade'));
    if (answer.judge && answer.judge[1]) {
      box.append(el('div', 'judge: ' + answer.judge[1], 'muted'));
    }
    if (answer.error) box.append(el('div', answer.error, 'muted'));
    if (answer.parse_error) box.append(el('div', 'parse error: ' + answer.parse_error, 'muted'));
    const ctx = data.contexts[answer.cell_id] || {unavailable: 'no cell row', expected: []};
    const expected = ctx.expected || [];
    if (ctx.question) box.append(el('div', 'question: ' + ctx.question, 'question'));
    if (ctx.true_answer) box.append(el('div', 'true answer: ' + ctx.true_answer, 'muted'));
    box.append(el('div', 'expected: ' + expected.map((v, i) => (i + 1) + ': ' + v).join(', '),
      'expected'));
    const reply = answer.response === null ? '(no reply stored)' : answer.response;
    box.append(el('pre', reply, 'reply'));
    const kept = answer.response ? answer.response.length : 0;
    if (answer.response_chars && answer.response_chars > kept) {
      box.append(el('div', 'reply cut at ' + kept + ' of ' + answer.response_chars
        + ' characters', 'muted'));
    }
    const count = Math.max(expected.length, answer.outcomes.length);
    if (count) {
      const table = el('table', null, 'needles');
      const head = el('tr');
      const columns = ['needle', 'expected', 'outcome'];
      if (ctx.retrieval) columns.push('retrieval');
      columns.push('context' + (ctx.source ? ' (' + ctx.source + ')' : ''));
      columns.forEach((h) => head.append(el('th', h)));
      table.append(head);
      for (let i = 1; i <= count; i++) {
        const row = el('tr');
        const code = answer.outcomes[i - 1];
        const outcome = code && code !== '-' ? data.outcome_names[parseInt(code, 36)] : null;
        if (chart.focus === 'needle_index' && focusValue === i) row.className = 'focus';
        row.append(el('td', i));
        row.append(expectedCell({...ctx, expected}, i));
        row.append(el('td', outcome ?? '–', outcome ? 'outcome-' + outcome : ''));
        if (ctx.retrieval) row.append(el('td', ctx.retrieval[i - 1] ?? '', 'said'));
        if (ctx.needles) row.append(contextCell(ctx.needles[i - 1]));
        else if (i === 1) {
          const td = el('td', 'context unavailable: ' + ctx.unavailable, 'ctx unavailable');
          td.rowSpan = count;
          row.append(td);
        }
        table.append(row);
      }
      box.append(table);
    }
    if (answer.hallucinations.length) {
      const lines = answer.hallucinations.map((h) => {
        const hit = chart.focus === 'interval' && focusValue === h[2] + '–' + h[3];
        return (hit ? '▶ ' : '') + h[1] + ' (between needles ' + h[2] + ' and ' + h[3] + ')';
      });
      box.append(el('div', 'invented values: ' + lines.join('; '), 'hallucinated'));
    }
    return box;
  }

  // The key of a clicked cell: the chart's target and the datum's fields, joined as
  // drilldown.cell_key joins them (String() of each value); null for a mark that is no cell.
  function keyOf(chart, datum) {
    if (datum[chart.focus] === undefined) return null;
    const values = chart.fields.map(([field, , absent]) => datum[field] ?? absent);
    if (values.some((v) => v === null || v === undefined)) return null;
    return {key: [chart.target, ...values].join(sep), values};
  }

  function show(chartId, datum) {
    const chart = data.charts[chartId];
    const found = chart && datum ? keyOf(chart, datum) : null;
    if (!found) return;
    const {key, values} = found;
    const group = data.groups[key];
    const focusValue = datum[chart.focus];
    const where = chart.fields
      .map(([, shown, absent], i) => (absent !== null && values[i] === absent
        ? null : fill(shown, values[i])))
      .filter((v) => v !== null);
    if (chart.focus_shown) where.push(fill(chart.focus_shown, focusValue));
    document.getElementById('answers-title').textContent = chart.title + ': ' + where.join(' · ');
    list.replaceChildren();
    panel.dataset.chart = chartId;
    panel.dataset.key = key;
    if (!group) {
      document.getElementById('answers-summary').textContent = 'No answers behind this cell.';
    } else {
      const shown = group.shown.length;
      let text = group.parsed + ' parsed of ' + group.answers + ' answers behind this cell';
      if (group.errors) text += ', ' + group.errors + ' failed request(s)';
      text += shown < group.answers + group.errors
        ? '; showing ' + shown + ' (at most ' + data.per_cell
          + ' per cell), parsed answers and the latest epoch first.'
        : '; all shown.';
      document.getElementById('answers-summary').textContent = text;
      group.shown.forEach((id) => list.append(renderAnswer(data.answers[id], chart, focusValue)));
    }
    panel.hidden = false;
    panel.scrollTop = 0;
  }

  document.addEventListener('needlescope:chart-drawn', (event) => {
    const {id, view} = event.detail;
    if (!data.charts[id] || !view) return;
    document.getElementById(id).classList.add('drillable');
    view.addEventListener('click', (_event, item) => {
      if (item && item.datum) show(id, item.datum);
    });
  });
  window.needlescopeDrilldown = show;
})();
"""


def section_parts(data: Mapping[str, Any]) -> tuple[str, str]:
    """(the panel and the JSON block, the script) for the page; empty without heatmaps."""
    if not data.get("charts"):
        return "", ""
    return PANEL + json_script("drilldown", data), f"<script>{SCRIPT}</script>"
