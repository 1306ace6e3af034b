"""The book of provider batches: an intent takes its cells from the run's lease, a batched
cell never lapses to another run, one collector at a time, and a record's end frees or grades
its cells."""

from __future__ import annotations

import time
from pathlib import Path

from needlescope.providers.batch import BatchState, created_batch
from needlescope.warehouse.store.batches import BatchBook, new_intent
from needlescope.warehouse.store.claims import KEEP_FINISHED_S, Claims

CELLS = [f"c{i:03d}" for i in range(6)]


def test_an_intent_holds_its_cells_past_any_lease(tmp_path: Path) -> None:
    first = Claims(tmp_path, "r1", 0.05)
    first.take("e", CELLS[:4])
    book = BatchBook(first)
    intent = new_intent()
    # A cell the run no longer holds (taken by another run meanwhile) is left out.
    first.finish("e", graded=[], freed=[CELLS[3]])
    assert book.intend(intent, "e", "m", "openai", CELLS[:4], "sha") == CELLS[:3]
    time.sleep(0.1)  # every lease of the first run has lapsed by now
    second = Claims(tmp_path, "r2", 60)
    taken = second.take("e", CELLS[:4])
    assert taken.batched == CELLS[:3] and taken.mine == [CELLS[3]] and not taken.lapsed
    second.release_all()
    [record] = book.records("m")
    assert (record.status, record.batch_id, record.cells) == ("intent", None, CELLS[:3])

    book.created(intent, "batch_1", "validating", {"processing": 3})
    book.polled(intent, "in_progress", {"succeeded": 1, "processing": 2})
    [record] = book.records("m")
    assert (record.status, record.batch_id) == ("open", "batch_1")
    assert record.counts == {"processing": 2, "succeeded": 1}
    assert book.batch_ids() == {"batch_1"}

    book.collected(intent, graded=CELLS[:2], failed=[CELLS[2]])
    assert book.records("m") == []
    third = Claims(tmp_path, "r3", 60)
    again = third.take("e", CELLS[:3])
    assert again.graded == CELLS[:2] and again.mine == [CELLS[2]]  # a failed cell is free


def test_one_collector_at_a_time_and_a_handed_over_record_is_adopted_at_once(
    tmp_path: Path,
) -> None:
    first = Claims(tmp_path, "r1", 60)
    first.take("e", CELLS)
    book = BatchBook(first)
    intent = new_intent()
    book.intend(intent, "e", "m", "anthropic", CELLS, "sha")
    other = BatchBook(Claims(tmp_path, "r2", 60))
    assert not other.adopt(intent)  # the first run polls it
    assert book.adopt(intent)  # its own record, again
    book.hand_over()
    assert other.adopt(intent) and not book.adopt(intent)


def test_an_unsent_intent_gives_its_cells_back_to_the_run_that_resolves_it(
    tmp_path: Path,
) -> None:
    killed = Claims(tmp_path, "r1", 60)
    killed.take("e", CELLS)
    intent = new_intent()
    BatchBook(killed).intend(intent, "e", "m", "gemini", CELLS, "sha")
    resumed = Claims(tmp_path, "r2", 60)
    book = BatchBook(resumed)
    assert book.unsent(intent) == CELLS
    assert resumed.take("e", CELLS).mine == CELLS  # held by the run that resolved it
    assert book.records("m") == []
    assert [r.status for r in book.records(open_only=False)] == ["unsent"]


def test_batched_claims_are_never_pruned(tmp_path: Path) -> None:
    claims = Claims(tmp_path, "r1", 60)
    claims.take("e", CELLS)
    BatchBook(claims).intend(new_intent(), "e", "m", "openai", CELLS, "sha")
    with claims.transaction() as con:
        con.execute("UPDATE claims SET updated = ?", [time.time() - 2 * KEEP_FINISHED_S])
    claims.release_all()
    assert Claims(tmp_path, "r2", 60).take("e", CELLS).batched == CELLS


def state(batch_id: str, *, tag: str | None, count: int, created: float) -> BatchState:
    return BatchState(batch_id, "in_progress", False, count, tag=tag, created_at=created)


def test_a_lost_create_is_found_by_its_tag_or_by_its_size_and_time() -> None:
    listed = [
        state("b3", tag=None, count=5, created=300.0),
        state("b2", tag="ns-x", count=4, created=200.0),
        state("b1", tag=None, count=4, created=100.0),
    ]
    assert created_batch(listed, tag="ns-x", request_count=9, since=0).batch_id == "b2"
    assert created_batch(listed, tag="ns-y", request_count=4, since=0) is None
    # Untagged (Anthropic): the oldest of its size since the intent.
    assert created_batch(listed, tag=None, request_count=4, since=0).batch_id == "b1"
    assert created_batch(listed, tag=None, request_count=4, since=150).batch_id == "b2"
    assert created_batch(listed, tag=None, request_count=7, since=0) is None
