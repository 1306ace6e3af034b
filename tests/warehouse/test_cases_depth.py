"""Schema 5 (cases-depth): a needle case's depth is a column of its own; rows written before it
(the depth as their region, "depth 50%", and in their facts) read the same through the views."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from needlescope.config._sweep import parse_config
from needlescope.probes.registry import expand_grid
from needlescope.warehouse.report.drilldown import cell_of
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import cell_row
from needlescope.warehouse.store.schema import MIGRATIONS, TABLES

CASES = Path(__file__).resolve().parents[2] / "configs" / "cases" / "en.yaml"


def cases_cells() -> list:
    config = parse_config(
        {
            "name": "depths",
            "models": [{"name": "m", "provider": "local"}],
            "probes": [
                {
                    "probe": "cases",
                    "cases_file": str(CASES),
                    "lengths": [500],
                    "depths": [0, 33.3333],
                }
            ],
        }
    )
    return [c for c in expand_grid(config) if c.depth == 33.3333][:1]


def test_a_cases_cell_stores_its_depth_as_a_column_and_its_own_region(tmp_path: Path) -> None:
    assert MIGRATIONS[4][:2] == (5, "cases-depth")
    (cell,) = cases_cells()
    row = cell_row(cell, "r1")
    assert (row["region"], row["depth"]) == ("whole", 33.3333)
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [row])
    con = store.connect()
    stored = con.sql("SELECT * FROM cells").pl().row(0, named=True)
    assert (stored["region"], stored["depth"]) == ("whole", 33.3333)
    assert cell_of(stored)[0] == cell


def test_a_schema_4_cases_row_reads_its_depth_from_its_facts(tmp_path: Path) -> None:
    (cell,) = cases_cells()
    store = Warehouse(tmp_path).ensure()
    schema_4 = TABLES["cells"].remove(TABLES["cells"].get_field_index("depth"))
    old = {
        **cell_row(cell, "r1"),
        "schema_version": 4,
        "region": "depth 33.3333%",  # how schema 4 wrote it
        "facts": json.dumps({"depth": 33.3333}),
    }
    old.pop("depth")
    pq.write_table(pa.Table.from_pylist([old], schema_4), store.parquet / "cells" / "old.parquet")
    store.append(
        "answers",
        [
            {
                "run_id": "r1",
                "epoch": "e1",
                "cell_id": cell.cell_id,
                "model": "m",
                "probe": "cases",
                "parse_ok": True,
                "accuracy": 50.0,
            }
        ],
    )
    con = store.connect()
    stored = con.sql("SELECT * FROM cells").pl().row(0, named=True)
    assert (stored["region"], stored["depth"]) == ("whole", 33.3333)
    assert cell_of(stored)[0] == cell
    # The statistics still group a needle case's answers by its depth.
    assert con.sql("SELECT region, depth FROM results").fetchall() == [("depth 33.3333%", 33.3333)]
