"""Charts of the needle-cases probes (cases, rag): frames from its views.sql in, Altair out.
A builder past 60 lines is one declarative chart spec, kept whole so it reads as its chart.

The builders do no I/O; ``load`` reads the views they draw and ``figures`` lists every chart by
name, for the report. Accuracy colours always span 0–100 and judge scores 1–10, so charts of
different sweeps compare at a glance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import duckdb
import polars as pl

from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.charts.shared import ACCURACY_DOMAIN, Chart, placeholder

JUDGE_DOMAIN = (1.0, 10.0)
KEYWORD_PASS, JUDGE_PASS = (
    50.0,
    7,
)  # as needlescope.grading._judge: where each grade calls it correct
# Red, amber, green: low recall reads as a warning at a glance, as in needle-test heatmaps.
RECALL_COLORS = ("#b2182b", "#f4a582", "#fddc84", "#a6d96a", "#1a9641")
AGREE, DISAGREE = "agree", "disagree"
NO_CASES = "No needle-case answers yet: nothing to chart."
NO_PAIRS = "No cell has both an LLM and a RAG answer yet."
NO_JUDGE = "No judge scores yet: configure a judge model for the cases probe."
WIDTH = 300
PANEL_AXES = ("case", "filler", "length_unit")  # shown in a panel's label when they vary


@dataclass(frozen=True)
class CasesFrames:
    scores: pl.DataFrame  # cases_scores
    grid: pl.DataFrame  # cases_depth_length
    pairs: pl.DataFrame  # cases_llm_vs_rag


def load(con: duckdb.DuckDBPyConnection) -> CasesFrames:
    """The views the charts draw (reads only; the builders below do no I/O)."""
    scores = con.sql("SELECT * EXCLUDE (facts, detail, response) FROM cases_scores").pl()
    grid = con.sql("SELECT * FROM cases_depth_length ORDER BY ALL").pl()
    pairs = con.sql("SELECT * FROM cases_llm_vs_rag ORDER BY ALL").pl()
    return CasesFrames(scores, grid, pairs)


def with_setting(frame: pl.DataFrame) -> pl.DataFrame:
    """A ``setting`` label: "llm", or "rag · topk" (the RAG context mode)."""
    return frame.with_columns(
        pl.when(pl.col("mode") == "rag")
        .then(pl.format("rag · {}", pl.col("rag_mode").fill_null("?")))
        .otherwise(pl.col("mode"))
        .alias("setting")
    )


def _panels(frame: pl.DataFrame, lead: tuple[str, ...] = ("model",)) -> pl.DataFrame:
    """A ``panel`` label: the model, plus the case and filler when more than one is shown."""
    return charts.with_label(frame, panel_axes(frame, lead), "panel")


def panel_axes(frame: pl.DataFrame, lead: tuple[str, ...] = ("model",)) -> list[str]:
    """What a panel is labelled with: ``lead``, and the case, filler and length unit when
    ``frame`` holds more than one of them."""
    return [*lead, *charts.varying(frame, PANEL_AXES)]


def cell_labels(frame: pl.DataFrame, axes: Sequence[str]) -> pl.DataFrame:
    """The fields that name a depth × length heatmap's cell beside its length and depth: its
    ``panel`` (of ``axes``: :func:`panel_axes` of the grid) and ``setting``. The drill-down
    labels the answers behind each cell with this too."""
    return charts.with_label(with_setting(frame), axes, "panel")


def depth_length_heatmap(
    frame: pl.DataFrame,
    *,
    value: str = "mean_keyword_accuracy",
    title: str = "Needle cases: keyword recall by depth and length",
    subtitle: str | None = "mean keyword accuracy (%) of the answers; depth of the first needle",
) -> Chart:
    """Depth (rows, 0 at the top) × length, one panel per model (and case, filler), one block per
    setting (LLM, and RAG per context mode) on one fixed colour scale: paired heatmaps.

    The panels are labelled after the whole grid, not only its cells with a ``value``: the
    keyword and judge heatmaps name their panels alike (and the drill-down, their cells)."""
    data = frame.filter(pl.col(value).is_not_null()) if value in frame.columns else frame.clear()
    if data.is_empty():
        return placeholder(title, NO_CASES, subtitle)
    judge = value == "mean_judge_score"
    data = cell_labels(data, panel_axes(frame))
    settings = sorted(data["setting"].unique().to_list(), key=lambda s: (s != "llm", s))
    return charts.heatmap(
        data,
        value=value,
        x="length",
        y="depth",
        panel="panel",
        row="setting" if len(settings) > 1 else None,
        row_sort=settings,
        domain=JUDGE_DOMAIN if judge else ACCURACY_DOMAIN,
        colors=RECALL_COLORS,
        title=title,
        subtitle=subtitle,
        x_title=f"context length ({_unit(data)})",
        y_title="depth of the first needle (%)",
        value_title="judge score" if judge else "keyword accuracy (%)",
        tooltip=["setting", "answers", "judged", "disagreements", "invalid", "invalid_why"],
        empty_message=NO_CASES,
    )


def llm_vs_rag(
    frame: pl.DataFrame,
    *,
    title: str = "LLM vs RAG, cell by cell",
    subtitle: str | None = "keyword accuracy of the same case, length, depth and filler; "
    "above the diagonal RAG recalled more",
) -> Chart:
    """One point per (LLM, RAG) accuracy pair, sized by how many cells share it, coloured by the
    RAG context mode; one panel per model."""
    x, y = "llm_keyword_accuracy", "rag_keyword_accuracy"
    data = frame.filter(pl.col(x).is_not_null() & pl.col(y).is_not_null())
    if data.is_empty():
        return placeholder(title, NO_PAIRS, subtitle)
    data = _panels(data)
    counted = (
        data.with_columns(pl.col(x).round(1), pl.col(y).round(1))
        .group_by(["panel", "rag_mode", x, y], maintain_order=True)
        .agg(
            pl.len().alias("cells"),
            pl.col("length").unique().sort().cast(pl.Utf8).str.join(", ").alias("lengths"),
            pl.col("depth").unique().sort().cast(pl.Utf8).str.join(", ").alias("depths"),
        )
    )
    scale = alt.Scale(domain=list(ACCURACY_DOMAIN))
    points = (
        alt.Chart()
        .mark_circle(opacity=0.75)
        .encode(
            x=alt.X(f"{x}:Q", title="LLM keyword accuracy (%)", scale=scale),
            y=alt.Y(f"{y}:Q", title="RAG keyword accuracy (%)", scale=scale),
            size=_count_size("cells", counted),
            color=alt.Color("rag_mode:N", title="RAG context"),
            tooltip=[
                alt.Tooltip("panel:N"),
                alt.Tooltip("rag_mode:N"),
                alt.Tooltip(f"{x}:Q", format=".1f"),
                alt.Tooltip(f"{y}:Q", format=".1f"),
                alt.Tooltip("cells:Q"),
                alt.Tooltip("lengths:N"),
                alt.Tooltip("depths:N"),
            ],
        )
    )
    diagonal = (
        alt.Chart()
        .mark_rule(color="#999", strokeDash=[4, 4])
        .encode(x=alt.datum(0), y=alt.datum(0), x2=alt.datum(100), y2=alt.datum(100))
    )
    layered = alt.LayerChart(data=counted, layer=[diagonal, points], width=WIDTH, height=WIDTH)
    return _facet(layered, counted, _title(title, subtitle))


def judge_vs_keywords(
    frame: pl.DataFrame,
    *,
    title: str = "LLM judge vs keyword recall",
    subtitle: str | None = None,
) -> Chart:
    """Each judged answer at (keyword accuracy, judge score), sized by count; red where the two
    grades disagree (one calls it correct, the other not). Dashed lines mark both thresholds."""
    x, y = "keyword_accuracy", "judge_score"
    data = frame.filter(pl.col(x).is_not_null() & pl.col(y).is_not_null())
    if data.is_empty():
        return placeholder(title, NO_JUDGE, subtitle)
    data = _panels(with_setting(data))
    disagreeing = int(data["disagreement"].sum())
    subtitle = subtitle or (
        f"{disagreeing} of {data.height} judged answers ({100 * disagreeing / data.height:.0f}%) "
        f"disagree: keyword accuracy ≥ {KEYWORD_PASS:g} is correct for recall, "
        f"a score ≥ {JUDGE_PASS} for the judge"
    )
    counted = (
        data.with_columns(
            pl.col(x).round(1),
            pl.when(pl.col("disagreement"))
            .then(pl.lit(DISAGREE))
            .otherwise(pl.lit(AGREE))
            .alias("grades"),
        )
        .group_by(["panel", "setting", "grades", x, y], maintain_order=True)
        .agg(pl.len().alias("answers"))
    )
    x_scale = alt.Scale(domain=list(ACCURACY_DOMAIN))
    y_scale = alt.Scale(domain=[JUDGE_DOMAIN[0] - 0.5, JUDGE_DOMAIN[1] + 0.5], nice=False)
    scores = list(range(int(JUDGE_DOMAIN[0]), int(JUDGE_DOMAIN[1]) + 1))
    y_axis = alt.Axis(values=scores, labelOverlap=False, grid=False, title="judge score")
    x_axis = alt.Axis(title="keyword accuracy (%)")
    points = (
        alt.Chart()
        .mark_point(filled=True, opacity=0.8)
        .encode(
            x=alt.X(f"{x}:Q", scale=x_scale, axis=x_axis),
            y=alt.Y(f"{y}:Q", scale=y_scale, axis=y_axis),
            size=_count_size("answers", counted),
            color=alt.Color(
                "grades:N",
                title="the two grades",
                scale=alt.Scale(domain=[AGREE, DISAGREE], range=["#4c78a8", "#e45756"]),
            ),
            shape=alt.Shape("setting:N", title="setting"),
            tooltip=[
                alt.Tooltip("panel:N"),
                alt.Tooltip("setting:N"),
                alt.Tooltip(f"{x}:Q", format=".1f"),
                alt.Tooltip(f"{y}:Q"),
                alt.Tooltip("grades:N"),
                alt.Tooltip("answers:Q"),
            ],
        )
    )
    rule = alt.Chart().mark_rule(color="#999", strokeDash=[4, 4])
    thresholds = [
        rule.encode(x=alt.XDatum(KEYWORD_PASS, scale=x_scale, axis=x_axis)),
        rule.encode(y=alt.YDatum(JUDGE_PASS - 0.5, scale=y_scale, axis=y_axis)),
    ]
    layered = alt.LayerChart(data=counted, layer=[*thresholds, points], width=WIDTH, height=WIDTH)
    return _facet(layered, counted, _title(title, subtitle))


def figures(frames: CasesFrames) -> list[tuple[str, Chart]]:
    """Every cases chart, by file name, in the order a report shows them."""
    found = [
        ("cases_keyword_heatmap", depth_length_heatmap(frames.grid)),
        ("cases_llm_vs_rag", llm_vs_rag(frames.pairs)),
        ("cases_judge_vs_keywords", judge_vs_keywords(frames.scores)),
    ]
    if frames.grid.height and frames.grid["mean_judge_score"].drop_nulls().len():
        found.insert(
            1,
            (
                "cases_judge_heatmap",
                depth_length_heatmap(
                    frames.grid,
                    value="mean_judge_score",
                    title="Needle cases: judge score by depth and length",
                    subtitle="mean LLM-judge score (1–10) of the answers",
                ),
            ),
        )
    return found


def _count_size(field: str, frame: pl.DataFrame) -> alt.Size:
    """Point size by a count, its legend showing whole counts only."""
    counts = sorted(set(frame[field].to_list()))
    shown = counts if len(counts) <= 5 else [counts[i * (len(counts) - 1) // 4] for i in range(5)]
    return alt.Size(
        f"{field}:Q",
        title=field,
        scale=alt.Scale(domain=[1, max(counts[-1], 2)], range=[60, 600]),
        legend=alt.Legend(values=shown, format="d"),
    )


def _title(text: str, subtitle: str | None) -> alt.TitleParams:
    if subtitle:
        return alt.TitleParams(text, subtitle=subtitle, anchor="start")
    return alt.TitleParams(text, anchor="start")


def _facet(layered: alt.LayerChart, frame: pl.DataFrame, title: alt.TitleParams) -> Chart:
    panels = frame["panel"].unique(maintain_order=True).to_list()
    if len(panels) == 1:
        return layered.properties(title=title)
    header = alt.Header(labelFontSize=12, labelFontWeight="bold", labelLimit=320)
    return layered.facet(
        facet=alt.Facet("panel:N", sort=panels, title=None, header=header),
        columns=min(charts.PANEL_COLUMNS, len(panels)),
    ).properties(title=title)


def _unit(frame: pl.DataFrame) -> str:
    units = frame["length_unit"].drop_nulls().unique().to_list()
    return str(units[0]) if len(units) == 1 else "mixed units"
