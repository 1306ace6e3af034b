from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from needlescope.errors import WarehouseError
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.schema import TABLES

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def cell(cell_id: str, **extra: object) -> dict[str, object]:
    return {
        "cell_id": cell_id,
        "context_id": "ctx",
        "run_id": "r1",
        "created_at": NOW,
        "model": "m",
        "probe": "recall",
        "filler": "pattern",
        "length": 100,
        "length_unit": "tokens",
        "needle_count": 2,
        "repeat": 0,
        "expected": "[1111, 2222]",
        **extra,
    }


def answer(
    cell_id: str, epoch: str = "e1", at: datetime = NOW, **extra: object
) -> dict[str, object]:
    return {
        "run_id": "r1",
        "epoch": epoch,
        "cell_id": cell_id,
        "model": "m",
        "probe": "recall",
        "answered_at": at,
        **extra,
    }


def test_views_work_on_an_empty_warehouse(tmp_path: Path) -> None:
    con = Warehouse(tmp_path).ensure().connect()
    for view in ("results", "answers", "cells", "runs", "failed_cells", "accuracy_by_length"):
        assert con.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,)


def test_results_prefer_graded_answer_over_failures(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell("c1"), cell("c2")])
    store.append("answers", [answer("c1", error_kind="timeout", error="slow")])
    store.append(
        "answers", [answer("c1", at=NOW + timedelta(seconds=1), parse_ok=True, accuracy=50.0)]
    )
    store.append("answers", [answer("c1", at=NOW + timedelta(seconds=2), error_kind="timeout")])
    store.append("answers", [answer("c2", error_kind="server_error", error="503")])
    con = store.connect()
    rows = dict(con.sql("SELECT cell_id, coalesce(error_kind, 'graded') FROM results").fetchall())
    assert rows == {"c1": "graded", "c2": "server_error"}
    assert con.sql("SELECT cell_id FROM failed_cells").fetchall() == [("c2",)]
    assert store.graded_cell_ids("e1") == {"c1"}
    assert store.graded_cell_ids("e2") == set()


def test_epochs_are_separate_rows(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell("c1")])
    store.append("answers", [answer("c1", "e1", parse_ok=True, accuracy=100.0)])
    store.append("answers", [answer("c1", "e2", parse_ok=True, accuracy=0.0)])
    con = store.connect()
    assert sorted(con.sql("SELECT epoch, accuracy FROM results").fetchall()) == [
        ("e1", 100.0),
        ("e2", 0.0),
    ]


def test_duplicate_cell_rows_are_collapsed(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell("c1")])
    store.append("cells", [cell("c1", run_id="r2", created_at=NOW + timedelta(hours=1))])
    store.append("answers", [answer("c1", parse_ok=True, accuracy=100.0)])
    con = store.connect()
    assert con.execute("SELECT count(*) FROM cells").fetchone() == (1,)
    assert con.execute("SELECT count(*) FROM results").fetchone() == (1,)


def test_files_match_the_schema_and_no_partials_remain(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    path = store.append(
        "answers", [answer("c1", parse_ok=False, parse_error="no JSON")], parts=["recall", "a/b c"]
    )
    assert path is not None and path.parent.name == "a_b_c"
    assert pq.read_schema(path).equals(TABLES["answers"], check_metadata=False)
    assert not list(tmp_path.rglob("*.partial"))


def test_orphaned_partial_of_dead_writer_is_removed(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    orphan = (
        store.parquet
        / "answers"
        / ".20260101T000000000000-999999999-00001-deadbeef.parquet.partial"
    )
    orphan.write_bytes(b"PAR1 half a file")
    Warehouse(tmp_path).ensure()
    assert not orphan.exists()
    assert store.connect().execute("SELECT count(*) FROM answers").fetchone() == (0,)


def test_unwritable_warehouse_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(WarehouseError, match="cannot write warehouse at") as caught:
        Warehouse(blocker / "wh").ensure()
    assert "\n" not in str(caught.value)


def test_missing_warehouse_is_reported(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="no warehouse at"):
        Warehouse(tmp_path / "none").connect()


def test_reader_never_sees_a_partial_file_while_writer_appends(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell(f"c{i}") for i in range(200)])
    errors: list[BaseException] = []
    counts: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                con = Warehouse(tmp_path).connect()
                counts.append(con.execute("SELECT count(*) FROM results").fetchone()[0])
                con.close()
            except BaseException as exc:  # any failure is the test's finding
                errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(200):
        store.append("answers", [answer(f"c{i}", parse_ok=True, accuracy=float(i % 100))])
    stop.set()
    reader.join()
    assert not errors
    assert counts == sorted(counts)
    assert store.connect().execute("SELECT count(*) FROM results").fetchone() == (200,)


def test_views_file_is_queryable_by_duckdb(tmp_path: Path) -> None:
    import duckdb

    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell("c1")])
    store.append("answers", [answer("c1", parse_ok=True, accuracy=75.0)])
    assert store.refresh_views_file()
    con = duckdb.connect(str(store.db_path), read_only=True)
    assert con.sql("SELECT accuracy FROM results").fetchall() == [(75.0,)]


def test_a_warehouse_of_an_older_schema_is_upgraded_in_place(tmp_path: Path) -> None:
    import pyarrow as pa

    store = Warehouse(tmp_path).ensure()
    old_cells = TABLES["cells"].remove(TABLES["cells"].get_field_index("facts"))
    for path in (store.parquet / "cells").glob("*.parquet"):
        path.unlink()
    pq.write_table(old_cells.empty_table(), store.parquet / "cells" / "_empty.parquet")
    old_row = {k: v for k, v in cell("c1").items()}
    pq.write_table(
        pa.Table.from_pylist([{"schema_version": 1, **old_row}], schema=old_cells),
        store.parquet / "cells" / "old.parquet",
    )
    con = Warehouse(tmp_path).connect()
    assert con.execute("SELECT cell_id, facts FROM cells").fetchall() == [("c1", None)]


def test_results_flag_prompts_off_their_planned_length(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell("near", planned_tokens=1000), cell("far", planned_tokens=1000)])
    store.append(
        "answers",
        [
            answer("near", parse_ok=True, accuracy=1.0, prompt_tokens=1015, truncated=False),
            answer("far", parse_ok=True, accuracy=1.0, prompt_tokens=1100, truncated=True),
        ],
    )
    con = store.connect()
    flags = dict(
        (cell_id, (off, cut))
        for cell_id, off, cut in con.execute(
            "SELECT cell_id, length_off, truncated FROM results"
        ).fetchall()
    )
    assert flags == {"near": (False, False), "far": (True, True)}
    con.execute("SET VARIABLE length_tolerance = 0.2")
    assert con.execute("SELECT bool_or(length_off) FROM results").fetchone() == (False,)


def test_uncounted_replies_stay_out_of_the_seeds_counts(tmp_path: Path) -> None:
    # The seed's rule: an empty reply is neither answered nor a parse failure; an answer whose
    # keys its analysis could not order is answered but left out of the graded count and mean.
    from needlescope.probes.recall import probe as recall

    replies = ['{"1": 1111, "2": 2222}', '{"1": 1111}', "no JSON", "", '{"01": 1111, "2": 2}']
    graded = recall.grade_batch([[1111, 2222]] * 5, [{}] * 5, replies)
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell(f"c{i}") for i in range(5)])
    store.append(
        "answers",
        [
            answer(f"c{i}", parse_ok=g.parse_ok, accuracy=g.accuracy, **g.figures)
            for i, g in enumerate(graded.grades)
        ],
    )
    con = store.connect()
    rows = con.sql(
        "SELECT answers, parse_failures, graded, mean_accuracy FROM accuracy_by_length"
    ).fetchall()
    assert rows == [(4, 1, 2, 75.0)]
    uncounted = con.sql("SELECT cell_id, uncounted FROM results WHERE uncounted IS NOT NULL")
    assert sorted(c for c, _ in uncounted.fetchall()) == ["c3", "c4"]


def test_a_schema_2_warehouse_reads_response_repaired_as_null(tmp_path: Path) -> None:
    """Schema 3's step (response-repaired) adds a column: older answers read it as NULL."""
    import pyarrow as pa

    from needlescope.warehouse.store.schema import MIGRATIONS, SCHEMA_VERSION

    assert [v for v, _, _ in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))
    assert MIGRATIONS[3][1] == "response-repaired"
    store = Warehouse(tmp_path).ensure()
    schema_2 = TABLES["answers"].remove(TABLES["answers"].get_field_index("response_repaired"))
    empty = store.parquet / "answers" / "_empty.parquet"
    pq.write_table(schema_2.empty_table(), empty)
    store.append("cells", [cell("c1")])
    pq.write_table(
        pa.Table.from_pylist([{"schema_version": 2, **answer("c1", accuracy=50.0)}], schema_2),
        store.parquet / "answers" / "old.parquet",
    )
    con = Warehouse(tmp_path).connect()  # the empty file is rewritten to schema 3
    assert pq.read_schema(empty).equals(TABLES["answers"], check_metadata=False)
    assert con.execute("SELECT accuracy, response_repaired FROM results").fetchall() == [
        (50.0, None)
    ]


def test_text_utf8_cannot_hold_is_stored_as_replacement_characters(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell("c1")])
    store.append("answers", [answer("c1", response='{"1": 1234} \ud800', answered='["\udfff"]')])
    con = store.connect()
    assert con.execute("SELECT response, answered FROM answers").fetchall() == [
        ('{"1": 1234} \ufffd', '["\ufffd"]')
    ]


def test_a_folder_another_tool_made_is_never_written_into(tmp_path: Path) -> None:
    (tmp_path / "results.csv").write_text("a,b\n")
    with pytest.raises(WarehouseError, match="not a needlescope warehouse"):
        Warehouse(tmp_path).ensure()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]
    # Hidden files (a .gitkeep) and needlescope's own names are no sign of another tool.
    (tmp_path / "results.csv").unlink()
    (tmp_path / ".gitkeep").write_text("")
    Warehouse(tmp_path).ensure()
