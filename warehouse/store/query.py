"""`needlescope sql`: SQL over the views, rendered as a table, CSV or JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb

from needlescope.errors import WarehouseError
from needlescope.warehouse.store import Warehouse


def run_sql(root: Path | None, query: str, output_format: str) -> str:
    con = Warehouse(root).connect()
    try:
        frame = con.sql(query).pl() if query.strip() else None
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise WarehouseError(f"SQL error: {first}") from None
    finally:
        con.close()
    if frame is None:
        raise WarehouseError("empty query")
    if output_format == "csv":
        return frame.write_csv()
    if output_format == "json":
        return json.dumps(frame.to_dicts(), default=str, ensure_ascii=False) + "\n"
    import polars as pl

    buffer = io.StringIO()
    with pl.Config(tbl_rows=200, tbl_cols=40, fmt_str_lengths=60, tbl_width_chars=200):
        buffer.write(str(frame) + "\n")
    return buffer.getvalue()
