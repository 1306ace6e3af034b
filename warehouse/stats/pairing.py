"""The rows behind paired comparisons, read for many pairs at once (significance.py makes the
figures from them). Every side's answers are read from ``results`` once, into one temporary
table (a filter on the sides' models and epochs reaches the files: ``results`` partitions its
window by them); the needle hits of the answers that pair into another; then one query pairs
the answers of every pair and one counts every pair's discordant needles.

Per pair, the rows are what one pair alone would give: its sides' answers joined on its
pairing key (a full outer join, so answers without a partner stay), and per cell the needle
pairs of the answers paired. A pair whose answers share a pairing key gets its error alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from needlescope.warehouse.stats.sql import quoted
from needlescope.warehouse.store.figures import COUNTED

if TYPE_CHECKING:
    from needlescope.warehouse.stats.significance import Side

CELL_AXES: tuple[str, ...] = ("length_unit", "length", "needle_count")
# How each pairing keys an answer; context ids are hex digests: "/" cannot occur in them.
KEYS = {
    "cell_id": "cell_id",
    "context_id": "context_id",
    "epoch, context_id": "epoch || '/' || context_id",
}
# Status of a pair of answers (the first that applies), as in significance.Comparison.
STATUS = """CASE WHEN x.pair_id IS NULL THEN 'only_b'
                    WHEN y.pair_id IS NULL THEN 'only_a'
                    WHEN x.error_kind IS NOT NULL OR y.error_kind IS NOT NULL THEN 'error'
                    WHEN NOT (x.counted AND y.counted) THEN 'invalid'
                    WHEN x.accuracy IS NOT NULL AND y.accuracy IS NOT NULL THEN 'paired'
                    ELSE 'parse_failure' END"""


@dataclass(frozen=True)
class Planned:
    """One pair to read: side ``b`` against side ``a``, paired by ``pairing`` (a key of KEYS)."""

    a: Side
    b: Side
    pairing: str


@dataclass(frozen=True)
class Rows:
    """A pair's rows: ``pairs`` (status, the cell axes, pair_key, a_accuracy, b_accuracy: one
    row per pairing key of either side) and ``needles`` (per cell with a paired answer: its
    needle_pairs, mcnemar_b01, mcnemar_b10)."""

    pairs: pl.DataFrame
    needles: pl.DataFrame


def read_pairs(
    con: duckdb.DuckDBPyConnection, planned: Sequence[Planned], probe: str
) -> list[Rows | ValueError]:
    """Each planned pair's rows, in order, or the error that keeps it from pairing."""
    sides: dict[Side, int] = {}  # each side once, with its id
    for p in planned:
        sides.setdefault(p.a, len(sides))
        sides.setdefault(p.b, len(sides))
    tag = uuid.uuid4().hex
    tables = {name: f"{name}_{tag}" for name in ("answers", "pairs", "needles")}
    try:
        filters = _read_answers(con, tables["answers"], sides, probe)
        duplicated = _duplicated(con, tables["answers"])
        errors: dict[int, ValueError] = {}
        kept: dict[int, Planned] = {}
        for pair_id, p in enumerate(planned):
            if any(duplicated.get(sides[s], {}).get(p.pairing) for s in (p.a, p.b)):
                errors[pair_id] = ValueError(
                    f"answers share a pairing key ({p.pairing}): give each side an epoch, "
                    "or compare configs whose models have one identity each"
                )
            else:
                kept[pair_id] = p
        rows = _pair(con, tables, sides, kept, filters)
        return [errors[i] if i in errors else rows[i] for i in range(len(planned))]
    finally:
        for table in tables.values():
            con.execute(f"DROP TABLE IF EXISTS {table}")


def _read_answers(
    con: duckdb.DuckDBPyConnection, table: str, sides: dict[Side, int], probe: str
) -> dict[str, Any]:
    """Every side's rows of ``results`` into ``table`` (a row once per side it is in, with an
    ``answer_id`` of its own); the filter on the sides' models and epochs, for the needle rows
    as well."""
    params: dict[str, Any] = {"probe": probe, "models": sorted({s.model for s in sides})}
    values = []
    for side, i in sides.items():
        params[f"model_{i}"], params[f"epoch_{i}"] = side.model, side.epoch
        values.append(f"({i}, $model_{i}::VARCHAR, $epoch_{i}::VARCHAR)")
    where = "list_contains($models, r.model)"
    if all(side.epoch is not None for side in sides):  # else every epoch is read
        params["epochs"] = sorted({str(s.epoch) for s in sides})
        where += " AND list_contains($epochs, r.epoch)"
    con.execute(
        f"""CREATE TEMP TABLE {table} AS
        SELECT s.side_id, row_number() OVER () AS answer_id, r.run_id, r.epoch, r.cell_id,
               r.context_id, {quoted(CELL_AXES, "r.")}, r.error_kind, r.accuracy,
               {COUNTED} AS counted
        FROM results r JOIN (VALUES {", ".join(values)}) s(side_id, model, epoch)
            ON r.model = s.model AND (s.epoch IS NULL OR r.epoch = s.epoch)
        WHERE r.probe = $probe AND {where}""",
        params,
    )
    return {k: v for k, v in params.items() if k in ("models", "epochs")}


def _duplicated(con: duckdb.DuckDBPyConnection, table: str) -> dict[int, dict[str, int]]:
    """Per side, how many of its answers repeat another's key, by pairing."""
    counts = ", ".join(f"count({k}) - count(DISTINCT {k})" for k in KEYS.values())
    rows = con.execute(f"SELECT side_id, {counts} FROM {table} GROUP BY side_id").fetchall()
    return {int(side): dict(zip(KEYS, map(int, found), strict=True)) for side, *found in rows}


def _pair(
    con: duckdb.DuckDBPyConnection,
    tables: dict[str, str],
    sides: dict[Side, int],
    kept: dict[int, Planned],
    filters: dict[str, Any],
) -> dict[int, Rows]:
    """Every kept pair's answers paired (into the pairs table) and its needle counts."""
    if not kept:
        return {}
    kinds = list(KEYS)
    plan = ", ".join(
        f"({i}, {sides[p.a]}, {sides[p.b]}, {kinds.index(p.pairing)})" for i, p in kept.items()
    )
    key = "CASE p.kind " + " ".join(f"WHEN {i} THEN {k}" for i, k in enumerate(KEYS.values()))
    side = f"""SELECT p.pair_id, {key} END AS pair_key, t.*
        FROM (VALUES {plan}) p(pair_id, a_side, b_side, kind)
        JOIN {tables["answers"]} t ON t.side_id = p.{{}}"""
    con.execute(
        f"""CREATE TEMP TABLE {tables["pairs"]} AS
        WITH x AS ({side.format("a_side")}), y AS ({side.format("b_side")})
        SELECT coalesce(x.pair_id, y.pair_id) AS pair_id, {STATUS} AS status,
               {", ".join(f"coalesce(x.{k}, y.{k}) AS {k}" for k in CELL_AXES)},
               coalesce(x.pair_key, y.pair_key) AS pair_key,
               x.accuracy AS a_accuracy, y.accuracy AS b_accuracy,
               x.answer_id AS a_answer, y.answer_id AS b_answer
        FROM x FULL OUTER JOIN y ON x.pair_id = y.pair_id AND x.pair_key = y.pair_key"""
    )
    pairs = con.sql(
        f"""SELECT pair_id, status, {quoted(CELL_AXES)}, pair_key, a_accuracy, b_accuracy
        FROM {tables["pairs"]} ORDER BY pair_id, status, pair_key"""
    ).pl()
    needles = _needles(con, tables, filters)
    # a pair with no answer on either side (or none paired) has no rows: empty frames then
    by_pair = _by_pair(pairs)
    needles_by_pair = _by_pair(needles)
    no_pairs, no_needles = pairs.clear().drop("pair_id"), needles.clear().drop("pair_id")
    return {i: Rows(by_pair.get(i, no_pairs), needles_by_pair.get(i, no_needles)) for i in kept}


def _needles(
    con: duckdb.DuckDBPyConnection, tables: dict[str, str], filters: dict[str, Any]
) -> pl.DataFrame:
    """The needle hits of every answer paired in some pair (read once, into the needles
    table), and each pair's McNemar counts from them."""
    # The sides' models and epochs, stated on the needle rows: the scan then reads their row
    # groups only (the answers are a table here, so the optimiser cannot carry their filter).
    where = "list_contains($models, o.model)"
    if "epochs" in filters:
        where += " AND list_contains($epochs, o.epoch)"
    answers, pairs = tables["answers"], tables["pairs"]
    con.execute(
        f"""CREATE TEMP TABLE {tables["needles"]} AS
        WITH paired AS (
            SELECT a_answer AS answer_id FROM {pairs} WHERE status = 'paired'
            UNION SELECT b_answer FROM {pairs} WHERE status = 'paired'
        )
        SELECT t.answer_id, o.needle_index, o.outcome = 'correct' AS hit
        FROM raw_needle_outcomes o
        JOIN {answers} t ON o.run_id = t.run_id AND o.epoch = t.epoch AND o.cell_id = t.cell_id
        SEMI JOIN paired USING (answer_id)
        WHERE {where}""",
        filters,
    )
    return _mcnemar(con, pairs, tables["needles"])


def _mcnemar(con: duckdb.DuckDBPyConnection, pairs: str, needles: str) -> pl.DataFrame:
    """Per pair and cell, over its answers paired: the needle indices both answers have
    (``needle_pairs``) and those only b hit (``mcnemar_b01``) or only a (``mcnemar_b10``)."""
    axes = quoted(CELL_AXES, "p.")
    # Pairing needle by needle joins every paired answer's needles twice (most of a batch's
    # time): an answer whose indices are distinct and fit in a HUGEINT's bits is a mask
    # instead, and a pair's counts are the bits both masks have. Any other answer (odd data)
    # pairs needle by needle, as before: repeated indices count once per pair of rows.
    return con.sql(
        f"""WITH bits AS (
            SELECT answer_id, hit,
                   CASE WHEN needle_index BETWEEN 0 AND 126
                        THEN 1::HUGEINT << needle_index::HUGEINT END AS bit
            FROM {needles}
        ), masks AS MATERIALIZED (
            SELECT answer_id, count(*) = bit_count(bit_or(bit)) AS packed, bit_or(bit) AS every,
                   coalesce(bit_or(bit) FILTER (WHERE hit), 0) AS hits,
                   coalesce(bit_or(bit) FILTER (WHERE NOT hit), 0) AS misses
            FROM bits GROUP BY answer_id
        ), paired AS (
            SELECT p.pair_id, {axes}, p.a_answer, p.b_answer,
                   coalesce(ma.packed AND mb.packed, false) AS packed,
                   ma.every & mb.every AS shared, ma.misses & mb.hits AS b01,
                   ma.hits & mb.misses AS b10
            FROM {pairs} p
            LEFT JOIN masks ma ON ma.answer_id = p.a_answer
            LEFT JOIN masks mb ON mb.answer_id = p.b_answer
            WHERE p.status = 'paired'
        ), counted AS (
            SELECT pair_id, {quoted(CELL_AXES)}, bit_count(shared) AS n, bit_count(b01) AS b01,
                   bit_count(b10) AS b10
            FROM paired WHERE packed
            UNION ALL
            SELECT p.pair_id, {axes}, 1, (NOT na.hit AND nb.hit)::INTEGER,
                   (na.hit AND NOT nb.hit)::INTEGER
            FROM paired p
            JOIN {needles} na ON na.answer_id = p.a_answer
            JOIN {needles} nb ON nb.answer_id = p.b_answer AND nb.needle_index = na.needle_index
            WHERE NOT p.packed
        )
        SELECT pair_id, {quoted(CELL_AXES)}, sum(n)::BIGINT AS needle_pairs,
               coalesce(sum(b01), 0)::BIGINT AS mcnemar_b01,
               coalesce(sum(b10), 0)::BIGINT AS mcnemar_b10
        FROM counted GROUP BY pair_id, {quoted(CELL_AXES)} HAVING sum(n) > 0"""
    ).pl()


def _by_pair(frame: pl.DataFrame) -> dict[int, pl.DataFrame]:
    parts = frame.partition_by("pair_id", as_dict=True, include_key=False, maintain_order=True)
    return {int(key[0]): part for key, part in parts.items()}
