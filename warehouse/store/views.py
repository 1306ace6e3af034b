"""The views' SQL: views.sql, each probe's views (warehouse/probes/) and the generated figure views,
over a connection's file snapshot (with the needle tallies of the rollups), or over globs for
the views file of the ``duckdb`` CLI."""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import duckdb

from needlescope.warehouse import probes
from needlescope.warehouse.store import rollups
from needlescope.warehouse.store.compaction import Snapshot, snapshot, table_sql, use_snapshot
from needlescope.warehouse.store.figures import POSITION_ACCURACY_VIEW
from needlescope.warehouse.store.figures_tallied import (
    ACCURACY_BY_LENGTH_VIEW,
    RECALL_STATS_VIEW,
    RESULT_EPOCHS_VIEW,
)
from needlescope.warehouse.store.schema import TABLES


def views_sql(live_from: tuple[Path, Snapshot] | None = None) -> str:
    """views.sql, each probe's views (warehouse/probes/; they build on the shared views), then
    views_imports.sql (other tools' imports). The
    tables are read from the connection's snapshot variables, or with ``live_from`` (the
    parquet folder and a snapshot) from globs that see later appends (compaction.table_sql)."""
    folder = resources.files("needlescope.warehouse.store")
    text = "\n".join(
        (folder.joinpath("views.sql").read_text(), probes.views_sql(), _read("views_imports.sql"))
    )

    text += (
        POSITION_ACCURACY_VIEW + RESULT_EPOCHS_VIEW + ACCURACY_BY_LENGTH_VIEW + RECALL_STATS_VIEW
    )
    return _bound(text, live_from)


def _read(name: str) -> str:
    return resources.files("needlescope.warehouse.store").joinpath(name).read_text()


def _bound(sql: str, live_from: tuple[Path, Snapshot] | None = None) -> str:
    """``sql`` with each ``{table:<name>}`` replaced by its read (compaction.table_sql)."""
    for table in TABLES:
        sql = sql.replace(f"{{table:{table}}}", table_sql(table, live_from=live_from))
    return sql


def some_views_sql(names: Sequence[str]) -> str:
    """Only the views and macros ``names`` of views.sql, reading the connection's snapshot
    (none of them may build on another view of views.sql): binding every view reads
    every file's footer many times over, which a writer that needs two of them need not pay."""
    text = resources.files("needlescope.warehouse.store").joinpath("views.sql").read_text()
    parts = []
    for name in names:
        # a statement of views.sql ends on the first line that ends with a semicolon
        found = re.search(
            rf"^CREATE OR REPLACE (?:VIEW|MACRO) {re.escape(name)}\b.*?;$", text, re.M | re.S
        )
        if found is None:
            raise KeyError(f"views.sql defines no view or macro {name}")
        parts.append(found.group(0))
    return _bound("\n".join(parts))


def create_views(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """The views on ``con``, reading the warehouse at ``root`` as of now (a snapshot)."""
    snap = snapshot(root)
    use_snapshot(con, snap)
    rollups.use_split(con, rollups.split(root, snap, rollups.current(root)))
    con.execute(views_sql())


def beside(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A connection to ``con``'s views for another thread: the same snapshot (the views read
    file lists from variables, which are per connection: copied), none of the work of making
    them again. It works while ``con`` stays open."""
    other = con.cursor()
    for (name,) in con.execute("SELECT name FROM duckdb_variables()").fetchall():
        # getvariable keeps the value's type (duckdb_variables() shows it as text)
        (value,) = con.execute("SELECT getvariable(?)", [name]).fetchone() or (None,)
        other.execute(f"SET VARIABLE {name} = ?", [value])
    return other


def views_file_sql(root: Path) -> str:
    """The views of the ``duckdb`` CLI's views file: globs that see later appends, and the
    needles counted from the raw rows."""
    live_from = (root / "parquet", snapshot(root))
    tallies, _ = rollups.tallies_sql(rollups.split(root, live_from[1], None), live_from)
    return tallies + views_sql(live_from=live_from)
