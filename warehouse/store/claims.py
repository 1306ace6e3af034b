"""Claims on cells: within an epoch, one sweep at a time asks a cell and grades it.

Before a sweep builds a batch it claims the batch's cells; a cell another live sweep holds is
left to it, and a cell graded meanwhile is skipped. A claim is a lease: renewed while the sweep
works, marked graded once the answer is stored, freed when the cell failed, lapsed after the
claim timeout when its sweep stops renewing. The claims live in the warehouse's
``claims.sqlite`` (SQLite's locking makes each claim an atomic compare-and-set; it needs working
POSIX locks: docs/operations.md, "Warehouses across machines").

Design: docs/design/warehouse.md#claims
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CLAIMS_FILE = "claims.sqlite"
KEEP_FINISHED_S = 7 * 24 * 3600  # graded and freed rows older than this are pruned
_CHUNK = 400  # cell ids per statement (SQLite caps a statement's parameters)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    epoch TEXT NOT NULL,
    cell_id TEXT NOT NULL,
    state TEXT NOT NULL,          -- held | graded | free | batched
    holder TEXT,                  -- the claiming run's token (batched: the batch's intent)
    run_id TEXT,
    host TEXT,                    -- hostname and pid namespace of the claiming process
    pid INTEGER,
    expires REAL,                 -- unix time after which a held claim lapses
    updated REAL NOT NULL,
    PRIMARY KEY (epoch, cell_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS claims_by_holder ON claims (holder);
"""


def host_identity() -> str:
    """This machine (and pid namespace: containers share hostnames less than kernels)."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{socket.gethostname()}/{namespace}"


def alive(pid: int) -> bool:
    """Whether a process of this machine with ``pid`` is running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Taken:
    """What a claim on some cells found: cells now ours, graded meanwhile, held elsewhere."""

    mine: list[str] = field(default_factory=list)
    graded: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    lapsed: list[str] = field(default_factory=list)  # of ``mine``: taken from a crashed run
    # In a provider's batch (warehouse/store/batches.py): its record holds them, not a lease.
    batched: list[str] = field(default_factory=list)


class Claims:
    """One run's claims on the cells of a warehouse (see the module's docstring)."""

    def __init__(
        self, root: Path, run_id: str, timeout_s: float, resend: Collection[str] = ()
    ) -> None:
        self.path = root / CLAIMS_FILE
        self.run_id = run_id
        self.timeout_s = timeout_s
        # Cells this run sends again although graded (rerun --validity): claimed like free ones.
        self.resend = frozenset(resend)
        self.holder = f"{run_id}:{uuid.uuid4().hex[:8]}"
        self.host = host_identity()
        self.pid = os.getpid()
        with self.transaction() as con:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        # A connection per transaction: callers run in worker threads (asyncio.to_thread).
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")  # the write lock first: read-check-write is atomic
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()

    def lapsed(self, host: str | None, pid: int | None, expires: float | None, now: float) -> bool:
        if expires is not None and expires < now:
            return True
        # A claimer on this machine whose process is gone (kill -9) is not waited for.
        return host == self.host and pid is not None and pid != self.pid and not alive(pid)

    def take(self, epoch: str, cell_ids: Sequence[str]) -> Taken:
        """Claim every cell of ``cell_ids`` that is free, lapsed or already ours."""
        taken = Taken()
        for chunk in _chunks(cell_ids):
            with self.transaction() as con:
                now = time.time()
                marks = ",".join("?" * len(chunk))
                found = {
                    row[0]: row[1:]
                    for row in con.execute(
                        "SELECT cell_id, state, holder, host, pid, expires FROM claims"
                        f" WHERE epoch = ? AND cell_id IN ({marks})",
                        [epoch, *chunk],
                    )
                }
                mine = []
                for cell in chunk:
                    state, holder, host, pid, expires = found.get(cell, ("free",) + (None,) * 4)
                    if state == "graded" and cell not in self.resend:
                        taken.graded.append(cell)
                    elif state == "batched":
                        taken.batched.append(cell)
                    elif state in ("graded", "free") or holder == self.holder:
                        mine.append(cell)
                    elif self.lapsed(host, pid, expires, now):
                        mine.append(cell)
                        taken.lapsed.append(cell)
                    else:
                        taken.busy.append(cell)
                expires_at = now + self.timeout_s
                con.executemany(
                    "INSERT INTO claims VALUES (?, ?, 'held', ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (epoch, cell_id) DO UPDATE SET state = 'held',"
                    " holder = excluded.holder, run_id = excluded.run_id, host = excluded.host,"
                    " pid = excluded.pid, expires = excluded.expires, updated = excluded.updated",
                    [
                        (epoch, c, self.holder, self.run_id, self.host, self.pid, expires_at, now)
                        for c in mine
                    ],
                )
                taken.mine.extend(mine)
        return taken

    def renew(self) -> int:
        """Push back the lapse of every claim this run holds; how many it holds."""
        with self.transaction() as con:
            now = time.time()
            return con.execute(
                "UPDATE claims SET expires = ?, updated = ? WHERE holder = ? AND state = 'held'",
                [now + self.timeout_s, now, self.holder],
            ).rowcount

    def held_in(self, con: sqlite3.Connection, epoch: str, cell_ids: Sequence[str]) -> set[str]:
        """Which of ``cell_ids`` this run holds, read inside the transaction ``con``."""
        held: set[str] = set()
        for chunk in _chunks(cell_ids):
            held.update(
                row[0]
                for row in con.execute(
                    "SELECT cell_id FROM claims WHERE epoch = ? AND holder = ?"
                    f" AND state = 'held' AND cell_id IN ({','.join('?' * len(chunk))})",
                    [epoch, self.holder, *chunk],
                )
            )
        return held

    def held(self, epoch: str, cell_ids: Sequence[str]) -> set[str]:
        """Which of ``cell_ids`` this run still holds (a claim lapsed while this run stalled
        may have gone to another run, which then answers the cell)."""
        with self.transaction() as con:
            return self.held_in(con, epoch, cell_ids)

    def finish(self, epoch: str, graded: Sequence[str], freed: Sequence[str] = ()) -> None:
        """Cells whose answer is stored (graded: no run asks them again in the epoch), and
        cells this run gives up (failed, dropped, unsent: another run may take them)."""
        for state, cells in (("graded", graded), ("free", freed)):
            for chunk in _chunks(cells):
                with self.transaction() as con:
                    con.executemany(
                        "UPDATE claims SET state = ?, expires = NULL, updated = ?"
                        " WHERE epoch = ? AND cell_id = ? AND holder = ? AND state = 'held'",
                        [(state, time.time(), epoch, c, self.holder) for c in chunk],
                    )

    def release_all(self) -> None:
        """Free whatever this run still holds (it is ending), and prune old finished rows."""
        with self.transaction() as con:
            now = time.time()
            con.execute(
                "UPDATE claims SET state = 'free', expires = NULL, updated = ?"
                " WHERE holder = ? AND state = 'held'",
                [now, self.holder],
            )
            con.execute(
                "DELETE FROM claims WHERE state IN ('graded', 'free') AND updated < ?",
                [now - KEEP_FINISHED_S],
            )


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]
