"""The book of provider batches, beside the claims in ``claims.sqlite``: what makes a batch
sweep exactly once across kills.

Before a batch is created its *intent* is written (cells, content hash, time), and in the same
transaction its cells pass from the run's lease to the intent (claim state ``batched``: held by
the record, never lapsing). The provider's batch id is written once the create returns. A run
that finds an intent without a batch id matches it to the provider's batches before anything
else is sent; a record is polled and collected by one run at a time (its *collector* lease).

Design: docs/design/warehouse.md#batches
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from needlescope.warehouse.store.claims import Claims

# intent: written, create not known to have happened; open: created at the provider;
# collected: its answers stored; unsent: matched to no batch (its cells went back to a run).
OPEN_STATES = ("intent", "open")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    intent TEXT PRIMARY KEY,      -- needlescope's name of the batch, and its tag
    epoch TEXT NOT NULL,
    model TEXT NOT NULL,
    provider TEXT NOT NULL,
    cells TEXT NOT NULL,          -- JSON list of the cell ids it answers
    content_sha256 TEXT NOT NULL, -- of the requests as sent
    intended REAL NOT NULL,       -- unix time the intent was written (before the create)
    batch_id TEXT,                -- the provider's id, once created (or matched)
    status TEXT NOT NULL,         -- intent | open | collected | unsent
    counts TEXT,                  -- JSON: requests by outcome, as last polled
    provider_status TEXT,         -- the provider's word for it, as last polled
    excluded TEXT,                -- JSON list of batch ids its cells proved not to be in
    run_id TEXT NOT NULL,         -- the run that wrote the intent
    collector TEXT,               -- the run polling it (a lease, as a claim's)
    host TEXT,
    pid INTEGER,
    expires REAL,
    updated REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batches_by_model ON batches (model, status);
"""


@dataclass
class BatchRecord:
    intent: str
    epoch: str
    model: str
    provider: str
    cells: list[str]
    content_sha256: str
    intended: float
    batch_id: str | None
    status: str
    run_id: str
    counts: dict[str, int] = field(default_factory=dict)
    provider_status: str | None = None
    excluded: list[str] = field(default_factory=list)


_COLUMNS = (
    "intent, epoch, model, provider, cells, content_sha256, intended, batch_id, status, run_id,"
    " counts, provider_status, excluded"
)


def _record(row: Sequence[object]) -> BatchRecord:
    values = list(row)
    values[4] = json.loads(str(values[4]))
    values[10] = json.loads(str(values[10])) if values[10] else {}
    values[12] = json.loads(str(values[12])) if values[12] else []
    return BatchRecord(*values)  # type: ignore[arg-type]


def new_intent() -> str:
    """A batch's name: fits every provider's tag and Anthropic's custom-id alphabet."""
    return f"ns-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"


class BatchBook:
    """The batch records of a warehouse, read and written on behalf of one run's ``claims``."""

    def __init__(self, claims: Claims) -> None:
        self.claims = claims
        with claims.transaction() as con:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)

    def records(self, model: str | None = None, *, open_only: bool = True) -> list[BatchRecord]:
        """Records oldest first; ``open_only``: those not yet collected or resolved unsent."""
        where, args = [], []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if open_only:
            where.append("status IN ('intent', 'open')")
        sql = f"SELECT {_COLUMNS} FROM batches"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self.claims.transaction() as con:
            return [_record(r) for r in con.execute(sql + " ORDER BY intended", args)]

    def batch_ids(self) -> set[str]:
        """The provider's ids of every batch the book knows (a match never takes one twice)."""
        with self.claims.transaction() as con:
            found = con.execute("SELECT batch_id FROM batches WHERE batch_id IS NOT NULL")
            return {row[0] for row in found}

    def adopt(self, intent: str) -> bool:
        """Become the record's collector, unless a live run is (its lease unlapsed)."""
        claims = self.claims
        with claims.transaction() as con:
            row = con.execute(
                "SELECT collector, host, pid, expires, status FROM batches WHERE intent = ?",
                [intent],
            ).fetchone()
            if row is None or row[4] not in OPEN_STATES:
                return False
            collector, host, pid, expires, _ = row
            now = time.time()
            if collector not in (None, claims.holder) and not claims.lapsed(
                host, pid, expires, now
            ):
                return False
            con.execute(
                "UPDATE batches SET collector = ?, host = ?, pid = ?, expires = ?, updated = ?"
                " WHERE intent = ?",
                [claims.holder, claims.host, claims.pid, now + claims.timeout_s, now, intent],
            )
            return True

    def intend(
        self, intent: str, epoch: str, model: str, provider: str, cells: Sequence[str], sha: str
    ) -> list[str]:
        """Write the intent and pass to it the cells of ``cells`` this run holds: those it
        answers (a cell whose lease lapsed to another run meanwhile is left out)."""
        claims = self.claims
        with claims.transaction() as con:
            now = time.time()
            mine = claims.held_in(con, epoch, cells)
            kept = [c for c in cells if c in mine]
            if not kept:
                return []
            con.execute(
                "INSERT INTO batches (intent, epoch, model, provider, cells, content_sha256,"
                " intended, status, run_id, collector, host, pid, expires, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'intent', ?, ?, ?, ?, ?, ?)",
                [
                    intent,
                    epoch,
                    model,
                    provider,
                    json.dumps(kept),
                    sha,
                    now,
                    claims.run_id,
                    claims.holder,
                    claims.host,
                    claims.pid,
                    now + claims.timeout_s,
                    now,
                ],
            )
            con.executemany(
                "UPDATE claims SET state = 'batched', holder = ?, expires = NULL, updated = ?"
                " WHERE epoch = ? AND cell_id = ?",
                [(intent, now, epoch, c) for c in kept],
            )
            return kept

    def created(
        self, intent: str, batch_id: str, status: str, counts: dict[str, int] | None = None
    ) -> None:
        self._set(intent, "open", batch_id=batch_id, provider_status=status, counts=counts)

    def polled(self, intent: str, status: str, counts: dict[str, int]) -> None:
        self._set(intent, "open", provider_status=status, counts=counts)

    def exclude(self, intent: str, batch_id: str) -> None:
        """``batch_id`` proved (by its custom ids) not to be the intent's: match it again."""
        with self.claims.transaction() as con:
            row = con.execute("SELECT excluded FROM batches WHERE intent = ?", [intent]).fetchone()
            excluded = json.loads(row[0]) if row and row[0] else []
            con.execute(
                "UPDATE batches SET status = 'intent', batch_id = NULL, excluded = ?,"
                " updated = ? WHERE intent = ?",
                [json.dumps([*excluded, batch_id]), time.time(), intent],
            )

    def unsent(self, intent: str) -> list[str]:
        """The intent matched no batch: it was never created. Its cells come back to this run
        (held, as after a claim); the cells it gives back."""
        claims = self.claims
        with claims.transaction() as con:
            now = time.time()
            row = con.execute(
                "SELECT epoch, cells FROM batches WHERE intent = ? AND status = 'intent'", [intent]
            ).fetchone()
            if row is None:
                return []
            epoch, cells = row[0], json.loads(row[1])
            con.execute(
                "UPDATE batches SET status = 'unsent', collector = NULL, updated = ?"
                " WHERE intent = ?",
                [now, intent],
            )
            con.executemany(
                "UPDATE claims SET state = 'held', holder = ?, run_id = ?, host = ?, pid = ?,"
                " expires = ?, updated = ? WHERE epoch = ? AND cell_id = ? AND holder = ?",
                [
                    (
                        claims.holder,
                        claims.run_id,
                        claims.host,
                        claims.pid,
                        now + claims.timeout_s,
                        now,
                        epoch,
                        c,
                        intent,
                    )
                    for c in cells
                ],
            )
            return list(cells)

    def collected(self, intent: str, graded: Sequence[str], failed: Sequence[str]) -> None:
        """The record's answers are stored: its graded cells are done in the epoch, its failed
        ones free for a rerun."""
        with self.claims.transaction() as con:
            now = time.time()
            row = con.execute("SELECT epoch FROM batches WHERE intent = ?", [intent]).fetchone()
            if row is None:
                return
            for state, cells in (("graded", graded), ("free", failed)):
                con.executemany(
                    "UPDATE claims SET state = ?, holder = NULL, expires = NULL, updated = ?"
                    " WHERE epoch = ? AND cell_id = ? AND holder = ?",
                    [(state, now, row[0], c, intent) for c in cells],
                )
            con.execute(
                "UPDATE batches SET status = 'collected', collector = NULL, updated = ?"
                " WHERE intent = ?",
                [now, intent],
            )

    def renew(self) -> None:
        claims = self.claims
        with claims.transaction() as con:
            now = time.time()
            con.execute(
                "UPDATE batches SET expires = ?, updated = ? WHERE collector = ?"
                " AND status IN ('intent', 'open')",
                [now + claims.timeout_s, now, claims.holder],
            )

    def hand_over(self) -> None:
        """This run stops polling its records (it is ending): the next run adopts them at once."""
        with self.claims.transaction() as con:
            con.execute(
                "UPDATE batches SET collector = NULL, expires = NULL, updated = ?"
                " WHERE collector = ?",
                [time.time(), self.claims.holder],
            )

    def _set(
        self,
        intent: str,
        status: str,
        *,
        batch_id: str | None = None,
        provider_status: str | None = None,
        counts: dict[str, int] | None = None,
    ) -> None:
        with self.claims.transaction() as con:
            con.execute(
                "UPDATE batches SET status = ?, batch_id = coalesce(?, batch_id),"
                " provider_status = coalesce(?, provider_status), counts = coalesce(?, counts),"
                " updated = ? WHERE intent = ?",
                [
                    status,
                    batch_id,
                    provider_status,
                    None if counts is None else json.dumps(counts, sort_keys=True),
                    time.time(),
                    intent,
                ],
            )
