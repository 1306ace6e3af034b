"""The recall probe's charts (and those of any probe drawn with the shared statistics): accuracy
and parse failures by length, accuracy by filler, and the per-needle heatmaps. ``_heatmaps``
runs past 60 lines: the four heatmap specs side by side, alike but for their values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from needlescope.warehouse.charts.lines import (
    accuracy_by_filler,
    accuracy_by_length,
    parse_failures_by_length,
)
from needlescope.warehouse.charts.shared import (
    INVALID,
    NO_PARSED,
    ORANGES,
    PURPLES,
    REDS,
    Chart,
    heatmap,
    nice_max,
    varying,
    with_label,
)

LINE_PANEL_AXES = ("length_unit", "filler", "prompt_version", "placement", "region")
VARIANT_AXES = ("length_unit", "needle_count", "filler", "prompt_version", "placement", "region")


@dataclass(frozen=True)
class Figure:
    name: str
    chart: Chart


class RecallFrames(Protocol):
    """What the recall charts read of a probe's statistics (report/data.ProbeData)."""

    @property
    def probe(self) -> str: ...

    @property
    def stats(self) -> pl.DataFrame: ...

    @property
    def fillers(self) -> pl.DataFrame: ...

    @property
    def needles(self) -> pl.DataFrame: ...

    @property
    def hallucinations(self) -> pl.DataFrame: ...


def _length_title(frame: pl.DataFrame) -> str:
    units = frame["length_unit"].drop_nulls().unique().to_list() if frame.height else []
    return f"context length ({units[0]})" if len(units) == 1 else "context length"


def _labelled(
    frame: pl.DataFrame, axes: Sequence[str], lead: Sequence[str] = ()
) -> tuple[pl.DataFrame, str | None]:
    """Add a ``panel`` label of ``lead`` and the varying ``axes``; None if one panel does."""
    shown = [*lead, *varying(frame, axes)]
    if not shown:
        return frame, None
    return with_label(frame, shown, "panel"), "panel"


def figures(data: RecallFrames) -> list[Figure]:
    """Every recall chart of one probe, in the order the page shows them."""
    table = data.stats
    x_title = _length_title(table)
    dash = "needle_count" if varying(table, ["needle_count"]) else None
    lines, panel = _labelled(table, LINE_PANEL_AXES)
    figures = [
        Figure(
            "accuracy_by_length",
            accuracy_by_length(lines, panel=panel, dash=dash, x_title=x_title),
        )
    ]
    for axis, name in (("filler", "filler"), ("prompt_version", "prompt")):
        if axis not in varying(table, [axis]):
            continue
        others = [a for a in LINE_PANEL_AXES if a != axis]
        variant, variant_panel = _labelled(table, others, lead=["model"])
        figures.append(
            Figure(
                f"accuracy_by_length_by_{name}",
                accuracy_by_length(
                    variant,
                    color=axis,
                    panel=variant_panel,
                    dash=dash,
                    x_title=x_title,
                    title=f"Average accuracy by length and {axis.replace('_', ' ')}",
                ),
            )
        )
    fillers, filler_panel = _labelled(
        data.fillers, ("needle_count", "prompt_version", "placement", "region")
    )
    figures.append(Figure("accuracy_by_filler", accuracy_by_filler(fillers, panel=filler_panel)))
    figures.append(
        Figure(
            "parse_failures_by_length",
            parse_failures_by_length(lines, panel=panel, dash=dash, x_title=x_title),
        )
    )
    if data.probe == "recall" or data.needles.height:  # per-needle analysis: recall only
        figures += _heatmaps(data, x_title)
    return figures


def _heatmaps(data: RecallFrames, x_title: str) -> list[Figure]:
    # A block of model panels per variant (needle count, filler, …) that the probe varies.
    variants = varying(data.stats, VARIANT_AXES)
    row = "variant" if variants else None
    row_sort = None
    if variants:
        labelled = with_label(data.stats.sort(variants), variants, "variant")
        row_sort = labelled["variant"].unique(maintain_order=True).to_list()
    needles = with_label(data.needles, variants, "variant")
    misorder_top = nice_max(needles["misorder_rate"].max() if needles.height else 0, 1)
    counts = ["parsed_answers", *INVALID]
    figures = [
        Figure(
            "position_accuracy",
            heatmap(
                needles,
                value="position_accuracy",
                row=row,
                row_sort=row_sort,
                title="Position accuracy",
                subtitle="% of valid parsed answers that recalled the needle in order "
                "(in the longest common subsequence)",
                x_title=x_title,
                y_title="needle index",
                value_title="in order (%)",
                tooltip=["in_order", *counts],
            ),
        ),
        Figure(
            "missing_by_position",
            heatmap(
                needles,
                value="missing_rate",
                row=row,
                colors=REDS,
                row_sort=row_sort,
                title="Missing needles",
                subtitle="% of valid parsed answers that never gave the needle's value",
                x_title=x_title,
                y_title="needle index",
                value_title="missing (%)",
                tooltip=["missing", *counts],
            ),
        ),
        Figure(
            "misorder_by_position",
            heatmap(
                needles,
                value="misorder_rate",
                row=row,
                domain=(0.0, misorder_top),
                colors=PURPLES,
                row_sort=row_sort,
                title="Misordered needles",
                subtitle="% of valid parsed answers that gave the needle's value out of order "
                f"(scale 0–{misorder_top:g}%)",
                x_title=x_title,
                y_title="needle index",
                value_title="misordered (%)",
                tooltip=["misorder", *counts],
            ),
        ),
    ]
    invented = with_label(data.hallucinations, variants, "variant")
    top = nice_max(invented["per_answer"].max() if invented.height else 0, 0.01)
    intervals = (
        invented.select("key_from", "key_to", "interval").unique().sort("key_from", "key_to")
    )
    message = "No hallucinated values in the parsed answers." if data.needles.height else NO_PARSED
    figures.append(
        Figure(
            "hallucinations_by_interval",
            heatmap(
                invented,
                value="per_answer",
                y="interval",
                y_sort=intervals["interval"].to_list(),
                row=row,
                domain=(0.0, top),
                colors=ORANGES,
                row_sort=row_sort,
                title="Hallucinations",
                subtitle="invented values per valid parsed answer, by the anchors they fall "
                "between "
                "(0 = before the first needle, N+1 = after the last)",
                x_title=x_title,
                y_title="between needles",
                value_title="per answer",
                value_format=".2f",
                tooltip=["hallucinations", "parsed_answers", *INVALID],
                empty_message=message,
            ),
        )
    )
    return figures
