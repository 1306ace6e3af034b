"""The SQL of the drill-down: each target's configs with their answer counts, the answers picked
per heatmap cell, and what is read of them beside their ``results`` rows. ``read_details``
runs past 60 lines: its five queries side by side, each a few lines of SQL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.report.drilldown.rebuild import CELL_FIELDS
from needlescope.warehouse.report.drilldown.targets import AXIS_SQL, CELL_AXIS_SQL, Target, keys
from needlescope.warehouse.store import figures

RECENT_EPOCHS = 2  # the epochs pick tries first
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


def quoted(columns: Sequence[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def answers_sql(target: Target, source: str, extra: Mapping[str, str]) -> str:
    """The answers of the target's probes with its axes and ``extra`` columns (name: SQL over
    the answer's row ``s`` and its cell row ``c``, joined only when an axis needs it)."""
    columns = {**{axis: AXIS_SQL[axis] for axis in target.axes}, **extra}
    selected = ", ".join(f'{sql} AS "{name}"' for name, sql in columns.items())
    join = "JOIN cells c ON c.cell_id = s.cell_id" if set(target.axes) & set(CELL_AXIS_SQL) else ""
    return f"SELECT {selected} FROM {source} s {join} WHERE list_contains($probes, s.probe)"


# `results`' columns the targets' axes read, per answer tally row (``n``: how many answers):
# the drill-down's counts over every epoch without deriving `results`.
TALLIED = f"""(
    SELECT {figures.result_axes(figures.AXES)}, c.cell_id, t.parse_ok, t.answers AS n,
           CASE WHEN NOT t.graded THEN 'error' END AS error_kind
    FROM answer_tallies t JOIN cells c USING (cell_id)
)"""


def config_counts(con: duckdb.DuckDBPyConnection, target: Target, source: str) -> pl.DataFrame:
    """One row per config the target's charts are drawn from: its key and answer counts
    (``source`` ``results``: read from the answer tallies)."""
    tallied = source == "results"
    extra = {"error_kind": "s.error_kind", "parse_ok": "s.parse_ok"}
    answers = answers_sql(
        target, TALLIED if tallied else source, extra | ({"n": "s.n"} if tallied else {})
    )

    def count(rule: str) -> str:
        if tallied:
            return f"coalesce(sum(n) FILTER (WHERE {rule}), 0)::BIGINT"
        return f"count(*) FILTER (WHERE {rule})"

    frame = con.sql(
        f"""
        SELECT {quoted(target.axes)},
               {count("error_kind IS NULL AND parse_ok IS NOT NULL")} AS answers_total,
               {count("error_kind IS NULL AND parse_ok")} AS parsed_total,
               {count("error_kind IS NOT NULL")} AS errors_total
        FROM ({answers}) GROUP BY ALL
        """,
        params={"probes": list(target.probes)},
    ).pl()
    return frame.with_columns(pl.Series("key", keys(target, frame), dtype=pl.Utf8))


def pick(
    con: duckdb.DuckDBPyConnection,
    target: Target,
    source: str,
    per_cell: int,
    configs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Up to ``per_cell`` results per heatmap cell of the target: parsed answers, then parse
    failures, then failed requests; latest epoch first. Picked per config in DuckDB (a cell
    is one config or a few), then per cell here.

    From ``results``, the latest epochs are tried first (an epoch filter reaches below
    results' window: those epochs' rows only): when every config has ``per_cell`` parsed
    answers there, no older answer can rank among them. ``configs``: the target's
    :func:`config_counts`, when the caller has them."""
    params = {"probes": list(target.probes), "per_cell": per_cell}
    picked = None
    if source == "results":
        recent = [
            str(e)
            for (e,) in con.execute(
                "SELECT DISTINCT epoch FROM answers WHERE list_contains($probes, probe) "
                "ORDER BY epoch DESC LIMIT $k",
                {"probes": list(target.probes), "k": RECENT_EPOCHS},
            ).fetchall()
        ]
        found = _picked(
            con,
            target,
            "(SELECT * FROM results WHERE list_contains($recent, epoch))",
            params | {"recent": recent},
        )
        if configs is None:
            configs = config_counts(con, target, source)
        full = found.filter(pl.col("error_kind").is_null() & pl.col("parse_ok").fill_null(False))
        counts = full.group_by(list(target.axes)).len()
        if counts.height == configs.height and (counts["len"] >= per_cell).all():
            picked = found
    if picked is None:
        picked = _picked(con, target, source, params)
    ranked = picked.with_columns(
        pl.Series("key", keys(target, picked), dtype=pl.Utf8),
        pl.col("error_kind").is_null().alias("answered"),
        pl.col("parse_ok").fill_null(False).alias("parsed"),
    ).sort(
        ["key", "answered", "parsed", "epoch", "repeat", "cell_id"],
        descending=[False, True, True, True, False, False],
    )
    return ranked.group_by("key", maintain_order=True).head(per_cell).select("key", *_ANSWER_SQL)


def _picked(
    con: duckdb.DuckDBPyConnection, target: Target, source: str, params: dict[str, Any]
) -> pl.DataFrame:
    answers = answers_sql(target, source, _ANSWER_SQL)
    return con.sql(
        f"""
        SELECT * FROM ({answers})
        QUALIFY row_number() OVER (PARTITION BY {quoted(target.axes)} ORDER BY {_ORDER})
            <= $per_cell
        """,
        params=params,
    ).pl()


def frame_or_empty(con: duckdb.DuckDBPyConnection, query: str, **params: Any) -> pl.DataFrame:
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


def read_details(con: duckdb.DuckDBPyConnection, picked: str, chars: int) -> Details:
    key = "a.run_id = p.run_id AND a.epoch = p.epoch AND a.cell_id = p.cell_id"
    # the attempt `results` picked: the graded answer, else the latest failure
    same_attempt = """QUALIFY row_number() OVER (
            PARTITION BY a.run_id, a.epoch, a.cell_id
            ORDER BY (a.error_kind IS NULL) DESC, a.answered_at DESC
        ) = 1"""
    replies = frame_or_empty(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, left(a.response, $chars) AS response,
               length(a.response) AS response_chars, a.response_kept, a.parse_error,
               a.error, a.finish_reason, a.truncated, a.correct, a.missing, a.extra, a.wrong,
               -- the LLM judge's verdict on a needle case's answer (needlescope.grading._judge)
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
    needles = frame_or_empty(
        con,
        f"""
        SELECT a.run_id, a.epoch, a.cell_id, a.needle_index, a.outcome
        FROM raw_needle_outcomes a SEMI JOIN {picked} p ON {key}
        ORDER BY a.run_id, a.epoch, a.cell_id, a.needle_index
        """,
    )
    invented = frame_or_empty(
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
    columns = ", ".join(f'c."{c}"' for c in ("cell_id", "run_id", *CELL_FIELDS))
    cells = frame_or_empty(
        con,
        f"""
        SELECT {columns}, c.depth, c.filler_chars, c.prompt_length, c.prompt_sha256, c.expected,
               c.facts, c.prompt_text IS NOT NULL AS has_prompt
        FROM cells c WHERE c.cell_id IN (SELECT cell_id FROM {picked})
        """,
    )
    configs = frame_or_empty(
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
