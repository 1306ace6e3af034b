"""The run's end reads the warehouse through one shared connection; when the warehouse cannot be
read, each step connects itself and reports its own failure, as it did alone."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pytest

from needlescope.errors import WarehouseError
from needlescope.flows.run_end import epoch_drift, shared_reader
from needlescope.warehouse.store import Warehouse


class Unreadable(Warehouse):
    def __init__(self) -> None:
        super().__init__(Path("/nowhere"))
        self.connects = 0

    def connect(self) -> duckdb.DuckDBPyConnection:
        self.connects += 1
        raise WarehouseError("no warehouse at /nowhere")


def test_an_unreadable_warehouse_leaves_each_step_its_own_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Unreadable()
    logger = logging.getLogger("run-end-test")
    with shared_reader(store) as con:
        assert con is None
        with caplog.at_level(logging.WARNING, logger="run-end-test"):
            assert epoch_drift(store, "e1", 0, logger, con) is None
    assert store.connects == 2
    assert "drift against the previous epoch not computed" in caplog.text
    assert "no warehouse at /nowhere" in caplog.text


def test_the_shared_connection_has_the_views_and_is_closed_after(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh").ensure()
    with shared_reader(store) as con:
        assert con is not None
        assert con.execute("SELECT count(*) FROM results").fetchone() == (0,)
        assert epoch_drift(store, "e1", 0, logging.getLogger("x"), con) == []
    with pytest.raises(duckdb.ConnectionException):
        con.execute("SELECT 1")
