"""Several processes creating one new warehouse at the same moment: none of them fails."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from needlescope.warehouse.store import Warehouse

PROCESSES = 4
ROUNDS = 12


def _create_each(roots: list[str], barrier: Any, results: Any) -> None:
    for root in roots:
        barrier.wait(timeout=60)
        try:
            results.put((root, Warehouse(root).ensure().id))
        except Exception as exc:  # reported to the test, which names it
            results.put((root, f"{type(exc).__name__}: {exc}"))


def test_processes_creating_one_warehouse_at_once_all_succeed(tmp_path: Path) -> None:
    roots = [str(tmp_path / f"wh{i}") for i in range(ROUNDS)]
    context = multiprocessing.get_context("spawn")  # fork and the Arrow writer deadlock
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(target=_create_each, args=(roots, barrier, results))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in range(PROCESSES * ROUNDS)]
    for worker in workers:
        worker.join(timeout=60)
    ids: dict[str, set[str]] = {}
    for root, outcome in outcomes:
        ids.setdefault(root, set()).add(outcome)
    failures = {root: seen for root, seen in ids.items() if any(" " in s for s in seen)}
    assert not failures, failures
    # Every process of a round sees the one identity the first of them wrote.
    assert all(len(seen) == 1 for seen in ids.values()), ids
    assert not list(tmp_path.rglob("*.partial")), "a temp file was left behind"
    assert not list(tmp_path.rglob("*.tmp"))
