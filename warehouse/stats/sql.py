"""SQL pieces the statistics share: quoted column lists, joins on equal axes, a probe's
results."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import polars as pl


def quoted(columns: Sequence[str], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{c}"' for c in columns)


def order_by(columns: Sequence[str]) -> str:
    return ", ".join(f'"{c}" NULLS FIRST' for c in columns)


def same(columns: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f'{left}."{c}" IS NOT DISTINCT FROM {right}."{c}"' for c in columns)


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> Iterator[str]:
    """``frame`` readable as the view ``name`` on ``con`` meanwhile (unregistered after)."""
    con.register(name, frame)
    try:
        yield name
    finally:
        con.unregister(name)


def check_columns(con: duckdb.DuckDBPyConnection, columns: Sequence[str]) -> None:
    known = set(con.sql("SELECT * FROM results LIMIT 0").columns)
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise ValueError(f"not columns of the results view: {', '.join(unknown)}")


def filtered_results(
    probe: str, epoch: str | None, columns: str = "*"
) -> tuple[str, dict[str, Any]]:
    """A subquery of ``results`` for one probe (and epoch), with its named parameters."""
    params: dict[str, Any] = {"probe": probe}
    where = "probe = $probe"
    if epoch is not None:
        where += " AND epoch = $epoch"
        params["epoch"] = epoch
    return f"(SELECT {columns} FROM results WHERE {where})", params


def json_float(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)
