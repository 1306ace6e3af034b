"""warehouse/stats/memo.py: a statistic is computed once for the same files, by one thread
while the others wait, and again when the files change."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import duckdb

from needlescope.warehouse.stats.memo import remembered


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

    def ask() -> str:
        own = con.cursor()  # a connection per thread, as the report's sections have
        return remembered(own, ("test-stat", 1), slow)

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(ask)
        started.wait(5)
        rest = [pool.submit(ask) for _ in range(3)]
        found = [first.result(), *(f.result() for f in rest)]
    assert found == ["figure 1"] * 4 and len(calls) == 1
    assert remembered(con, ("test-stat", 2), slow) == "figure 2"  # other arguments
    con.execute("SET VARIABLE needlescope_files_answers = ['a.parquet', 'b.parquet']")
    assert remembered(con, ("test-stat", 1), slow) == "figure 3"  # a file was added
