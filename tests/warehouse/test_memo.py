"""warehouse/stats/memo.py: a statistic is computed once for the same files, by one thread
while the others wait, and again when the files change."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import duckdb
import pytest

from needlescope.warehouse.stats.memo import remembered, remembered_many
from needlescope.warehouse.store import views


def test_one_thread_computes_the_others_wait_and_new_files_compute_again() -> None:
    con = duckdb.connect()
    con.execute("SET VARIABLE needlescope_files_answers = ['a.parquet']")
    calls: list[str] = []
    started = threading.Event()

    def slow() -> str:
        calls.append(threading.current_thread().name)
        started.set()
        time.sleep(0.2)
        return f"figure {len(calls)}"

    # a connection per thread, beside con, as the report's sections have
    others = [views.beside(con) for _ in range(4)]

    def ask(own: duckdb.DuckDBPyConnection) -> str:
        return remembered(own, ("test-stat", 1), slow)

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(ask, others[0])
        started.wait(5)
        rest = [pool.submit(ask, own) for own in others[1:]]
        found = [first.result(), *(f.result() for f in rest)]
    assert found == ["figure 1"] * 4 and len(calls) == 1
    assert remembered(con, ("test-stat", 2), slow) == "figure 2"  # other arguments
    # a setting is not data: the same files, the same figure
    con.execute("SET VARIABLE recall_unstable_range = 20.0")
    assert remembered(con, ("test-stat", 1), slow) == "figure 1"
    con.execute("SET VARIABLE needlescope_files_answers = ['a.parquet', 'b.parquet']")
    assert remembered(con, ("test-stat", 1), slow) == "figure 3"  # a file was added


def test_many_keys_each_computed_once_and_a_failed_one_by_the_thread_waiting() -> None:
    con = duckdb.connect()
    con.execute("SET VARIABLE needlescope_files_answers = ['many.parquet']")
    asked: list[list[tuple[str, int]]] = []
    started = threading.Event()

    def first(keys: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
        asked.append(keys)
        started.set()
        time.sleep(0.2)
        if ("k", 3) in keys:
            raise RuntimeError("the first thread fails")
        return {}

    def second(keys: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
        asked.append(keys)
        return {key: f"value {key[1]}" for key in keys}

    with ThreadPoolExecutor(2) as pool:
        failing = pool.submit(remembered_many, views.beside(con), [("k", 2), ("k", 3)], first)
        started.wait(5)
        later = pool.submit(remembered_many, views.beside(con), [("k", 3), ("k", 1)], second)
        found = later.result(10)
        with pytest.raises(RuntimeError, match="fails"):
            failing.result(10)
    # the second computed its own key, waited for the first's, and computed it after it failed
    assert asked == [[("k", 2), ("k", 3)], [("k", 1)], [("k", 3)]]
    assert found == {("k", 3): "value 3", ("k", 1): "value 1"}
    assert remembered_many(con, [("k", 1), ("k", 3)], first) == found  # remembered, in order
    assert remembered(con, ("k", 2), lambda: "value 2") == "value 2"  # the failure kept nothing


def test_a_connection_reading_no_warehouse_files_is_never_remembered() -> None:
    """Two connections of tables of their own (no file lists) hold different data: each
    statistic is computed for the one asking."""
    calls: list[int] = []

    def count() -> int:
        calls.append(1)
        return len(calls)

    plain = duckdb.connect()
    assert remembered(plain, ("test-own-tables",), count) == 1
    assert remembered(duckdb.connect(), ("test-own-tables",), count) == 2
    assert remembered_many(plain, [("a",), ("b",)], lambda keys: {k: k[0] for k in keys}) == {
        ("a",): "a",
        ("b",): "b",
    }
