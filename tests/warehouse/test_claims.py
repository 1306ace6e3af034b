"""Claims on cells: one run at a time per (epoch, cell); renewed leases; crashed runs lapse."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from needlescope.warehouse.store.claims import CLAIMS_FILE, Claims

CELLS = [f"c{i:03d}" for i in range(50)]


def test_a_claimed_cell_is_busy_for_others_until_finished(tmp_path: Path) -> None:
    first, second = Claims(tmp_path, "r1", 60), Claims(tmp_path, "r2", 60)
    assert first.take("e", CELLS[:10]).mine == CELLS[:10]
    taken = second.take("e", CELLS[:20])
    assert taken.busy == CELLS[:10] and taken.mine == CELLS[10:20]
    assert first.take("e", CELLS[:3]).mine == CELLS[:3]  # a run's own claims stay its own
    first.finish("e", graded=CELLS[:5], freed=CELLS[5:10])
    again = second.take("e", CELLS[:10])
    assert again.graded == CELLS[:5]  # graded meanwhile: skipped, never asked twice
    assert again.mine == CELLS[5:10] and not again.lapsed  # freed by a failure: taken
    assert second.take("other-epoch", CELLS[:5]).mine == CELLS[:5]  # epochs are apart


def test_a_run_resending_graded_cells_claims_them_and_others_still_wait(tmp_path: Path) -> None:
    first = Claims(tmp_path, "r1", 60)
    first.take("e", CELLS[:6])
    first.finish("e", graded=CELLS[:6])
    rerun = Claims(tmp_path, "r2", 60, resend=CELLS[:3])  # rerun --validity of three of them
    taken = rerun.take("e", CELLS[:6])
    assert taken.mine == CELLS[:3] and taken.graded == CELLS[3:6]
    # While the rerun sends them, another run of the epoch waits for them, then skips them.
    other = Claims(tmp_path, "r3", 60)
    assert other.take("e", CELLS[:3]).busy == CELLS[:3]
    rerun.finish("e", graded=CELLS[:3])
    assert other.take("e", CELLS[:3]).graded == CELLS[:3]


def test_held_names_what_a_run_still_holds(tmp_path: Path) -> None:
    run = Claims(tmp_path, "r1", 60)
    run.take("e", CELLS[:4])
    run.finish("e", graded=CELLS[:1], freed=CELLS[1:2])
    assert run.held("e", CELLS[:4]) == set(CELLS[2:4])


def foreign_claim(
    root: Path, cells: list[str], expires_in: float, host: str = "elsewhere/1"
) -> None:
    """A claim of a run on another machine (its process cannot be looked at from here)."""
    con = sqlite3.connect(root / CLAIMS_FILE)
    now = time.time()
    con.executemany(
        "INSERT INTO claims VALUES (?, ?, 'held', 'other:1', 'other', ?, 1, ?, ?)",
        [("e", c, host, now + expires_in, now) for c in cells],
    )
    con.commit()
    con.close()


def test_a_claim_lapses_after_its_timeout_unless_renewed(tmp_path: Path) -> None:
    run = Claims(tmp_path, "r1", 1.0)
    foreign_claim(tmp_path, CELLS[:3], expires_in=1.0)
    assert run.take("e", CELLS[:3]).busy == CELLS[:3]
    run.take("e", CELLS[3:6])
    for _ in range(4):  # renewed every 0.4 s: alive for 1.6 s, longer than the timeout
        time.sleep(0.4)
        assert run.renew() == 3
    late = Claims(tmp_path, "r2", 1.0).take("e", CELLS[:6])
    assert late.mine == late.lapsed == CELLS[:3]  # the unrenewed claim lapsed
    assert late.busy == CELLS[3:6]  # the renewed one did not


def test_a_dead_process_on_this_machine_is_not_waited_for(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(gone.stdout)
    run = Claims(tmp_path, "r1", 3600)
    con = sqlite3.connect(tmp_path / CLAIMS_FILE)
    con.execute(
        "INSERT INTO claims VALUES ('e', 'c1', 'held', 'dead:1', 'dead', ?, ?, ?, ?)",
        [run.host, pid, time.time() + 3600, time.time()],
    )
    con.commit()
    con.close()
    taken = run.take("e", ["c1"])
    assert taken.mine == taken.lapsed == ["c1"]


def test_release_all_frees_what_a_run_held(tmp_path: Path) -> None:
    first = Claims(tmp_path, "r1", 3600)
    first.take("e", CELLS[:5])
    first.finish("e", graded=CELLS[:2])
    first.release_all()
    taken = Claims(tmp_path, "r2", 3600).take("e", CELLS[:5])
    assert taken.graded == CELLS[:2] and taken.mine == CELLS[2:5]


def _race(root: str, barrier: Any, results: Any) -> None:
    claims = Claims(Path(root), f"run-{multiprocessing.current_process().pid}", 3600)
    barrier.wait(timeout=60)
    mine: list[str] = []
    for start in range(0, len(CELLS), 5):
        mine += claims.take("e", CELLS[start : start + 5]).mine
    results.put(mine)


def test_racing_processes_never_claim_one_cell_twice(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    workers = [
        context.Process(target=_race, args=(str(tmp_path), barrier, results)) for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    claimed = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    every = [cell for mine in claimed for cell in mine]
    assert sorted(every) == CELLS  # each cell once, by one process
