"""warehouse/stats/memo.py: a statistic is computed once for the same files, by one thread
while the others wait, and again when the files change."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import duckdb

from needlescope.warehouse.stats.memo import remembered
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
