"""Drill-down targets: the families of heatmaps whose cells pool the same answers, and the key
a clicked cell's datum makes (the page's script joins the same fields the same way)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.report.html import anchor
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
    "depth": "c.depth",
    # RULER's niah: its preset, and the depth of the needle of the first expected value
    "niah_preset": "coalesce(json_extract_string(c.probe_params, '$.preset'), 'niah')",
    "niah_depth": "TRY_CAST(json_extract_string(c.facts, '$.needle_depth') AS DOUBLE)",
}
# Every config column a heatmap may be drawn from: of the answer's `results` row (s), or of
# its cell row.
AXIS_SQL: dict[str, str] = {
    **{axis: f's."{axis}"' for axis in GROUP_AXES},
    "stars": "s.needle_count",
    "mode": "CASE WHEN s.probe = 'rag' THEN 'rag' ELSE 'llm' END",
    **CELL_AXIS_SQL,
}


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


def page_id(probe: str, figure: str) -> str:
    """A figure's id in the page (report.py's rule: recall keeps the plain names)."""
    return figure if probe == "recall" else f"{anchor(probe)}_{figure}"


def chart_ids(probe: str) -> dict[str, str]:
    """The page's id of each drillable recall heatmap of ``probe``."""
    return {page_id(probe, name): name for name in HEATMAPS}


MODEL_VARIANT_LENGTH = (
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
        fields=MODEL_VARIANT_LENGTH,
        label=lambda frame: charts.with_label(frame, axes, "variant"),
        heatmaps=tuple(
            _recall_heatmap(chart_id, name) for chart_id, name in chart_ids(probe).items()
        ),
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
