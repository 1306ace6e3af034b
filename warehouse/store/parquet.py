"""The warehouse on disk: append-only Parquet files written atomically, DuckDB views over them."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from needlescope.errors import WarehouseError
from needlescope.fitting import RememberedFit
from needlescope.haystack import storable_values
from needlescope.warehouse.store.claims import CLAIMS_FILE, alive
from needlescope.warehouse.store.compaction import (
    EMPTY_FILE,
    mark_views_snapshot,
    partial_of,
    snapshot,
    table_sql,
    use_snapshot,
)
from needlescope.warehouse.store.replies import PendingReplies
from needlescope.warehouse.store.rollups import ROLLUPS
from needlescope.warehouse.store.schema import SCHEMA_VERSION, TABLES
from needlescope.warehouse.store.views import create_views, views_file_sql

DEFAULT_ROOT = Path("warehouse/data")
DB_NAME = "needlescope.duckdb"
IDENTITY_FILE = "warehouse.json"
# What needlescope keeps at a warehouse's top level (anything else: another tool's folder).
OWN = frozenset(
    {
        "parquet",
        "compacted",
        ROLLUPS,
        DB_NAME,
        f"{DB_NAME}.wal",
        IDENTITY_FILE,
        CLAIMS_FILE,
        f"{CLAIMS_FILE}-journal",
    }
)


def default_root() -> Path:
    return Path(os.environ.get("NEEDLESCOPE_WAREHOUSE", DEFAULT_ROOT))


def slug(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", value)[:80] or "_"


def _schema_of(path: Path) -> pa.Schema | None:
    """The schema of a Parquet file, or None if it is not one (say, cut short by a crash)."""
    try:
        return pq.read_schema(path).remove_metadata()
    except (OSError, pa.ArrowException):
        return None


def _whole_parquet(path: Path) -> bool:
    """Whether ``path`` starts and ends with Parquet's magic bytes, as every whole file does."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
            if handle.seek(0, os.SEEK_END) < 12:
                return False
            handle.seek(-4, os.SEEK_END)
            return head == handle.read(4) == b"PAR1"
    except OSError:
        return False


def _writer_pid(name: str) -> int | None:
    match = re.match(r"^\.\d{8}T\d+-(\d+)-", name)
    return int(match.group(1)) if match else None


class Warehouse:
    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.parquet = self.root / "parquet"
        self.db_path = self.root / DB_NAME
        self._seq = 0

    # -- setup -----------------------------------------------------------------------------

    def ensure(self) -> Warehouse:
        """Create the folders, the empty per-table files and the identity file if missing."""
        self.check_ours()
        try:
            for table, schema in TABLES.items():
                folder = self.parquet / table
                folder.mkdir(parents=True, exist_ok=True)
                self._write_empty_file(folder, schema)
            self._identity()
            self._remove_orphaned_partials()
        except OSError as exc:
            raise WarehouseError(f"cannot write warehouse at {self.root}: {exc.strerror}") from None
        return self

    def _write_empty_file(self, folder: Path, schema: pa.Schema) -> None:
        """An empty file of the current schema in every table folder.

        Every glob then matches at least one file (views work on an empty warehouse), and
        because views read with union_by_name, a column added by a newer schema version
        reads as NULL in older files: adding columns is the only schema change we make.
        """
        empty = folder / EMPTY_FILE
        found = _schema_of(empty) if empty.exists() else None
        if found is not None and found.equals(schema, check_metadata=False):
            return
        # Several processes may create one warehouse at once: each writes its own temp file
        # (the same content), and the renames replace each other atomically.
        self._atomic_write(schema.empty_table(), empty, unique=True)

    def check_ours(self) -> None:
        """Refuse a folder another tool made (needlescope would write into it): one that holds
        a warehouse.json not of needlescope's making, or other files and no warehouse.json.
        Reads only; an absent folder is fine (``ensure`` creates it)."""
        root = self.root
        if not root.exists():
            return
        if not root.is_dir():
            raise WarehouseError(f"cannot write warehouse at {root}: not a directory")
        identity = root / IDENTITY_FILE
        if identity.exists():
            try:
                meta = json.loads(identity.read_text(encoding="utf-8"))
                ours = isinstance(meta, dict) and isinstance(meta.get("id"), str)
            except (OSError, ValueError):
                ours = False
            if not ours:
                raise WarehouseError(
                    f"{root} is not a needlescope warehouse: its {IDENTITY_FILE} is not"
                    " needlescope's; give another folder"
                )
            return
        try:
            foreign = sorted(
                p.name for p in root.iterdir() if not p.name.startswith(".") and p.name not in OWN
            )
        except OSError as exc:
            raise WarehouseError(f"cannot read warehouse at {root}: {exc.strerror}") from None
        if foreign:
            raise WarehouseError(
                f"{root} is not a needlescope warehouse (no {IDENTITY_FILE}, and it holds"
                f" {foreign[0]!r}{' and more' if len(foreign) > 1 else ''}): give a new or"
                " empty folder"
            )

    def check_files(self) -> None:
        """Name a Parquet file no reader could open (cut short, or not Parquet at all), before
        a sweep starts rather than at its first query. Reads 8 bytes a file."""
        if not (self.root / IDENTITY_FILE).is_file():
            return
        for files in snapshot(self.root).files.values():
            for path in files:
                if not _whole_parquet(path):
                    raise WarehouseError(
                        f"corrupt Parquet file in the warehouse: {path} (not a whole Parquet"
                        " file); move it out of the warehouse to go on"
                    )

    def upgrade(self) -> None:
        """Bring an existing warehouse's empty schema files up to this version (idempotent)."""
        try:
            for table, schema in TABLES.items():
                folder = self.parquet / table
                folder.mkdir(parents=True, exist_ok=True)
                self._write_empty_file(folder, schema)
        except OSError:
            pass  # a read-only warehouse: queries on it may miss new columns, nothing else

    def _remove_orphaned_partials(self) -> None:
        """Temp files left by a killed writer (its pid is in the name): never read, safe to drop."""
        for partial in self.parquet.rglob(".*.parquet.partial"):  # compaction cleans its own
            pid = _writer_pid(partial.name)
            if pid is not None and not alive(pid):
                partial.unlink(missing_ok=True)
        PendingReplies(self.root).remove_orphaned_partials()

    def _identity(self) -> dict[str, Any]:
        path = self.root / IDENTITY_FILE
        if not path.exists():
            meta = {
                "id": uuid.uuid4().hex,
                "schema_version": SCHEMA_VERSION,
                "created_at": datetime.now(UTC).isoformat(),
            }
            # Written whole under a name of its own, then linked into place: a process that
            # creates the same warehouse at the same moment never reads a half-written file,
            # and the first link wins (link, unlike rename, never replaces).
            draft = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
            draft.write_text(json.dumps(meta), encoding="utf-8")
            try:
                os.link(draft, path)
            except FileExistsError:
                pass
            finally:
                draft.unlink(missing_ok=True)
        return dict(json.loads(path.read_text(encoding="utf-8")))

    @property
    def id(self) -> str:
        return str(self._identity()["id"])

    def exists(self) -> bool:
        return (self.root / IDENTITY_FILE).is_file()

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, table: str, rows: Iterable[Mapping[str, Any]], *, parts: Iterable[str] = ()
    ) -> Path | None:
        """Write rows as one new Parquet file; readers never see a partial file."""
        schema = TABLES[table]
        # Any text is storable: what UTF-8 cannot encode (a model's lone surrogate) becomes
        # U+FFFD rather than failing the write (answers flag it: rows.graded_row).
        records = [{"schema_version": SCHEMA_VERSION, **storable_values(row)[0]} for row in rows]
        if not records:
            return None
        data = pa.Table.from_pylist(records, schema=schema)
        folder = self.parquet.joinpath(table, *(slug(p) for p in parts))
        self._seq += 1
        stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
        name = f"{stamp}-{os.getpid()}-{self._seq:05d}-{uuid.uuid4().hex[:8]}"
        target = folder / f"{name}.parquet"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._atomic_write(data, target)
        except OSError as exc:
            raise WarehouseError(f"cannot write {target}: {exc.strerror}") from None
        return target

    @staticmethod
    def _atomic_write(data: pa.Table, target: Path, unique: bool = False) -> None:
        """``unique``: a temp name of this writer's own, for a target others may write too (a
        data file's name is unique already). The name starts with a stamp and the pid, as the
        orphaned-partial sweep expects."""
        partial = partial_of(target)
        if unique:
            stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            partial = target.with_name(f".{stamp}-{target.name}.partial")
        pq.write_table(data, partial, compression="zstd")
        with partial.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, target)

    # -- reading ---------------------------------------------------------------------------

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with the views: no lock on the .duckdb file."""
        if not self.exists():
            raise WarehouseError(f"no warehouse at {self.root} (run a sweep or import first)")
        self.check_ours()
        self.upgrade()
        con = duckdb.connect()
        create_views(con, self.root.resolve())
        return con

    @contextmanager
    def reading(
        self, con: duckdb.DuckDBPyConnection | None = None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """``con`` if given (left open: its owner closes it), else a connection of its own
        (:meth:`connect`), closed after."""
        if con is not None:
            yield con
            return
        own = self.connect()
        try:
            yield own
        finally:
            own.close()

    def refresh_views_file(self) -> bool:
        """(Re)create the views in the .duckdb file for the duckdb CLI; False if it is locked."""
        try:
            con = duckdb.connect(str(self.db_path))
        except duckdb.IOException:
            return False
        taken_at = time.time()
        try:
            con.execute(views_file_sql(self.root.resolve()))
        finally:
            con.close()
        # Compaction deletes merged files' sources only once this file's views stopped reading them.
        mark_views_snapshot(self.root, taken_at)
        return True

    def query_table(self, table: str, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """``sql`` over one table's files, named ``t``; no views, no lock on the .duckdb file."""
        con = duckdb.connect()
        try:
            use_snapshot(con, snapshot(self.root, (table,)), tables=(table,))
            return con.execute(f"WITH t AS {table_sql(table)} {sql}", params).fetchall()
        except (duckdb.IOException, duckdb.InvalidInputException) as exc:  # DuckDB names the file
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise WarehouseError(f"cannot read the warehouse at {self.root}: {first}") from None
        finally:
            con.close()

    def graded_cell_ids(self, epoch: str, among: Collection[str] | None = None) -> set[str]:
        """Cells of an epoch (of ``among``, if given) that already have a graded answer: never
        queried again."""
        sql = "SELECT DISTINCT cell_id FROM t WHERE epoch = ? AND error_kind IS NULL"
        params: list[Any] = [epoch]
        if among is not None:
            if not among:
                return set()
            sql += " AND list_contains(?, cell_id)"
            params.append(sorted(among))
        return {row[0] for row in self.query_table("answers", sql, params)}

    def latest_errors(self, epoch: str) -> dict[str, str]:
        """Cells of an epoch with no graded answer whose latest attempt failed: their error kind."""
        rows = self.query_table(
            "answers",
            "SELECT cell_id, arg_max(error_kind, answered_at) FROM t WHERE epoch = ? "
            "GROUP BY cell_id HAVING count(*) FILTER (WHERE error_kind IS NULL) = 0",
            [epoch],
        )
        return {cell: kind for cell, kind in rows}

    def answer_validities(self, epoch: str) -> dict[str, str]:
        """Cells of an epoch with a graded answer: the validity of the latest one (the answer
        ``results`` shows); ``unknown`` for answers stored before validity existed."""
        self.upgrade()  # an older warehouse's files lack the column: the empty file adds it
        rows = self.query_table(
            "answers",
            "SELECT cell_id, coalesce(arg_max(validity, answered_at), 'unknown') FROM t "
            "WHERE epoch = ? AND error_kind IS NULL GROUP BY cell_id",
            [epoch],
        )
        return {cell: validity for cell, validity in rows}

    def run_start(self, run_id: str) -> dict[str, Any] | None:
        """The `start` row of a run (its epoch, config and flow run), or None if unknown."""
        rows = self.query_table(
            "runs",
            "SELECT epoch, config_json, flow_run_id FROM t WHERE run_id = ? AND event = 'start'",
            [run_id],
        )
        if not rows:
            return None
        epoch, config_json, flow_run_id = rows[0]
        return {"epoch": epoch, "config_json": config_json, "flow_run_id": flow_run_id}

    def epoch_of_flow_run(self, flow_run_id: str) -> str | None:
        """The epoch an earlier attempt of this Prefect flow run swept: its retry keeps it."""
        rows = self.query_table(
            "runs",
            "SELECT epoch FROM t WHERE flow_run_id = ? AND event = 'start' ORDER BY \"at\" LIMIT 1",
            [flow_run_id],
        )
        return str(rows[0][0]) if rows else None

    def remembered_fits(self, cell_ids: Collection[str]) -> dict[str, RememberedFit]:
        """Of ``cell_ids``, those fitted to a token length by the model's tokenizer: the fit
        their latest cells row stores (one query, whatever the number of cells)."""
        if not cell_ids:
            return {}
        rows = self.query_table(
            "cells",
            "SELECT cell_id, filler_chars, planned_tokens, haystack_length, prompt_sha256 "
            "FROM t JOIN (SELECT unnest(?::VARCHAR[]) AS cell_id) wanted USING (cell_id) "
            "WHERE prompt_sha256 IS NOT NULL AND filler_chars IS NOT NULL "
            "AND planned_tokens IS NOT NULL AND length_unit = 'tokens' "
            "AND length_basis = 'tokenizer' "
            "QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY created_at DESC, run_id DESC)"
            " = 1",
            [sorted(set(cell_ids))],
        )
        return {
            cell: RememberedFit(int(chars), int(planned), hay, str(sha))
            for cell, chars, planned, hay, sha in rows
        }

    def known_cell_ids(self) -> set[str]:
        rows = self.query_table(
            "cells", "SELECT DISTINCT cell_id FROM t WHERE prompt_sha256 IS NOT NULL", []
        )
        return {row[0] for row in rows}
